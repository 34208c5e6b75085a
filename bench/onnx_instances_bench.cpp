// Throughput of 2 instances of the heavy MLP (.cache/models/heavy_mlp_1024.onnx) against 1, with 2 clients
// each sending one row at a time and waiting for its answer, as `gantry serve` runs them: through the
// dynamic batcher (one batch thread per instance). Rounds alternate the two so both see the same machine.
// Prints
//   BENCH onnx-instances-gain ratio=<requests/s with 2 instances / requests/s with 1>
// and, as context, the same without dynamic batching (each request its own Run).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "bench_timing.h"
#include "gantry/runtime/dynamic_batcher.h"
#include "gantry/runtime/runtime.h"

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using gantry::bench::median;

const fs::path kModel = fs::path(GANTRY_DEPS_DIR) / "models" / "heavy_mlp_1024.onnx";
constexpr int kClients = 2;

gantry::Tensor row(float v) {
  std::vector<float> x(1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = v * static_cast<float>(i % 13) - 0.5f;
  return gantry::Tensor::from_values<float>(gantry::DType::kFloat32, gantry::Shape({1, 1024}), x).value();
}

// Requests per second of `clients` clients sending `per_client` requests each, one at a time.
double throughput(gantry::runtime::ModelHandle& h, bool batched, int per_client) {
  std::unique_ptr<gantry::runtime::DynamicBatcher> batcher;
  if (batched)
    batcher = std::make_unique<gantry::runtime::DynamicBatcher>(h.name(), h.model(),
                                                                gantry::runtime::BatchingConfig{});
  const std::string input = h->metadata().inputs[0].name;
  std::atomic<int> failures{0};
  const auto t0 = clock_type::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < per_client; ++i) {
        std::vector<gantry::NamedTensor> in{{input, row(0.01f * static_cast<float>(c + i))}};
        if (!batched) {
          if (!h->infer_one(in).ok()) ++failures;
          continue;
        }
        std::mutex mu;
        std::condition_variable cv;
        bool done = false;
        gantry::runtime::DynamicBatcher::Item item;
        item.inputs = std::move(in);
        item.done = [&](gantry::Result<std::vector<gantry::NamedTensor>> out,
                        const gantry::runtime::BatchTiming&, gantry::runtime::ModelHandle) {
          if (!out.ok()) ++failures;
          std::lock_guard lock(mu);
          done = true;
          cv.notify_one();
        };
        if (!batcher->submit(std::move(item)).ok()) {
          ++failures;
          continue;
        }
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return done; });
      }
    });
  }
  for (auto& t : clients) t.join();
  const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (failures > 0) std::fprintf(stderr, "onnx-instances: %d request(s) failed\n", failures.load());
  return kClients * per_client / s;
}

}  // namespace

int main() {
  if (!fs::exists(kModel)) {
    std::fprintf(stderr, "onnx-instances: %s is missing (run make setup)\n", kModel.c_str());
    return 1;
  }
  gantry::runtime::RuntimeOptions ro;
  ro.verdict_cache_dir = "none";
  ro.keep_alive_timer = false;
  auto rt = gantry::runtime::Runtime::create(std::move(ro));
  if (!rt.ok()) {
    std::fprintf(stderr, "onnx-instances: %s\n", rt.status().message().c_str());
    return 1;
  }
  std::vector<gantry::runtime::ModelHandle> handles;
  for (int n : {1, 2}) {
    gantry::runtime::LoadOptions lo;
    lo.name = "heavy-x" + std::to_string(n);
    lo.instances = n;
    auto h = (*rt)->load(kModel.string(), lo);
    if (!h.ok()) {
      std::fprintf(stderr, "onnx-instances: %s\n", h.status().message().c_str());
      return 1;
    }
    (void)throughput(*h, true, 3);  // warm-up
    handles.push_back(std::move(*h));
  }
  const int rounds = 5, per_client = 12;
  std::vector<double> one, two, one_plain, two_plain;
  for (int r = 0; r < rounds; ++r) {
    one.push_back(throughput(handles[0], true, per_client));
    two.push_back(throughput(handles[1], true, per_client));
    one_plain.push_back(throughput(handles[0], false, per_client));
    two_plain.push_back(throughput(handles[1], false, per_client));
  }
  const double m1 = median(one), m2 = median(two);
  std::printf("BENCH onnx-instances-gain ratio=%.3f\n", m2 / m1);
  std::printf(
      "onnx-instances: heavy MLP, %d clients, %u CPUs: batched %.1f req/s with 1 instance, %.1f with 2; "
      "unbatched "
      "%.1f vs %.1f (ratio %.3f)\n",
      kClients, std::thread::hardware_concurrency(), m1, m2, median(one_plain), median(two_plain),
      median(two_plain) / median(one_plain));
  return 0;
}
