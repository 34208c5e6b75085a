// The gRPC front end inside a real Server (the MLP from .cache/models): port 0, a taken port, and a
// drain (ServerReady false, other calls UNAVAILABLE, ServerLive still true).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "gantry/runtime/runtime.h"
#include "gantry/server/server.h"
#include "grpc_predict_v2.grpc.pb.h"

namespace gantry::server {
namespace {

class GrpcServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = std::filesystem::path(GANTRY_DEPS_DIR) / "models" / "mlp_64_128_10.onnx";
    if (!std::filesystem::exists(model_)) GTEST_SKIP() << model_ << " missing: run make setup";
    runtime::RuntimeOptions ro;
    ro.verdict_cache_dir = "none";
    ro.keep_alive_timer = false;
    auto rt = runtime::Runtime::create(std::move(ro));
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    rt_ = std::move(*rt);
  }
  ServeOptions options(int grpc_port) {
    ServeOptions o;
    o.models = {model_.string()};
    o.port = 0;
    o.grpc_port = grpc_port;
    return o;
  }
  std::filesystem::path model_;
  std::unique_ptr<runtime::Runtime> rt_;
};

TEST_F(GrpcServerTest, AnyFreePortThenDrainTurnsReadinessOff) {
  auto srv = Server::start(*rt_, options(0));
  ASSERT_TRUE(srv.ok()) << srv.status().message();
  ASSERT_NE((*srv)->grpc_port(), 0);
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string((*srv)->grpc_port()), grpc::InsecureChannelCredentials()));
  auto ready = [&] {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse r;
    EXPECT_TRUE(stub->ServerReady(&ctx, {}, &r).ok());
    return r.ready();
  };
  auto metadata_code = [&] {
    grpc::ClientContext ctx;
    inference::ServerMetadataResponse r;
    return stub->ServerMetadata(&ctx, {}, &r).error_code();
  };
  EXPECT_TRUE(ready());
  EXPECT_EQ(metadata_code(), grpc::StatusCode::OK);

  // A second server (its own runtime) may not take the same gRPC port.
  runtime::RuntimeOptions ro;
  ro.verdict_cache_dir = "none";
  ro.keep_alive_timer = false;
  auto rt2 = runtime::Runtime::create(std::move(ro));
  ASSERT_TRUE(rt2.ok());
  auto second = Server::start(**rt2, options((*srv)->grpc_port()));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("cannot listen for gRPC"), std::string::npos)
      << second.status().message();

  EXPECT_TRUE((*srv)->drain(std::chrono::seconds(5)));
  EXPECT_FALSE(ready());
  EXPECT_EQ(metadata_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::ClientContext ctx;
  inference::ServerLiveResponse live;
  EXPECT_TRUE(stub->ServerLive(&ctx, {}, &live).ok());
  EXPECT_TRUE(live.live());
  (*srv)->stop();
}

TEST_F(GrpcServerTest, MinusOneTurnsGrpcOff) {
  auto srv = Server::start(*rt_, options(-1));
  ASSERT_TRUE(srv.ok()) << srv.status().message();
  EXPECT_EQ((*srv)->grpc_port(), 0);
}

}  // namespace
}  // namespace gantry::server
