// The Count-Sketch hash family, shared bit for bit by the CPU and the GPU.
//
// Every worker, server and kernel must map coordinate i of a fused group to
// the same bucket and sign in every row, or sketches would not add up. The
// family is defined with 64-bit integer arithmetic only, so the host and the
// device compute identical results.
//
// Definition (row r of a sketch with `cols` columns, seed s, coordinate i):
//   (a_r, b_r) = (SplitMix64(s, 2r), SplitMix64(s, 2r + 1))       64-bit
//   key        = Fmix32(i)             (MurmurHash3's bijective 32-bit finalizer)
//   v          = ((a_r * key + b_r) mod 2^64) >> 32               32 bits
//   sign       = (v >> 31) ? -1 : +1                              the top bit
//   bucket     = ((v & 0x7FFFFFFF) * cols) >> 31                  in [0, cols)
//
// For 32-bit keys, v is Dietzfelbinger's multiply-add-shift hash, which is
// strongly universal (2-wise independent) over 32-bit outputs; bucket and sign
// are taken from disjoint bits of v, so the pair (bucket, sign) of any two
// distinct coordinates is independent over the seed. Pairwise independence is
// what the Count-Sketch point-query (heavy-hitter) guarantee of Charikar et al.
// needs; FetchSGD's 4-wise sign hash matters only for L2-norm estimation,
// which SketchFuse does not use. Fmix32 is a fixed bijection, so it keeps that
// guarantee; it is there because gradients are indexed by consecutive integers,
// and without it a linear hash maps them to a regular lattice whose low bits
// correlate (sketch_hash_test measures both). The bucket map has a relative
// bias below cols / 2^31 (under 7% of one count at kMaxSketchCols, under
// 0.05% at a million columns).
//
// Contract: coordinates are < 2^32 (a fused group has fewer than 2^32
// elements) and 1 <= cols <= kMaxSketchCols.
#ifndef SKETCHFUSE_COMMON_SKETCH_HASH_H_
#define SKETCHFUSE_COMMON_SKETCH_HASH_H_

#include <cstdint>

#if defined(__CUDACC__)
#define SF_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SF_HOST_DEVICE inline
#endif

namespace sketchfuse {

// Largest number of columns a sketch row may have (2^27, 512 MiB of floats).
inline constexpr uint32_t kMaxSketchCols = 1u << 27;
// Largest number of rows a sketch may have.
inline constexpr uint32_t kMaxSketchRows = 64;

// SplitMix64 finalizer applied to seed + (stream + 1) * golden ratio: a
// well-mixed 64-bit value per (seed, stream).
SF_HOST_DEVICE uint64_t SplitMix64(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + (stream + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The hash of one sketch row: (a, b) of the multiply-add-shift family.
struct RowHash {
  uint64_t a;
  uint64_t b;
};

// Row `row`'s hash for a sketch seeded with `seed`.
SF_HOST_DEVICE RowHash MakeRowHash(uint64_t seed, uint32_t row) {
  return RowHash{SplitMix64(seed, 2ull * row), SplitMix64(seed, 2ull * row + 1)};
}

// MurmurHash3's 32-bit finalizer: a bijection of [0, 2^32) that scatters
// consecutive integers.
SF_HOST_DEVICE uint32_t Fmix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x;
}

// The 32 hash bits v of coordinate `index` (see the file comment).
// Computed as the exact 64-bit expression split into 32x32->64 multiplies,
// which vectorize well: with a = aH*2^32 + aL and b = bH*2^32 + bL,
// (a*key + b) >> 32 == hi32(aL*key + bL) + aH*key + bH   (mod 2^32).
SF_HOST_DEVICE uint32_t HashBits(RowHash h, uint32_t index) {
  const uint32_t key = Fmix32(index);
  const uint64_t low = static_cast<uint64_t>(static_cast<uint32_t>(h.a)) * key +
                       static_cast<uint32_t>(h.b);
  return static_cast<uint32_t>(low >> 32) + static_cast<uint32_t>(h.a >> 32) * key +
         static_cast<uint32_t>(h.b >> 32);
}

// Bucket in [0, cols) from the hash bits (the low 31 bits).
SF_HOST_DEVICE uint32_t BucketOf(uint32_t bits, uint32_t cols) {
  return static_cast<uint32_t>((static_cast<uint64_t>(bits & 0x7FFFFFFFu) * cols) >> 31);
}

// Sign bit (0 for +1, 1 for -1) from the hash bits (the top bit).
SF_HOST_DEVICE uint32_t SignBitOf(uint32_t bits) { return bits >> 31; }

// Sign as a float, +1.0f or -1.0f.
SF_HOST_DEVICE float SignOf(uint32_t bits) { return (bits >> 31) ? -1.0f : 1.0f; }

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_SKETCH_HASH_H_
