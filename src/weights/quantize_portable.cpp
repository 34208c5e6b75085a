// Portable fast Q8_0 / Q4_0 quantisers: the AVX2 kernels' structure in plain C++ (branch-free inner loops
// the compiler can vectorise with the baseline instruction set), for CPUs without AVX2. Blocks with a
// non-finite value or an overflowing inverse scale go to the exact scalar restatement of ggml's loop.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "weights/quantize_kernels.h"

namespace gantry::weights::detail {
namespace {

// The largest |x| of a block as IEEE bits (see quantize_avx2.cpp).
inline uint32_t block_amax_bits(const float* x) {
  uint32_t m = 0;
  for (int j = 0; j < kQK; ++j) {
    const uint32_t a = std::bit_cast<uint32_t>(x[j]) & 0x7fffffffu;
    m = a > m ? a : m;
  }
  return m;
}

}  // namespace

void quantize_q8_0_portable(const float* x, uint8_t* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK, y += kQ8_0BlockBytes) {
    const uint32_t amax_bits = block_amax_bits(x);
    const float d = std::bit_cast<float>(amax_bits) / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (amax_bits >= 0x7f800000u || id > std::numeric_limits<float>::max()) {
      quantize_q8_0_block_scalar(x, y);
      continue;
    }
    const uint16_t dh = ggml_fp32_to_fp16(d);
    std::memcpy(y, &dh, 2);
    int8_t q[kQK];
    for (int j = 0; j < kQK; ++j) {
      // roundf for |v| <= 127: truncate, then step away from zero when the (exact) fraction is >= 1/2.
      const float v = x[j] * id;
      const int t = static_cast<int>(v);
      const float frac = v - static_cast<float>(t);
      q[j] = static_cast<int8_t>(t + (frac >= 0.5f) - (frac <= -0.5f));
    }
    std::memcpy(y + 2, q, kQK);
  }
}

void quantize_q4_0_portable(const float* x, uint8_t* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK, y += kQ4_0BlockBytes) {
    const uint32_t amax_bits = block_amax_bits(x);
    if (amax_bits >= 0x7f800000u) {
      quantize_q4_0_block_scalar(x, y);
      continue;
    }
    float max = 0.0f;
    if (amax_bits != 0) {
      int j = 0;
      while ((std::bit_cast<uint32_t>(x[j]) & 0x7fffffffu) != amax_bits) ++j;  // the first one
      max = x[j];
    }
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (std::fabs(id) > std::numeric_limits<float>::max()) {
      quantize_q4_0_block_scalar(x, y);
      continue;
    }
    const uint16_t dh = ggml_fp32_to_fp16(d);
    std::memcpy(y, &dh, 2);
    for (int j = 0; j < kQK / 2; ++j) {
      // x*id + 8.5 lies in (0, 17): the C cast truncates, as ggml's (int8_t) does in range.
      const int i0 = static_cast<int>(x[j] * id + 8.5f);
      const int i1 = static_cast<int>(x[kQK / 2 + j] * id + 8.5f);
      y[2 + j] = static_cast<uint8_t>((i0 < 15 ? i0 : 15) | ((i1 < 15 ? i1 : 15) << 4));
    }
  }
}

}  // namespace gantry::weights::detail
