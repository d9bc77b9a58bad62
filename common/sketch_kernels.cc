#include "common/sketch_kernels.h"

#include <atomic>

#if defined(__x86_64__)
#include <immintrin.h>
#define SF_HAVE_AVX2_PATH 1
#else
#define SF_HAVE_AVX2_PATH 0
#endif

namespace sketchfuse {
namespace sketch_kernels {
namespace {

std::atomic<bool> simd_allowed{true};

bool CpuHasAvx2() {
#if SF_HAVE_AVX2_PATH
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

void AddSignedPortable(MultiplyAddShift sign, uint32_t base, uint32_t len, const float* x,
                       float* dst) {
  for (uint32_t j = 0; j < len; ++j) dst[j] += SignOf(HashBits(sign, base + j)) * x[j];
}

void CopySignedPortable(MultiplyAddShift sign, uint32_t base, uint32_t len, const float* cells,
                        float* out) {
  for (uint32_t j = 0; j < len; ++j) out[j] = SignOf(HashBits(sign, base + j)) * cells[j];
}

#if SF_HAVE_AVX2_PATH
#define SF_AVX2 __attribute__((target("avx2")))

// The constants of one multiply-add-shift function, broadcast to 8 lanes.
struct HashConstants {
  __m256i a_low64;   // aL in the low half of each 64-bit lane
  __m256i b_low64;   // bL likewise
  __m256i a_high;    // aH in every 32-bit lane
  __m256i b_high;    // bH in every 32-bit lane
};

SF_AVX2 HashConstants MakeConstants(MultiplyAddShift h) {
  return HashConstants{
      _mm256_set1_epi64x(static_cast<uint32_t>(h.a)),
      _mm256_set1_epi64x(static_cast<uint32_t>(h.b)),
      _mm256_set1_epi32(static_cast<int>(h.a >> 32)),
      _mm256_set1_epi32(static_cast<int>(h.b >> 32)),
  };
}

SF_AVX2 inline __m256i Fmix32x8(__m256i x) {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0x85EBCA6Bu)));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 13));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0xC2B2AE35u)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

// HashBits for the 8 keys of `index`.
SF_AVX2 inline __m256i HashBits8(const HashConstants& c, __m256i index) {
  const __m256i key = Fmix32x8(index);
  // hi32(aL * key + bL): even lanes and odd lanes as 64-bit products.
  const __m256i even = _mm256_add_epi64(_mm256_mul_epu32(key, c.a_low64), c.b_low64);
  const __m256i odd =
      _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(key, 32), c.a_low64), c.b_low64);
  const __m256i carry = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  return _mm256_add_epi32(_mm256_add_epi32(carry, _mm256_mullo_epi32(c.a_high, key)), c.b_high);
}

// The sign bit of each hash value, in float sign position: XOR with it equals
// multiplying by the sign.
SF_AVX2 inline __m256 SignMask8(__m256i bits) {
  return _mm256_castsi256_ps(_mm256_and_si256(bits, _mm256_set1_epi32(static_cast<int>(0x80000000u))));
}

SF_AVX2 inline __m256i Indices8(uint32_t first) {
  return _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)),
                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

SF_AVX2 void AddSignedAvx2(MultiplyAddShift sign, uint32_t base, uint32_t len, const float* x,
                           float* dst) {
  const HashConstants c = MakeConstants(sign);
  uint32_t j = 0;
  for (; j + 8 <= len; j += 8) {
    const __m256 signed_x =
        _mm256_xor_ps(_mm256_loadu_ps(x + j), SignMask8(HashBits8(c, Indices8(base + j))));
    _mm256_storeu_ps(dst + j, _mm256_add_ps(_mm256_loadu_ps(dst + j), signed_x));
  }
  AddSignedPortable(sign, base + j, len - j, x + j, dst + j);
}

SF_AVX2 void CopySignedAvx2(MultiplyAddShift sign, uint32_t base, uint32_t len,
                            const float* cells, float* out) {
  const HashConstants c = MakeConstants(sign);
  uint32_t j = 0;
  for (; j + 8 <= len; j += 8) {
    _mm256_storeu_ps(out + j, _mm256_xor_ps(_mm256_loadu_ps(cells + j),
                                            SignMask8(HashBits8(c, Indices8(base + j)))));
  }
  CopySignedPortable(sign, base + j, len - j, cells + j, out + j);
}
#endif  // SF_HAVE_AVX2_PATH

}  // namespace

bool SimdEnabled() { return CpuHasAvx2() && simd_allowed.load(std::memory_order_relaxed); }

void SetSimdAllowed(bool allowed) { simd_allowed.store(allowed, std::memory_order_relaxed); }

void AddSigned(MultiplyAddShift sign, uint32_t base, uint32_t len, const float* x, float* dst) {
#if SF_HAVE_AVX2_PATH
  if (SimdEnabled()) return AddSignedAvx2(sign, base, len, x, dst);
#endif
  AddSignedPortable(sign, base, len, x, dst);
}

void CopySigned(MultiplyAddShift sign, uint32_t base, uint32_t len, const float* cells,
                float* out) {
#if SF_HAVE_AVX2_PATH
  if (SimdEnabled()) return CopySignedAvx2(sign, base, len, cells, out);
#endif
  CopySignedPortable(sign, base, len, cells, out);
}

}  // namespace sketch_kernels
}  // namespace sketchfuse
