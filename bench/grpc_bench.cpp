// gantry serve's KServe v2 gRPC front end against its HTTP one, on the MLP (mlp_64_128_10), 32
// concurrent clients sending one-row infer requests back to back:
//   BENCH grpc-vs-http-infer  requests/s over gRPC (ModelInfer, raw_input_contents, 32 concurrent
//                             streams on one channel, each call issued when the previous one of its
//                             stream completes) / over HTTP (KServe v2 binary tensors, 32 keep-alive
//                             connections, one blocking client thread each); goal >= 1
// Both measured in this run on one server (same model, batcher and workers), in alternating slices whose
// order swaps every round.
// GRPC_BENCH_SECONDS sets the measuring time per protocol (default 4).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "gantry/runtime/runtime.h"
#include "gantry/server/server.h"
#include "grpc_predict_v2.grpc.pb.h"

namespace {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using namespace gantry;

constexpr int kClients = 32;
constexpr int kWidth = 64;
const char* kModel = "mlp_64_128_10";

double seconds_per_case() {
  const char* s = std::getenv("GRPC_BENCH_SECONDS");
  return s ? std::max(0.5, std::atof(s)) : 4.0;
}

std::string row_bytes(int seed) {
  std::vector<float> x(kWidth);
  for (int i = 0; i < kWidth; ++i) x[i] = static_cast<float>(((i * 31 + seed * 17) % 97) - 48) / 48.0f;
  return std::string(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
}

struct Load {
  uint64_t ok = 0;
  uint64_t failed = 0;
  double seconds = 0;
  double rps() const { return seconds > 0 ? static_cast<double>(ok) / seconds : 0; }
};

// Runs `client(c, stop, measuring, ok, failed)` on kClients threads; counts answers in the timed window.
using Client = std::function<void(int, const std::atomic<bool>&, const std::atomic<bool>&,
                                  std::atomic<uint64_t>&, std::atomic<uint64_t>&)>;
Load drive(const Client& client, double warmup_s, double measure_s) {
  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<uint64_t> ok{0}, failed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) threads.emplace_back([&, c] { client(c, stop, measuring, ok, failed); });
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup_s));
  const auto t0 = Clock::now();
  measuring = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(measure_s));
  measuring = false;
  Load load;
  load.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  load.ok = ok.load();
  load.failed = failed.load();
  stop = true;
  for (auto& t : threads) t.join();
  return load;
}

// One KServe v2 binary-tensor infer over HTTP; the output's bytes, or "" on failure.
struct HttpClient {
  net::io_context ioc;
  tcp::socket socket{ioc};
  beast::flat_buffer buffer;
  std::string body;
  size_t header_len = 0;
  HttpClient(uint16_t port, const std::string& input_name, const std::string& output_name, int seed) {
    const std::string row = row_bytes(seed);
    std::string header = R"({"inputs":[{"name":")" + input_name + R"(","datatype":"FP32","shape":[1,64],)" +
                         R"("parameters":{"binary_data_size":256}}],"outputs":[{"name":")" + output_name +
                         R"(","parameters":{"binary_data":true}}]})";
    header_len = header.size();
    body = header + row;
    boost::system::error_code ec;
    socket.connect({net::ip::make_address("127.0.0.1"), port}, ec);
  }
  std::string infer() {
    boost::system::error_code ec;
    http::request<http::string_body> req{http::verb::post, std::string("/v2/models/") + kModel + "/infer",
                                         11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/octet-stream");
    req.set("Inference-Header-Content-Length", std::to_string(header_len));
    req.body() = body;
    req.prepare_payload();
    http::write(socket, req, ec);
    if (ec) return "";
    http::response<http::string_body> res;
    http::read(socket, buffer, res, ec);
    if (ec || res.result_int() != 200) return "";
    const size_t json = std::stoul(std::string(res["Inference-Header-Content-Length"]));
    return res.body().substr(json);
  }
};

inference::ModelInferRequest grpc_request(const std::string& input_name, int seed) {
  inference::ModelInferRequest r;
  r.set_model_name(kModel);
  auto* in = r.add_inputs();
  in->set_name(input_name);
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(kWidth);
  r.add_raw_input_contents(row_bytes(seed));
  return r;
}

std::string grpc_infer(inference::GRPCInferenceService::Stub& stub, const inference::ModelInferRequest& req) {
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  grpc::Status st = stub.ModelInfer(&ctx, req, &resp);
  if (!st.ok() || resp.raw_output_contents_size() != 1) return "";
  return resp.raw_output_contents(0);
}

double max_abs_diff(const std::string& a, const std::string& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i + 4 <= a.size(); i += 4) {
    float x, y;
    std::memcpy(&x, a.data() + i, 4);
    std::memcpy(&y, b.data() + i, 4);
    d = std::max(d, static_cast<double>(std::fabs(x - y)));
  }
  return d;
}

}  // namespace

