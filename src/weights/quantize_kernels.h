// Row quantisers for ggml's Q8_0 and Q4_0 blocks, written here and bit-identical to ggml's reference
// quantize_row_q8_0_ref / quantize_row_q4_0_ref (what ggml_quantize_chunk runs for these types when no
// importance matrix is given), including all-zero blocks, denormals, infinities and NaN.
//
// The scalar versions restate ggml's reference loop by loop. The portable and AVX2 versions take a fast
// path for every block whose values are finite and whose inverse scale is finite (the usual case) and hand
// any other block to the scalar code, so the unusual inputs have one implementation. quantize_q8_0() /
// quantize_q4_0() pick AVX2 when the CPU has it, else the portable version.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace gantry::weights::detail {

inline constexpr int kQK = 32;  // elements per Q8_0 / Q4_0 block
inline constexpr size_t kQ8_0BlockBytes = 2 + 32;
inline constexpr size_t kQ4_0BlockBytes = 2 + 16;

// ggml's own f32 -> f16 (ggml_compute_fp32_to_fp16 in ggml-impl.h, which the reference quantisers use):
// round to nearest even; NaN -> sign | 0x7e00.
inline uint16_t ggml_fp32_to_fp16(float f) {
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = std::bit_cast<uint32_t>(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = std::bit_cast<uint32_t>(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

// What ggml's C conversion `(int8_t)float` produces as compiled for this machine: x86-64 converts to a
// 32-bit integer with cvttss2si (NaN and out-of-range give 0x80000000) and keeps the low byte; AArch64's
// fcvtzs saturates (NaN -> 0) before the low byte is kept. In range both are plain truncation.
inline int8_t ggml_float_to_i8(float f) {
#if defined(__aarch64__)
  int32_t i;
  if (std::isnan(f)) {
    i = 0;
  } else if (f >= 2147483648.0f) {
    i = INT32_MAX;
  } else if (f < -2147483648.0f) {
    i = INT32_MIN;
  } else {
    i = static_cast<int32_t>(f);
  }
#else
  const int32_t i = (f >= -2147483648.0f && f < 2147483648.0f) ? static_cast<int32_t>(f) : INT32_MIN;
#endif
  return static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint32_t>(i)));
}

// Exact restatements of ggml's loops (k: element count, a multiple of 32; y: k/32 blocks).
void quantize_q8_0_scalar(const float* x, uint8_t* y, int64_t k);
void quantize_q4_0_scalar(const float* x, uint8_t* y, int64_t k);
// One block each (used by the fast paths for unusual blocks).
void quantize_q8_0_block_scalar(const float* x, uint8_t* y);
void quantize_q4_0_block_scalar(const float* x, uint8_t* y);

// Fast portable versions (the fallback on CPUs without AVX2).
void quantize_q8_0_portable(const float* x, uint8_t* y, int64_t k);
void quantize_q4_0_portable(const float* x, uint8_t* y, int64_t k);

// AVX2 versions; call only when the CPU has AVX2 (cpu_has_avx2()).
void quantize_q8_0_avx2(const float* x, uint8_t* y, int64_t k);
void quantize_q4_0_avx2(const float* x, uint8_t* y, int64_t k);
bool cpu_has_avx2();

// The fastest version this CPU runs (chosen once at first use).
void quantize_q8_0(const float* x, uint8_t* y, int64_t k);
void quantize_q4_0(const float* x, uint8_t* y, int64_t k);

}  // namespace gantry::weights::detail
