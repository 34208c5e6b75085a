// Shape buckets on mixed request sizes: the MLP (mlp_64_128_10, [batch,64]) with batches of 1..16 rows in a
// fixed pseudo-random order, memory pattern on, one intra-op thread; bucketed (batch rounded up to a multiple
// of 4, a session per bucket) against one session that sees every size. Blocks alternate. Prints
//   BENCH onnx-bucket-gain ratio=<requests/s bucketed / requests/s with one session>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "bench_timing.h"
#include "gantry/backend/onnx/onnx_model.h"

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using gantry::bench::median;

double per_second(gantry::onnx::OnnxModel& m, const std::vector<std::vector<gantry::NamedTensor>>& requests) {
  const auto t0 = clock_type::now();
  for (const auto& r : requests)
    if (!m.infer_one(r).ok()) std::fprintf(stderr, "onnx-bucket: a request failed\n");
  return static_cast<double>(requests.size()) / std::chrono::duration<double>(clock_type::now() - t0).count();
}

}  // namespace

int main() {
  const fs::path model = fs::path(GANTRY_DEPS_DIR) / "models" / "mlp_64_128_10.onnx";
  if (!fs::exists(model)) {
    std::fprintf(stderr, "onnx-bucket: %s is missing (run make setup)\n", model.c_str());
    return 1;
  }
  gantry::backend::Placement one;
  one.intra_op_threads = 1;
  one.onnx.memory_pattern = true;
  gantry::backend::Placement bucketed = one;
  bucketed.onnx.bucket_dim_granularity = 4;
  bucketed.onnx.bucket_max_dims = {{"batch", 16}};
  bucketed.onnx.bucket_dims = {{"input", {"batch"}}, {"logits", {"batch"}}};
  auto a = gantry::onnx::OnnxModel::open(model, one, "one-session");
  auto b = gantry::onnx::OnnxModel::open(model, bucketed, "bucketed");
  if (!a.ok() || !b.ok()) {
    std::fprintf(stderr, "onnx-bucket: %s %s\n", a.status().message().c_str(), b.status().message().c_str());
    return 1;
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> rows(1, 16);
  std::vector<std::vector<gantry::NamedTensor>> requests;
  for (int i = 0; i < 400; ++i) {
    const int64_t n = rows(rng);
    std::vector<float> v(static_cast<size_t>(n) * 64);
    for (size_t k = 0; k < v.size(); ++k) v[k] = 0.01f * static_cast<float>((k * 13 + i) % 29) - 0.1f;
    requests.push_back({{"input", gantry::Tensor::from_values<float>(gantry::DType::kFloat32,
                                                                        gantry::Shape({n, 64}), v)
                                      .value()}});
  }
  per_second(**a, requests);  // warm-up: every bucket's session made, every pattern planned
  per_second(**b, requests);
  std::vector<double> plain, buckets;
  for (int r = 0; r < 7; ++r) {
    plain.push_back(per_second(**a, requests));
    buckets.push_back(per_second(**b, requests));
  }
  std::printf("BENCH onnx-bucket-gain ratio=%.3f\n", median(buckets) / median(plain));
  std::printf("onnx-bucket: MLP, batches of 1-16 rows: %.0f req/s in one session, %.0f bucketed (%zu sessions)\n",
              median(plain), median(buckets), (*b)->bucket_sessions().size());
  return 0;
}
