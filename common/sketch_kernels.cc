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

void HashBlockPortable(RowHash hash, uint32_t cols, uint32_t base, uint32_t len,
                       const float* x, uint32_t* buckets, float* signed_values) {
  for (uint32_t j = 0; j < len; ++j) {
    const uint32_t bits = HashBits(hash, base + j);
    buckets[j] = BucketOf(bits, cols);
    signed_values[j] = SignOf(bits) * x[j];
  }
}

void GatherSignedPortable(RowHash hash, uint32_t cols, uint32_t base, uint32_t len,
                          const float* row, float* out) {
  for (uint32_t j = 0; j < len; ++j) {
    const uint32_t bits = HashBits(hash, base + j);
    out[j] = SignOf(bits) * row[BucketOf(bits, cols)];
  }
}

#if SF_HAVE_AVX2_PATH
#define SF_AVX2 __attribute__((target("avx2")))

// Per-row constants of HashBits, broadcast to 8 lanes.
struct HashConstants {
  __m256i a_low64;   // aL in the low half of each 64-bit lane
  __m256i b_low64;   // bL likewise
  __m256i a_high;    // aH in every 32-bit lane
  __m256i b_high;    // bH in every 32-bit lane
  __m256i cols64;    // cols in the low half of each 64-bit lane
};

SF_AVX2 HashConstants MakeConstants(RowHash h, uint32_t cols) {
  return HashConstants{
      _mm256_set1_epi64x(static_cast<uint32_t>(h.a)),
      _mm256_set1_epi64x(static_cast<uint32_t>(h.b)),
      _mm256_set1_epi32(static_cast<int>(h.a >> 32)),
      _mm256_set1_epi32(static_cast<int>(h.b >> 32)),
      _mm256_set1_epi64x(cols),
  };
}

SF_AVX2 inline __m256i Fmix32x8(__m256i x) {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0x85EBCA6Bu)));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 13));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0xC2B2AE35u)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

// HashBits for the 8 coordinates base + lane.
SF_AVX2 inline __m256i HashBits8(const HashConstants& c, __m256i index) {
  const __m256i key = Fmix32x8(index);
  // hi32(aL * key + bL): even lanes and odd lanes as 64-bit products.
  const __m256i even = _mm256_add_epi64(_mm256_mul_epu32(key, c.a_low64), c.b_low64);
  const __m256i odd =
      _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(key, 32), c.a_low64), c.b_low64);
  const __m256i carry = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  return _mm256_add_epi32(_mm256_add_epi32(carry, _mm256_mullo_epi32(c.a_high, key)), c.b_high);
}

// BucketOf for 8 hash values: ((bits & 0x7FFFFFFF) * cols) >> 31.
SF_AVX2 inline __m256i Bucket8(const HashConstants& c, __m256i bits) {
  const __m256i v = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(v, c.cols64), 31);
  const __m256i odd = _mm256_slli_epi64(
      _mm256_srli_epi64(_mm256_mul_epu32(_mm256_srli_epi64(v, 32), c.cols64), 31), 32);
  return _mm256_blend_epi32(even, odd, 0xAA);
}

// The sign bit of each hash value, in float sign position.
SF_AVX2 inline __m256 SignMask8(__m256i bits) {
  return _mm256_castsi256_ps(_mm256_and_si256(bits, _mm256_set1_epi32(static_cast<int>(0x80000000u))));
}

SF_AVX2 inline __m256i Indices8(uint32_t first) {
  return _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)),
                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

SF_AVX2 void HashBlockAvx2(RowHash hash, uint32_t cols, uint32_t base, uint32_t len,
                           const float* x, uint32_t* buckets, float* signed_values) {
  const HashConstants c = MakeConstants(hash, cols);
  uint32_t j = 0;
  for (; j + 8 <= len; j += 8) {
    const __m256i bits = HashBits8(c, Indices8(base + j));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(buckets + j), Bucket8(c, bits));
    // sign * x: flipping the sign bit equals multiplying by -1.
    _mm256_storeu_ps(signed_values + j, _mm256_xor_ps(_mm256_loadu_ps(x + j), SignMask8(bits)));
  }
  HashBlockPortable(hash, cols, base + j, len - j, x + j, buckets + j, signed_values + j);
}

SF_AVX2 void GatherSignedAvx2(RowHash hash, uint32_t cols, uint32_t base, uint32_t len,
                              const float* row, float* out) {
  const HashConstants c = MakeConstants(hash, cols);
  uint32_t j = 0;
  for (; j + 8 <= len; j += 8) {
    const __m256i bits = HashBits8(c, Indices8(base + j));
    const __m256 cell = _mm256_i32gather_ps(row, Bucket8(c, bits), 4);
    _mm256_storeu_ps(out + j, _mm256_xor_ps(cell, SignMask8(bits)));
  }
  GatherSignedPortable(hash, cols, base + j, len - j, row, out + j);
}
#endif  // SF_HAVE_AVX2_PATH

}  // namespace

bool SimdEnabled() { return CpuHasAvx2() && simd_allowed.load(std::memory_order_relaxed); }

void SetSimdAllowed(bool allowed) { simd_allowed.store(allowed, std::memory_order_relaxed); }

void HashBlock(RowHash hash, uint32_t cols, uint32_t base, uint32_t len, const float* x,
               uint32_t* buckets, float* signed_values) {
#if SF_HAVE_AVX2_PATH
  if (SimdEnabled()) return HashBlockAvx2(hash, cols, base, len, x, buckets, signed_values);
#endif
  HashBlockPortable(hash, cols, base, len, x, buckets, signed_values);
}

void GatherSigned(RowHash hash, uint32_t cols, uint32_t base, uint32_t len, const float* row,
                  float* out) {
#if SF_HAVE_AVX2_PATH
  if (SimdEnabled()) return GatherSignedAvx2(hash, cols, base, len, row, out);
#endif
  GatherSignedPortable(hash, cols, base, len, row, out);
}

}  // namespace sketch_kernels
}  // namespace sketchfuse
