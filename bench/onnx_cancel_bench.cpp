// How fast a cancelled ONNX run stops: models/slow_chain_256.onnx (~0.3 s of one CPU thread in ~3000
// small nodes) runs with a cancel check; another thread cancels it a third of the way in. Prints
//   BENCH onnx-cancel-latency ratio=<median time from cancel to return / median uncancelled run time>
// (goal: <= 0.05) with both times. A run that does not end Cancelled is an error (exit 1), never a number.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "bench_timing.h"
#include "gantry/backend/onnx/onnx_model.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using gantry::DType;
using gantry::NamedTensor;
using gantry::Shape;
using gantry::Tensor;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

int main() {
  const fs::path path = fs::path(GANTRY_DEPS_DIR) / "models" / "slow_chain_256.onnx";
  if (!fs::exists(path)) {
    std::fprintf(stderr, "onnx_cancel_bench: %s is missing (run make setup)\n", path.c_str());
    return 1;
  }
  gantry::backend::Placement p;
  p.provider = "cpu";
  p.intra_op_threads = 1;
  auto opened = gantry::onnx::OnnxModel::open(path, p);
  if (!opened.ok()) {
    std::fprintf(stderr, "onnx_cancel_bench: %s\n", opened.status().to_string().c_str());
    return 1;
  }
  auto& model = **opened;
  auto t = Tensor::allocate(DType::kFloat32, Shape({64, 256})).value();
  for (auto& x : t.values<float>()) x = 0.5f;
  std::vector<NamedTensor> inputs;
  inputs.push_back({"input", std::move(t)});

  constexpr int kRuns = 3, kCancels = 7;
  std::vector<double> run_ms;
  if (!model.infer_one(inputs).ok()) return 1;  // warm-up
  for (int i = 0; i < kRuns; ++i) {
    const auto a = Clock::now();
    auto out = model.infer_one(inputs);
    if (!out.ok()) {
      std::fprintf(stderr, "onnx_cancel_bench: %s\n", out.status().to_string().c_str());
      return 1;
    }
    run_ms.push_back(ms_between(a, Clock::now()));
  }
  const double one_run = gantry::bench::median(run_ms);

  std::vector<double> stop_ms;
  for (int i = 0; i < kCancels; ++i) {
    std::atomic<bool> cancel{false};
    std::promise<void> in_flight;
    std::once_flag once;
    const auto caller = std::this_thread::get_id();
    const gantry::backend::CancelCheck check = [&] {
      if (std::this_thread::get_id() != caller) std::call_once(once, [&] { in_flight.set_value(); });
      return cancel.load(std::memory_order_acquire);
    };
    auto started = in_flight.get_future();
    Clock::time_point cancelled_at{};
    std::thread canceller([&] {
      started.wait();
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(one_run / 3));
      cancelled_at = Clock::now();
      cancel.store(true, std::memory_order_release);
    });
    auto out = model.infer_cancellable(inputs, check);
    const auto returned = Clock::now();
    std::call_once(once, [&] { in_flight.set_value(); });
    canceller.join();
    if (out.ok() || out.status().code() != gantry::StatusCode::kCancelled) {
      std::fprintf(stderr, "onnx_cancel_bench: the cancelled run ended %s\n",
                   out.ok() ? "with outputs" : out.status().to_string().c_str());
      return 1;
    }
    stop_ms.push_back(ms_between(cancelled_at, returned));
  }
  const double stop = gantry::bench::median(stop_ms);
  std::printf("onnx cancel: one run %.1f ms (median of %d), cancel to return %.2f ms (median of %d)\n",
              one_run, kRuns, stop, kCancels);
  std::printf("BENCH onnx-cancel-latency ratio=%.4f\n", stop / one_run);
  return 0;
}
