// gantry serve throughput on a compute-heavy generated ONNX model (heavy_mlp_1024, ~25M parameters),
// 32 concurrent HTTP clients each sending KServe v2 infer requests of one row (binary tensors):
//   BENCH serve-dynamic-batching-gain  requests/s with dynamic batching / without (goal >= 3; Triton's
//                                      docs show 3.7x)
//   BENCH serve-http-efficiency        requests/s over HTTP (batched) / the same batched inference
//                                      in-process, Model::infer_batch of 32 one-row requests (goal >= 0.8)
// All three measured here, in this run, on the same loaded model, in interleaved rounds (each round runs
// the three in a rotated order, so a change in the machine's load weighs on all alike). SERVE_BENCH_SECONDS
// sets the measuring time per case, over all rounds (default 4). A failed request is an error (exit 1).
// Also printed, to explain the ratio: the process's CPU time per request in each case (unlike requests/s,
// not inflated by other processes competing for the cores) and the batched server's mean batch size
// (from its gantry_batch_size metric): with 32 closed-loop clients and batches of up to 32, clients
// answered together come back together, so the server runs smaller batches than the in-process 32.
#include <sys/resource.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <thread>
#include <vector>

#include "gantry/runtime/runtime.h"
#include "gantry/server/server.h"

namespace {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using namespace gantry;

constexpr int kClients = 32;
constexpr int kWidth = 1024;

double seconds_per_case() {
  const char* s = std::getenv("SERVE_BENCH_SECONDS");
  return s ? std::max(0.5, std::atof(s)) : 4.0;
}

// The binary-tensor request body: a JSON header, then 1 x 1024 f32 values; the output comes back binary.
std::pair<std::string, size_t> request_body(int seed) {
  std::string header =
      R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1,1024],"parameters":{"binary_data_size":4096}}],)"
      R"("outputs":[{"name":"output","parameters":{"binary_data":true}}]})";
  std::vector<float> x(kWidth);
  for (int i = 0; i < kWidth; ++i) x[i] = static_cast<float>(((i * 31 + seed * 17) % 97) - 48) / 48.0f;
  std::string body = header;
  body.append(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
  return {body, header.size()};
}

// CPU seconds used by this process (every thread: clients, server, ONNX Runtime).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

struct Load {
  uint64_t ok = 0;
  uint64_t failed = 0;
  double seconds = 0;
  double cpu_seconds = 0;  // this process's CPU time over the measured window
  double mean_batch = 0;   // requests per batch the server ran (batched HTTP only)
  double rps() const { return seconds > 0 ? static_cast<double>(ok) / seconds : 0; }
  double cpu_ms_per_request() const { return ok ? 1e3 * cpu_seconds / static_cast<double>(ok) : 0; }
  // Adds one round's measurement (the mean batch weighted by the requests answered).
  void add(const Load& round) {
    const double n = static_cast<double>(ok), m = static_cast<double>(round.ok);
    mean_batch = n + m > 0 ? (mean_batch * n + round.mean_batch * m) / (n + m) : 0;
    ok += round.ok;
    failed += round.failed;
    seconds += round.seconds;
    cpu_seconds += round.cpu_seconds;
  }
};

// kClients keep-alive connections sending requests back to back; counts answers in the timed window.
Load drive(uint16_t port, double warmup_s, double measure_s) {
  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<uint64_t> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto [body, header_len] = request_body(c);
      net::io_context ioc;
      tcp::socket socket(ioc);
      beast::flat_buffer buffer;
      boost::system::error_code ec;
      socket.connect({net::ip::make_address("127.0.0.1"), port}, ec);
      while (!stop.load() && !ec) {
        http::request<http::string_body> req{http::verb::post, "/v2/models/heavy_mlp_1024/infer", 11};
        req.set(http::field::host, "127.0.0.1");
        req.set(http::field::content_type, "application/octet-stream");
        req.set("Inference-Header-Content-Length", std::to_string(header_len));
        req.body() = body;
        req.prepare_payload();
        http::write(socket, req, ec);
        if (ec) break;
        http::response<http::string_body> res;
        http::read(socket, buffer, res, ec);
        if (ec) break;
        if (measuring.load()) (res.result_int() == 200 ? ok : failed).fetch_add(1);
      }
      if (ec && !stop.load()) failed.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup_s));
  const auto t0 = Clock::now();
  const double cpu0 = cpu_seconds();
  measuring = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(measure_s));
  measuring = false;
  Load load;
  load.cpu_seconds = cpu_seconds() - cpu0;
  load.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  load.ok = ok.load();
  load.failed = failed.load();
  stop = true;
  for (auto& t : clients) t.join();
  return load;
}

// The mean of the server's gantry_batch_size histogram (0 when it has none): one GET /metrics.
double mean_batch_size(uint16_t port) {
  net::io_context ioc;
  tcp::socket socket(ioc);
  boost::system::error_code ec;
  socket.connect({net::ip::make_address("127.0.0.1"), port}, ec);
  http::request<http::empty_body> req{http::verb::get, "/metrics", 11};
  req.set(http::field::host, "127.0.0.1");
  if (!ec) http::write(socket, req, ec);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  if (!ec) http::read(socket, buffer, res, ec);
  if (ec) return 0;
  auto value = [&](std::string_view series) {
    const size_t at = res.body().find(series);
    if (at == std::string::npos) return 0.0;
    const size_t space = res.body().find(' ', res.body().find('}', at));
    return space == std::string::npos ? 0.0 : std::atof(res.body().c_str() + space + 1);
  };
  const double count = value("gantry_batch_size_count{");
  return count > 0 ? value("gantry_batch_size_sum{") / count : 0;
}

