// The Count-Sketch hash family, shared bit for bit by the CPU and the GPU.
//
// Every worker, server and kernel must map coordinate i of a fused group to
// the same bucket and sign in every row, or sketches would not add up. The
// family is defined with 64-bit integer arithmetic only, so the host and the
// device compute identical results.
//
// Chunked layout. Coordinates are cut into chunks of L consecutive indices,
// L = the largest power of two <= min(cols, kMaxChunkLength). In each row a
// chunk lands on L consecutive cells (cyclically) at a hashed offset, and each
// coordinate gets its own hashed sign. Inserts and estimates therefore touch
// runs of consecutive cells, which the GPU coalesces and the CPU vectorizes,
// instead of one scattered cell per coordinate.
//
// Definition (row r of a sketch with `cols` columns, seed s, coordinate i):
//   MAS(a, b; key) = ((a * Fmix32(key) + b) mod 2^64) >> 32          32 bits
//   sign hash      (a, b) = (SplitMix64(s, 2r), SplitMix64(s, 2r + 1))
//   offset hash    (a, b) = (SplitMix64(s, 2R + 2r), SplitMix64(s, 2R + 2r + 1)),
//                  R = kMaxSketchRows (streams disjoint from the sign's)
//   L              = 2^floor(log2(min(cols, kMaxChunkLength)))
//   sign           = top bit of MAS(sign hash; i) ? -1 : +1
//   offset         = ((MAS(offset hash; i / L) & 0x7FFFFFFF) * cols) >> 31
//   bucket         = (offset + i mod L) mod cols
//
// Guarantee. MAS is Dietzfelbinger's multiply-add-shift hash, strongly
// universal (2-wise independent) over 32-bit outputs for 32-bit keys; Fmix32
// (MurmurHash3's finalizer) is a fixed bijection that keeps this and breaks
// the lattice a linear hash makes of consecutive keys (sketch_hash_test
// measures it). For two coordinates i != j in one row:
//   - same chunk: their cells differ (L <= cols), so they never collide;
//   - different chunks: the two offsets are independent and uniform, so they
//     collide with probability 1/cols (up to the range map's bias, below
//     cols / 2^31 relative: under 7% of one count at kMaxSketchCols);
//   - their signs are independent and uniform, and independent of buckets.
// So Pr[collision] <= 1/cols and signs are pairwise independent: what the
// Count-Sketch point-query (heavy-hitter) bound of Charikar et al. uses; each
// row's estimate of a coordinate has the same variance bound, ||x||^2 / cols,
// as with a fully scattered bucket hash. Rows use independent hashes. What
// differs from a scattered hash: the coordinates of one chunk share their
// collisions (two chunks that overlap in a row overlap along a run), so
// errors come in runs instead of independently; each coordinate's own error
// probability is unchanged. FetchSGD's 4-wise sign hash matters only for
// L2-norm estimation, which SketchFuse does not use.
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

// Number of the hash family defined above. Sketches add up only when built
// with the same family, so it travels with every sketch on the wire
// (payload.proto, SketchShape.hash_family), every push reply
// (aggregator.proto), and every join, join reply and shard registration
// (coordinator.proto); receivers refuse another number
// (CheckSketchHashFamily in common/count_sketch.h). Family 1 was the fully
// scattered hash that came before the chunked layout; 0 is what builds from
// before families were numbered send (the field absent). Bump it whenever any
// bucket or sign changes: sketch_hash_test pins values of both.
inline constexpr uint32_t kSketchHashFamily = 2;

// Largest number of columns a sketch row may have (2^27, 512 MiB of floats).
inline constexpr uint32_t kMaxSketchCols = 1u << 27;
// Largest number of rows a sketch may have.
inline constexpr uint32_t kMaxSketchRows = 64;
// Longest chunk of consecutive coordinates that lands on consecutive cells
// (rows of at least this many columns use it).
inline constexpr uint32_t kMaxChunkShift = 10;
inline constexpr uint32_t kMaxChunkLength = 1u << kMaxChunkShift;