int main() {
  const auto model = std::filesystem::path(GANTRY_DEPS_DIR) / "models" / (std::string(kModel) + ".onnx");
  if (!std::filesystem::exists(model)) {
    std::fprintf(stderr, "grpc_bench: %s missing: run make setup\n", model.c_str());
    return 1;
  }
  runtime::RuntimeOptions ro;
  ro.verdict_cache_dir = "none";
  ro.keep_alive_timer = false;
  auto rt = runtime::Runtime::create(std::move(ro));
  if (!rt.ok()) {
    std::fprintf(stderr, "grpc_bench: %s\n", rt.status().message().c_str());
    return 1;
  }
  server::ServeOptions o;
  o.models = {model.string()};
  o.port = 0;
  o.grpc_port = 0;
  o.max_queue = 1024;
  o.batching.max_batch_size = kClients;
  auto srv = server::Server::start(**rt, o);
  if (!srv.ok()) {
    std::fprintf(stderr, "grpc_bench: %s\n", srv.status().message().c_str());
    return 1;
  }
  auto handle = (*rt)->get(kModel);
  if (!handle.ok()) return 1;
  const std::string input = handle->model().metadata().inputs.at(0).name;
  const std::string output = handle->model().metadata().outputs.at(0).name;
  const uint16_t port = (*srv)->port();
  // GRPC_BENCH_CHANNELS (default 1) spreads the streams over that many connections.
  const int channels = std::clamp(
      std::getenv("GRPC_BENCH_CHANNELS") ? std::atoi(std::getenv("GRPC_BENCH_CHANNELS")) : 1, 1, kClients);
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs;
  for (int i = 0; i < channels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // its own connection
    stubs.push_back(inference::GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string((*srv)->grpc_port()), grpc::InsecureChannelCredentials(), args)));
  }
  auto& stub = stubs[0];

  // Both protocols give the same numbers for the same row.
  HttpClient check(port, input, output, 5);
  const double diff = max_abs_diff(check.infer(), grpc_infer(*stub, grpc_request(input, 5)));
  if (!(diff <= 1e-5)) {
    std::fprintf(stderr, "grpc_bench: gRPC and HTTP outputs differ (max |diff| %g)\n", diff);
    return 1;
  }

  const double secs = seconds_per_case();
  const Client http_client = [&](int c, const std::atomic<bool>& stop, const std::atomic<bool>& measuring,
                                 std::atomic<uint64_t>& ok, std::atomic<uint64_t>& failed) {
    HttpClient client(port, input, output, c);
    while (!stop.load()) {
      const bool good = !client.infer().empty();
      if (measuring.load()) (good ? ok : failed).fetch_add(1);
      if (!good) return;
    }
  };
  const Client grpc_client = [&](int c, const std::atomic<bool>& stop, const std::atomic<bool>& measuring,
                                 std::atomic<uint64_t>& ok, std::atomic<uint64_t>& failed) {
    // One stream: the next call starts from the previous one's completion (the callback API, so
    // the client holds no thread per call in flight, as a real asynchronous client would).
    const auto req = grpc_request(input, c);
    std::promise<void> ended;
    struct Loop {
      inference::GRPCInferenceService::Stub& stub;
      const inference::ModelInferRequest& req;
      const std::atomic<bool>& stop;
      const std::atomic<bool>& measuring;
      std::atomic<uint64_t>& ok;
      std::atomic<uint64_t>& failed;
      std::promise<void>& ended;
      std::unique_ptr<grpc::ClientContext> ctx;
      inference::ModelInferResponse resp;
      void next() {
        ctx = std::make_unique<grpc::ClientContext>();
        resp.Clear();
        stub.async()->ModelInfer(ctx.get(), &req, &resp, [this](grpc::Status st) {
          const bool good = st.ok() && resp.raw_output_contents_size() == 1;
          if (measuring.load()) (good ? ok : failed).fetch_add(1);
          if (!good || stop.load())
            ended.set_value();
          else
            next();
        });
      }
    } loop{*stubs[static_cast<size_t>(c % channels)], req, stop, measuring, ok, failed, ended, nullptr, {}};
    loop.next();
    ended.get_future().wait();
  };
  // Side by side: kRounds alternating slices of each, the order swapped every round (HTTP, gRPC, gRPC,
  // HTTP, ...), so a change in the machine's load (it may be shared) or a warm-up weighs on both alike.
  constexpr int kRounds = 4;
  Load over_http, over_grpc;
  for (int r = 0; r < kRounds; ++r) {
    const std::pair<const Client*, Load*> http_case{&http_client, &over_http},
        grpc_case{&grpc_client, &over_grpc};
    for (auto [client, total] :
         r % 2 == 0 ? std::array{http_case, grpc_case} : std::array{grpc_case, http_case}) {
      const Load l = drive(*client, 0.3, secs / kRounds);
      total->ok += l.ok;
      total->failed += l.failed;
      total->seconds += l.seconds;
    }
  }
  (*srv)->drain(std::chrono::seconds(30));
  (*srv)->stop();

  std::printf(
      "serve %s, %d clients, one row each: HTTP binary %.1f req/s (%llu failed), gRPC raw %.1f req/s (%llu "
      "failed), max |gRPC - HTTP| %g\n",
      kModel, kClients, over_http.rps(), static_cast<unsigned long long>(over_http.failed), over_grpc.rps(),
      static_cast<unsigned long long>(over_grpc.failed), diff);
  if (over_http.ok == 0 || over_grpc.ok == 0 || over_http.failed || over_grpc.failed) {
    std::fprintf(stderr, "grpc_bench: a measurement failed (no answers, or failed calls): no ratio\n");
    return 1;
  }
  std::printf("BENCH grpc-vs-http-infer ratio=%.3f\n", over_grpc.rps() / over_http.rps());
  return 0;
}