Load serve_and_drive(runtime::Runtime& rt, const std::string& model, bool batching, double secs) {
  server::ServeOptions o;
  o.models = {model};
  o.port = 0;
  o.max_queue = 1024;
  o.dynamic_batching = batching;
  o.batching.max_batch_size = kClients;
  auto srv = server::Server::start(rt, o);
  if (!srv.ok()) {
    std::fprintf(stderr, "serve_bench: %s\n", srv.status().message().c_str());
    std::exit(1);
  }
  Load l = drive((*srv)->port(), 1.0, secs);
  if (batching) l.mean_batch = mean_batch_size((*srv)->port());
  (*srv)->drain(std::chrono::seconds(30));
  (*srv)->stop();
  return l;
}

// The reference: the same batched inference with no HTTP, 32 one-row requests per infer_batch.
Load in_process(backend::Model& model, double secs) {
  std::vector<std::vector<NamedTensor>> requests;
  for (int c = 0; c < kClients; ++c) {
    auto [body, header_len] = request_body(c);
    std::vector<float> x(kWidth);
    std::memcpy(x.data(), body.data() + header_len, x.size() * sizeof(float));
    requests.push_back(
        {{"input", Tensor::from_values<float>(DType::kFloat32, Shape({1, kWidth}), x).value()}});
  }
  for (int i = 0; i < 3; ++i) (void)model.infer_batch(requests);  // warm-up
  Load l;
  const auto t0 = Clock::now();
  const double cpu0 = cpu_seconds();
  while (std::chrono::duration<double>(Clock::now() - t0).count() < secs) {
    auto out = model.infer_batch(requests);
    (out.ok() ? l.ok : l.failed) += kClients;
  }
  l.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  l.cpu_seconds = cpu_seconds() - cpu0;
  return l;
}

}  // namespace

int main() {
  const auto model = std::filesystem::path(GANTRY_DEPS_DIR) / "models" / "heavy_mlp_1024.onnx";
  if (!std::filesystem::exists(model)) {
    std::fprintf(stderr, "serve_bench: %s missing: run make setup\n", model.c_str());
    return 1;
  }
  runtime::RuntimeOptions ro;
  ro.verdict_cache_dir = "none";
  ro.keep_alive_timer = false;
  auto rt = runtime::Runtime::create(std::move(ro));
  if (!rt.ok()) {
    std::fprintf(stderr, "serve_bench: %s\n", rt.status().message().c_str());
    return 1;
  }
  const double secs = seconds_per_case();
  constexpr int kRounds = 4;
  Load batched, unbatched, direct;
  for (int r = 0; r < kRounds; ++r) {
    for (int k = 0; k < 3; ++k) {
      switch ((r + k) % 3) {
        case 0:
          batched.add(serve_and_drive(**rt, model.string(), true, secs / kRounds));
          break;
        case 1:
          unbatched.add(serve_and_drive(**rt, model.string(), false, secs / kRounds));
          break;
        default: {
          auto handle = (*rt)->get("heavy_mlp_1024");  // loaded by the first server, kept by the runtime
          if (!handle.ok()) {
            std::fprintf(stderr, "serve_bench: %s\n", handle.status().message().c_str());
            return 1;
          }
          direct.add(in_process(handle->model(), secs / kRounds));
        }
      }
    }
  }
  std::printf(
      "serve heavy_mlp_1024, %d clients, one row each: batched %.1f req/s (%llu failed), unbatched %.1f "
      "req/s "
      "(%llu failed), in-process infer_batch x%d %.1f req/s\n",
      kClients, batched.rps(), static_cast<unsigned long long>(batched.failed), unbatched.rps(),
      static_cast<unsigned long long>(unbatched.failed), kClients, direct.rps());
  std::printf(
      "cpu per request: batched %.3f ms (mean batch %.1f requests), unbatched %.3f ms, in-process %.3f ms "
      "(batch of %d); in-process / batched cpu %.3f\n",
      batched.cpu_ms_per_request(), batched.mean_batch, unbatched.cpu_ms_per_request(),
      direct.cpu_ms_per_request(), kClients,
      batched.cpu_ms_per_request() > 0 ? direct.cpu_ms_per_request() / batched.cpu_ms_per_request() : 0);
  if (batched.ok == 0 || unbatched.ok == 0 || direct.ok == 0 || batched.failed || unbatched.failed ||
      direct.failed) {
    std::fprintf(stderr, "serve_bench: a measurement failed (no answers, or failed requests): no ratio\n");
    return 1;
  }
  std::printf("BENCH serve-dynamic-batching-gain ratio=%.3f\n", batched.rps() / unbatched.rps());
  std::printf("BENCH serve-http-efficiency ratio=%.3f\n", batched.rps() / direct.rps());
  return 0;
}
