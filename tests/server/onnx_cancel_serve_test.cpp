// `gantry serve` cancels an ONNX run whose client went away (HTTP, or a cancelled gRPC call), and one past
// its deadline
// (--max-generation-time): the KServe infer route hands the queue the request's cancel check, the queue adds
// the deadline, and the ONNX backend stops the run midway (models/slow_chain_256.onnx, ~0.3 s a run, 3000
// nodes). The model is the real one, wrapped so the test sees when its run starts and how it ends:
// synchronised on those events, never on sleeps.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "gantry/backend/backend.h"
#include "gantry/backend/onnx/onnx_backend.h"
#include "gantry/runtime/runtime.h"
#include "gantry/server/server.h"
#include "grpc_predict_v2.grpc.pb.h"
#include "wrapping_backend.h"

namespace gantry::server {
namespace {
namespace fs = std::filesystem;

const fs::path kSlow = fs::path(GANTRY_DEPS_DIR) / "models" / "slow_chain_256.onnx";

// What the wrapped model saw of its one watched run.
struct Seen {
  std::mutex mu;
  std::promise<void> started;
  std::promise<StatusCode> ended;
  bool armed = false;
};
Seen* g_seen = nullptr;

class WatchedModel final : public backend::Model {
 public:
  explicit WatchedModel(std::unique_ptr<backend::Model> inner) : inner_(std::move(inner)) {}
  const backend::ModelMetadata& metadata() const override { return inner_->metadata(); }
  Status init() override { return inner_->init(); }
  Result<std::vector<NamedTensor>> infer_one(std::span<const NamedTensor> inputs) override {
    return inner_->infer_one(inputs);
  }
  Result<std::vector<NamedTensor>> infer_cancellable(std::span<const NamedTensor> inputs,
                                                     const backend::CancelCheck& cancelled) override {
    Seen* seen = g_seen;
    if (seen) seen->started.set_value();
    auto out = inner_->infer_cancellable(inputs, cancelled);
    if (seen) seen->ended.set_value(out.ok() ? StatusCode::kOk : out.status().code());
    return out;
  }
  Status drain() override { return inner_->drain(); }
  Status reset() override { return inner_->reset(); }
  backend::ModelStats stats() const override { return inner_->stats(); }

 private:
  std::unique_ptr<backend::Model> inner_;
};

using WatchedBackend = testutil::WrappingBackend<WatchedModel>;

std::string infer_body() {
  std::string data;
  for (int i = 0; i < 64 * 256; ++i) data += i ? ",0.5" : "0.5";
  return R"({"inputs":[{"name":"input","datatype":"FP32","shape":[64,256],"data":[)" + data + "]}]}";
}

class OnnxCancelServe : public ::testing::Test {
 protected:
  void start(std::chrono::milliseconds max_run_time, bool grpc = false) {
    ASSERT_TRUE(fs::exists(kSlow)) << kSlow << " missing: run make setup";
    runtime::RuntimeOptions ro;
    ro.verdict_cache_dir = "none";
    ro.keep_alive_timer = false;
    ro.backends.push_back(std::make_unique<WatchedBackend>(onnx::make_onnx_backend()));
    auto rt = runtime::Runtime::create(std::move(ro));
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    rt_ = std::move(*rt);
    ServeOptions o;
    o.models = {kSlow.string()};
    o.port = 0;
    o.grpc_port = grpc ? 0 : -1;
    o.max_generation_time = max_run_time;
    o.load.factory.intra_op_threads = 1;
    auto srv = Server::start(*rt_, std::move(o));
    ASSERT_TRUE(srv.ok()) << srv.status().message();
    srv_ = std::move(*srv);
  }
  void TearDown() override {
    srv_.reset();
    rt_.reset();
    g_seen = nullptr;
  }
  std::unique_ptr<runtime::Runtime> rt_;
  std::unique_ptr<Server> srv_;
};

namespace net = boost::asio;
namespace http = boost::beast::http;

void send(net::ip::tcp::socket& socket, uint16_t port) {
  net::ip::tcp::resolver resolver(socket.get_executor());
  net::connect(socket, resolver.resolve("127.0.0.1", std::to_string(port)));
  http::request<http::string_body> req(http::verb::post, "/v2/models/slow_chain_256/infer", 11);
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = infer_body();
  req.prepare_payload();
  http::write(socket, req);
}

TEST_F(OnnxCancelServe, AClientThatLeavesCancelsItsRun) {
  start(std::chrono::milliseconds(600'000));
  if (HasFatalFailure()) return;
  Seen seen;
  g_seen = &seen;
  auto started = seen.started.get_future();
  auto ended = seen.ended.get_future();
  net::io_context io;
  net::ip::tcp::socket socket(io);
  send(socket, srv_->port());
  ASSERT_EQ(started.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "the run never started";
  socket.close();  // the client goes away mid-run
  ASSERT_EQ(ended.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "the run never ended";
  EXPECT_EQ(ended.get(), StatusCode::kCancelled);
}

TEST_F(OnnxCancelServe, ACancelledGrpcCallCancelsItsRun) {
  start(std::chrono::milliseconds(600'000), /*grpc=*/true);
  if (HasFatalFailure()) return;
  Seen seen;
  g_seen = &seen;
  auto started = seen.started.get_future();
  auto ended = seen.ended.get_future();
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(srv_->grpc_port()), grpc::InsecureChannelCredentials()));
  inference::ModelInferRequest req;
  req.set_model_name("slow_chain_256");
  auto* in = req.add_inputs();
  in->set_name("input");
  in->set_datatype("FP32");
  in->add_shape(64);
  in->add_shape(256);
  for (int i = 0; i < 64 * 256; ++i) in->mutable_contents()->add_fp32_contents(0.5f);
  grpc::ClientContext ctx;
  grpc::Status status;
  std::thread client([&] {
    inference::ModelInferResponse resp;
    status = stub->ModelInfer(&ctx, req, &resp);
  });
  const bool ran = started.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  ctx.TryCancel();  // the client cancels mid-run
  client.join();
  ASSERT_TRUE(ran) << "the run never started: " << status.error_message();
  ASSERT_EQ(ended.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "the run never ended";
  EXPECT_EQ(ended.get(), StatusCode::kCancelled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(OnnxCancelServe, ARunPastItsDeadlineIsCancelledAndAnswered) {
  start(std::chrono::milliseconds(1));  // passed by the time the run is asked to start
  if (HasFatalFailure()) return;
  Seen seen;
  g_seen = &seen;
  auto ended = seen.ended.get_future();
  net::io_context io;
  net::ip::tcp::socket socket(io);
  send(socket, srv_->port());
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  boost::system::error_code ec;
  http::read(socket, buffer, res, ec);
  ASSERT_EQ(ended.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(ended.get(), StatusCode::kCancelled);
  EXPECT_EQ(res.result_int(), 499u) << res.body();  // Cancelled, as a generation past its deadline
  EXPECT_NE(res.body().find("cancelled"), std::string::npos) << res.body();
}

}  // namespace
}  // namespace gantry::server