// SplitMix64 finalizer applied to seed + (stream + 1) * golden ratio: a
// well-mixed 64-bit value per (seed, stream).
SF_HOST_DEVICE uint64_t SplitMix64(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + (stream + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The seed of the sketches of training step `step` in a job seeded with
// `seed`, for encoders that hash each step anew (count_sketch with
// method=peel): every worker and server derives the same seed, and two steps'
// hashes are independent, so coordinates that collide in one step rarely
// collide in the next.
SF_HOST_DEVICE uint64_t StepSeed(uint64_t seed, uint64_t step) {
  return SplitMix64(seed ^ 0x243F6A8885A308D3ull, step);
}

// One function of the multiply-add-shift family: its (a, b).
struct MultiplyAddShift {
  uint64_t a;
  uint64_t b;
};

// The hashes of one sketch row: a sign per coordinate, an offset per chunk.
struct RowHash {
  MultiplyAddShift sign;
  MultiplyAddShift offset;
};

// Row `row`'s hashes for a sketch seeded with `seed` (row < kMaxSketchRows).
SF_HOST_DEVICE RowHash MakeRowHash(uint64_t seed, uint32_t row) {
  const uint64_t offset_stream = 2ull * kMaxSketchRows + 2ull * row;
  return RowHash{
      MultiplyAddShift{SplitMix64(seed, 2ull * row), SplitMix64(seed, 2ull * row + 1)},
      MultiplyAddShift{SplitMix64(seed, offset_stream), SplitMix64(seed, offset_stream + 1)}};
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

// MAS(h; key) for a key already passed through Fmix32 (callers hashing one
// key with several rows mix it once). Computed as the exact 64-bit expression
// split into 32x32->64 multiplies, which vectorize well: with
// a = aH*2^32 + aL and b = bH*2^32 + bL,
// (a*m + b) >> 32 == hi32(aL*m + bL) + aH*m + bH   (mod 2^32).
SF_HOST_DEVICE uint32_t HashMixed(MultiplyAddShift h, uint32_t mixed_key) {
  const uint64_t low = static_cast<uint64_t>(static_cast<uint32_t>(h.a)) * mixed_key +
                       static_cast<uint32_t>(h.b);
  return static_cast<uint32_t>(low >> 32) + static_cast<uint32_t>(h.a >> 32) * mixed_key +
         static_cast<uint32_t>(h.b >> 32);
}

// MAS(h; key): the 32 hash bits of `key` (see the file comment).
SF_HOST_DEVICE uint32_t HashBits(MultiplyAddShift h, uint32_t key) {
  return HashMixed(h, Fmix32(key));
}

// Maps 31 of the hash bits (the low ones) to [0, cols).
SF_HOST_DEVICE uint32_t BucketOf(uint32_t bits, uint32_t cols) {
  return static_cast<uint32_t>((static_cast<uint64_t>(bits & 0x7FFFFFFFu) * cols) >> 31);
}

// Sign bit (0 for +1, 1 for -1) from the hash bits (the top bit).
SF_HOST_DEVICE uint32_t SignBitOf(uint32_t bits) { return bits >> 31; }

// Sign as a float, +1.0f or -1.0f, from the hash bits.
SF_HOST_DEVICE float SignOf(uint32_t bits) { return (bits >> 31) ? -1.0f : 1.0f; }

// log2 of the chunk length L for rows of `cols` columns (cols >= 1).
SF_HOST_DEVICE uint32_t ChunkShift(uint32_t cols) {
  const uint32_t limit = cols < kMaxChunkLength ? cols : kMaxChunkLength;
  uint32_t shift = 0;
  while ((2u << shift) <= limit) ++shift;
  return shift;
}

// The cell where chunk `chunk` of a row starts.
SF_HOST_DEVICE uint32_t ChunkOffset(const RowHash& h, uint32_t chunk, uint32_t cols) {
  return BucketOf(HashBits(h.offset, chunk), cols);
}

// The cell `position` places after `offset`, cyclically (offset < cols,
// position < L <= cols).
SF_HOST_DEVICE uint32_t CellAfter(uint32_t offset, uint32_t position, uint32_t cols) {
  const uint32_t cell = offset + position;
  return cell >= cols ? cell - cols : cell;
}

// How many of a chunk's first `len` coordinates land before the row's end
// when the chunk starts at cell `offset`; the rest wrap around to cell 0.
SF_HOST_DEVICE uint32_t CellsBeforeWrap(uint32_t offset, uint32_t len, uint32_t cols) {
  return len < cols - offset ? len : cols - offset;
}

// Bucket of coordinate `index` in a row of `cols` columns (chunk_shift =
// ChunkShift(cols)). Written for clarity; the kernels hoist the chunk offset.
SF_HOST_DEVICE uint32_t BucketOfIndex(const RowHash& h, uint32_t index, uint32_t cols,
                                      uint32_t chunk_shift) {
  const uint32_t offset = ChunkOffset(h, index >> chunk_shift, cols);
  return CellAfter(offset, index & ((1u << chunk_shift) - 1), cols);
}

// Sign of coordinate `index`, +1.0f or -1.0f.
SF_HOST_DEVICE float SignOfIndex(const RowHash& h, uint32_t index) {
  return SignOf(HashBits(h.sign, index));
}

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_SKETCH_HASH_H_
