// AVX2 Q8_0 / Q4_0 quantisers, compiled for AVX2 with a function attribute (the build targets baseline
// x86-64) and run only when the CPU reports AVX2. No FMA: ggml's reference multiplies and adds in
// separate roundings, and so must we.
#include "weights/quantize_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <limits>

namespace gantry::weights::detail {
namespace {

#define GANTRY_AVX2 __attribute__((target("avx2")))

// The largest |x| of a block as IEEE bits (a non-negative float orders like its bits; NaN's bits exceed
// infinity's, so bits >= 0x7f800000 means a non-finite value is present).
GANTRY_AVX2 inline uint32_t block_amax_bits(const __m256 v[4]) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  __m256i m = _mm256_and_si256(_mm256_castps_si256(v[0]), abs_mask);
  for (int i = 1; i < 4; ++i) m = _mm256_max_epi32(m, _mm256_and_si256(_mm256_castps_si256(v[i]), abs_mask));
  __m128i r = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  r = _mm_max_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(1, 0, 3, 2)));
  r = _mm_max_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(2, 3, 0, 1)));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(r));
}

// roundf (halves away from zero) of values of magnitude < 2^23, as int32: truncate, then step away from
// zero when the dropped fraction is at least one half (the fraction is exact at these magnitudes).
GANTRY_AVX2 inline __m256i round_half_away(__m256 q) {
  const __m256i t = _mm256_cvttps_epi32(q);
  const __m256 frac = _mm256_sub_ps(q, _mm256_cvtepi32_ps(t));
  const __m256i up = _mm256_castps_si256(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ));
  const __m256i down = _mm256_castps_si256(_mm256_cmp_ps(frac, _mm256_set1_ps(-0.5f), _CMP_LE_OQ));
  // The masks are -1 where true: subtracting `up` adds one, adding `down` subtracts one.
  return _mm256_add_epi32(_mm256_sub_epi32(t, up), down);
}

}  // namespace

bool cpu_has_avx2() { return __builtin_cpu_supports("avx2"); }

GANTRY_AVX2 void quantize_q8_0_avx2(const float* x, uint8_t* y, int64_t k) {
  const int64_t nb = k / kQK;
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < nb; ++b, x += kQK, y += kQ8_0BlockBytes) {
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
    const uint32_t amax_bits = block_amax_bits(v);
    if (amax_bits >= 0x7f800000u) {
      quantize_q8_0_block_scalar(x, y);
      continue;
    }
    const float amax = std::bit_cast<float>(amax_bits);
    const float d = amax / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (id > std::numeric_limits<float>::max()) {  // 1/d overflowed (d subnormal): x*id is inf or NaN
      quantize_q8_0_block_scalar(x, y);
      continue;
    }
    const uint16_t dh = ggml_fp32_to_fp16(d);
    std::memcpy(y, &dh, 2);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = round_half_away(_mm256_mul_ps(v[i], vid));
    // |q| <= 127: the saturating packs are exact; they interleave 128-bit lanes, which `order` undoes.
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + 2), p);
  }
}

GANTRY_AVX2 void quantize_q4_0_avx2(const float* x, uint8_t* y, int64_t k) {
  const int64_t nb = k / kQK;
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  for (int64_t b = 0; b < nb; ++b, x += kQK, y += kQ4_0BlockBytes) {
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
    const uint32_t amax_bits = block_amax_bits(v);
    if (amax_bits >= 0x7f800000u) {
      quantize_q4_0_block_scalar(x, y);
      continue;
    }
    // ggml keeps the signed value of the first element of largest magnitude (0 for an all-zero block).
    float max = 0.0f;
    if (amax_bits != 0) {
      const __m256i target = _mm256_set1_epi32(static_cast<int>(amax_bits));
      uint32_t hits = 0;
      for (int i = 0; i < 4; ++i) {
        const __m256i a = _mm256_and_si256(_mm256_castps_si256(v[i]), abs_mask);
        hits |= static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a, target))))
                << (8 * i);
      }
      max = x[std::countr_zero(hits)];
    }
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (std::fabs(id) > std::numeric_limits<float>::max()) {
      quantize_q4_0_block_scalar(x, y);
      continue;
    }
    const uint16_t dh = ggml_fp32_to_fp16(d);
    std::memcpy(y, &dh, 2);
    const __m256 vid = _mm256_set1_ps(id);
    const __m256 bias = _mm256_set1_ps(8.5f);
    const __m256i fifteen = _mm256_set1_epi32(15);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      // x*id lies in [-8, 8] (up to rounding), so x*id + 8.5 is in (0, 17): truncation is the C cast.
      const __m256 t = _mm256_add_ps(_mm256_mul_ps(v[i], vid), bias);
      q[i] = _mm256_min_epi32(_mm256_cvttps_epi32(t), fifteen);
    }
    // Elements 0..15 and 16..31 as 16-bit values in order (the pack interleaves lanes; 0xD8 restores).
    const __m256i lo = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);
    const __m256i hi = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), 0xD8);
    const __m256i both = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
    const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(both), _mm256_extracti128_si256(both, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 2), bytes);
  }
}

}  // namespace gantry::weights::detail

#else  // not x86: the portable code is all there is

namespace gantry::weights::detail {
bool cpu_has_avx2() { return false; }
void quantize_q8_0_avx2(const float* x, uint8_t* y, int64_t k) { quantize_q8_0_portable(x, y, k); }
void quantize_q4_0_avx2(const float* x, uint8_t* y, int64_t k) { quantize_q4_0_portable(x, y, k); }
}  // namespace gantry::weights::detail

#endif
