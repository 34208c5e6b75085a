// BENCH weights-quantize-q8_0: Gantry's Q8_0 quantisation throughput / ggml_quantize_chunk's, on the same
// 64 MiB of f32 weights, one thread each, side by side in this run (goal >= 1.0).
//
// Ours is timed as a caller uses it: weights::apply(weight, Quantize{q8_0}), output allocation included;
// ggml writes into a buffer allocated (and touched) beforehand. Each side runs `kRepeats` times,
// alternating, and the median thread CPU time counts. The outputs must be byte-identical, else the
// bench fails. The kernel-only times (the dispatched one and the portable fallback) and Q4_0 are
// reported on stderr for information.
#include <ggml.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "bench_timing.h"
#include "gantry/weights/transform.h"
#include "weights/quantize_kernels.h"

namespace {

constexpr int64_t kRows = 4096;
constexpr int64_t kCols = 4096;  // 4096 x 4096 f32 = 64 MiB
constexpr int kRepeats = 7;

using gantry::bench::median;
using gantry::bench::thread_cpu_ns;

}  // namespace

int main() {
  using namespace gantry;
  std::vector<float> x(static_cast<size_t>(kRows * kCols));
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (float& v : x) v = dist(rng);
  auto t = Tensor::from_values(DType::kFloat32, Shape{kRows, kCols}, x);
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", t.status().to_string().c_str());
    return 1;
  }
  const weights::Weight w{"bench.weight", DType::kFloat32, Shape{kRows, kCols}, *t};

  int status = 0;
  for (ggml_type gt : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
    const auto to = gt == GGML_TYPE_Q8_0 ? model::GgmlType::kQ8_0 : model::GgmlType::kQ4_0;
    std::vector<uint8_t> ref(ggml_row_size(gt, kCols) * kRows, 0);
    std::vector<uint8_t> kernel_out(ref.size(), 1);
    std::vector<uint8_t> portable_out(ref.size(), 2);
    std::vector<double> ours_ns, ggml_ns, kernel_ns, portable_ns;
    bool identical = true;
    ggml_quantize_chunk(gt, x.data(), ref.data(), 0, kRows, kCols, nullptr);  // warm-up (and ggml's init)
    for (int r = 0; r < kRepeats; ++r) {
      double t0 = thread_cpu_ns();
      auto q = weights::apply(w, weights::Quantize{to});
      ours_ns.push_back(thread_cpu_ns() - t0);
      if (!q.ok()) {
        std::fprintf(stderr, "%s\n", q.status().to_string().c_str());
        return 1;
      }

      t0 = thread_cpu_ns();
      ggml_quantize_chunk(gt, x.data(), ref.data(), 0, kRows, kCols, nullptr);
      ggml_ns.push_back(thread_cpu_ns() - t0);

      t0 = thread_cpu_ns();
      if (gt == GGML_TYPE_Q8_0) {
        weights::detail::quantize_q8_0(x.data(), kernel_out.data(), kRows * kCols);
      } else {
        weights::detail::quantize_q4_0(x.data(), kernel_out.data(), kRows * kCols);
      }
      kernel_ns.push_back(thread_cpu_ns() - t0);

      t0 = thread_cpu_ns();
      if (gt == GGML_TYPE_Q8_0) {
        weights::detail::quantize_q8_0_portable(x.data(), portable_out.data(), kRows * kCols);
      } else {
        weights::detail::quantize_q4_0_portable(x.data(), portable_out.data(), kRows * kCols);
      }
      portable_ns.push_back(thread_cpu_ns() - t0);

      identical = identical && q->data.byte_size() == ref.size() &&
                  std::memcmp(q->data.data(), ref.data(), ref.size()) == 0 &&
                  std::memcmp(kernel_out.data(), ref.data(), ref.size()) == 0 &&
                  std::memcmp(portable_out.data(), ref.data(), ref.size()) == 0;
    }
    const double bytes = static_cast<double>(x.size() * sizeof(float));
    const double ours = median(ours_ns), ref_t = median(ggml_ns), kern = median(kernel_ns);
    std::fprintf(stderr,
                 "%s: gantry apply() %.2f GB/s (kernel alone %.2f GB/s, %s; portable kernel %.2f GB/s), "
                 "ggml_quantize_chunk %.2f GB/s; %s\n",
                 ggml_type_name(gt), bytes / ours, bytes / kern,
                 weights::detail::cpu_has_avx2() ? "AVX2" : "portable", bytes / median(portable_ns),
                 bytes / ref_t, identical ? "bytes identical" : "BYTES DIFFER");
    if (!identical) {
      std::fprintf(stderr, "FAIL: %s output differs from ggml_quantize_chunk\n", ggml_type_name(gt));
      status = 1;
    }
    if (gt == GGML_TYPE_Q8_0 && identical) {
      std::printf("BENCH weights-quantize-q8_0 ratio=%.3f\n", ref_t / ours);
      std::fflush(stdout);  // before the stderr report of the next type
    }
  }
  return status;
}
