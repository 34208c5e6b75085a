// Portable Q8_0 / Q4_0 quantisers: ggml's reference loops restated (ggml-quants.c,
// quantize_row_q8_0_ref and quantize_row_q4_0_ref), the same operations in the same order.
#include <cmath>
#include <cstring>

#include "weights/quantize_kernels.h"

namespace gantry::weights::detail {

void quantize_q8_0_block_scalar(const float* x, uint8_t* y) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    const float v = std::fabs(x[j]);
    amax = amax > v ? amax : v;  // ggml's MAX(): a NaN resets the running maximum
  }
  const float d = amax / ((1 << 7) - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;  // (NaN != 0: ggml's `d ?` is true for NaN too)
  const uint16_t dh = ggml_fp32_to_fp16(d);
  std::memcpy(y, &dh, 2);
  for (int j = 0; j < kQK; ++j) {
    const float x0 = x[j] * id;
    y[2 + j] = static_cast<uint8_t>(ggml_float_to_i8(std::round(x0)));  // roundf: halves away from zero
  }
}

void quantize_q4_0_block_scalar(const float* x, uint8_t* y) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    const float v = x[j];
    if (amax < std::fabs(v)) {  // first largest magnitude wins; NaN never does
      amax = std::fabs(v);
      max = v;
    }
  }
  const float d = max / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = ggml_fp32_to_fp16(d);
  std::memcpy(y, &dh, 2);
  for (int j = 0; j < kQK / 2; ++j) {
    const float x0 = x[j] * id;
    const float x1 = x[kQK / 2 + j] * id;
    const int i0 = ggml_float_to_i8(x0 + 8.5f);
    const int i1 = ggml_float_to_i8(x1 + 8.5f);
    const uint8_t xi0 = static_cast<uint8_t>(i0 < 15 ? i0 : 15);  // MIN(15, (int8_t)...)
    const uint8_t xi1 = static_cast<uint8_t>(i1 < 15 ? i1 : 15);
    y[2 + j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
  }
}

void quantize_q8_0_scalar(const float* x, uint8_t* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b) quantize_q8_0_block_scalar(x + b * kQK, y + b * kQ8_0BlockBytes);
}

void quantize_q4_0_scalar(const float* x, uint8_t* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b) quantize_q4_0_block_scalar(x + b * kQK, y + b * kQ4_0BlockBytes);
}

}  // namespace gantry::weights::detail
