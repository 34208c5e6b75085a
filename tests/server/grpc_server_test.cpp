// The gRPC front end inside a real Server (the MLP from .cache/models): port 0, a taken port, and a
// drain (ServerReady false, other calls UNAVAILABLE, ServerLive still true).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "gantry/runtime/runtime.h"
#include "gantry/server/server.h"
#include "grpc_predict_v2.grpc.pb.h"

namespace gantry::server {
namespace {

class GrpcServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = std::filesystem::path(GANTRY_DEPS_DIR) / "models" / "mlp_64_128_10.onnx";
    ASSERT_TRUE(std::filesystem::exists(model_)) << model_ << " missing: run make setup";
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

// Over gRPC, like HTTP: a prompt longer than the context is INVALID_ARGUMENT (never a retryable
// RESOURCE_EXHAUSTED), and a zero batch for Silero (which made ONNX Runtime call std::terminate) is
// INVALID_ARGUMENT naming the input; the server answers normally afterwards.
TEST_F(GrpcServerTest, OversizedPromptAndZeroBatchAreInvalidArgument) {
  const auto models = std::filesystem::path(GANTRY_DEPS_DIR) / "models";
  for (const char* f : {"tiny-llama.gguf", "silero_vad_v5.onnx"})
    ASSERT_TRUE(std::filesystem::exists(models / f)) << f << " missing: run make setup";
  ServeOptions o = options(0);
  o.models = {(models / "tiny-llama.gguf").string(), (models / "silero_vad_v5.onnx").string()};
  o.load.factory.intra_op_threads = 1;
  o.load.factory.llama.n_ctx = 256;
  o.load.factory.llama.parallel = 1;
  auto srv = Server::start(*rt_, o);
  ASSERT_TRUE(srv.ok()) << srv.status().message();
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string((*srv)->grpc_port()), grpc::InsecureChannelCredentials()));
  auto infer = [&](const inference::ModelInferRequest& req) {
    grpc::ClientContext ctx;
    inference::ModelInferResponse r;
    return stub->ModelInfer(&ctx, req, &r);
  };

  inference::ModelInferRequest prompt;
  prompt.set_model_name("tiny-llama");
  auto* in = prompt.add_inputs();
  in->set_name("prompt");
  in->set_datatype("BYTES");
  in->add_shape(1);
  std::string text;
  for (int i = 0; i < 600; ++i) text += " word";
  in->mutable_contents()->add_bytes_contents(text);
  grpc::Status st = infer(prompt);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("context length exceeded"), std::string::npos) << st.error_message();
  in->mutable_contents()->set_bytes_contents(0, "Hello");
  st = infer(prompt);
  EXPECT_TRUE(st.ok()) << st.error_message();

  auto silero = [](int64_t batch) {
    inference::ModelInferRequest r;
    r.set_model_name("silero_vad_v5");
    const std::vector<std::pair<const char*, std::vector<int64_t>>> inputs = {{"input", {batch, 512}},
                                                                              {"state", {2, batch, 128}}};
    for (const auto& [name, shape] : inputs) {
      auto* t = r.add_inputs();
      t->set_name(name);
      t->set_datatype("FP32");
      int64_t n = 1;
      for (int64_t d : shape) t->add_shape(d), n *= d;
      for (int64_t i = 0; i < n; ++i) t->mutable_contents()->add_fp32_contents(0.0f);
    }
    auto* sr = r.add_inputs();
    sr->set_name("sr");
    sr->set_datatype("INT64");
    sr->mutable_contents()->add_int64_contents(16000);
    return r;
  };
  st = infer(silero(0));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("input 'input': dimension 0 is 0"), std::string::npos)
      << st.error_message();
  st = infer(silero(1));
  EXPECT_TRUE(st.ok()) << st.error_message();
  (*srv)->stop();
}

// --grpc-port same: gRPC on the HTTP port; set_unready() (the start of --drain-delay) turns ServerReady
// false while every other call is still served, unlike drain().
TEST_F(GrpcServerTest, SamePortServesGrpcAndSetUnreadyKeepsServing) {
  auto srv = Server::start(*rt_, options(kGrpcSamePort));
  ASSERT_TRUE(srv.ok()) << srv.status().message();
  ASSERT_EQ((*srv)->grpc_port(), (*srv)->port());
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string((*srv)->port()), grpc::InsecureChannelCredentials()));
  auto ready = [&] {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse r;
    EXPECT_TRUE(stub->ServerReady(&ctx, {}, &r).ok());
    return r.ready();
  };
  auto model_ready = [&] {
    grpc::ClientContext ctx;
    inference::ModelReadyRequest req;
    req.set_name("mlp_64_128_10");
    inference::ModelReadyResponse r;
    EXPECT_EQ(stub->ModelReady(&ctx, req, &r).error_code(), grpc::StatusCode::OK);
    return r.ready();
  };
  EXPECT_TRUE(ready());
  EXPECT_TRUE(model_ready());
  (*srv)->set_unready();
  EXPECT_FALSE(ready());
  EXPECT_TRUE(model_ready()) << "unready is not draining: calls are still served";
  EXPECT_TRUE((*srv)->drain(std::chrono::seconds(5)));
  (*srv)->stop();
}

TEST_F(GrpcServerTest, MinusOneTurnsGrpcOff) {
  auto srv = Server::start(*rt_, options(-1));
  ASSERT_TRUE(srv.ok()) << srv.status().message();
  EXPECT_EQ((*srv)->grpc_port(), 0);
}

}  // namespace
}  // namespace gantry::server
