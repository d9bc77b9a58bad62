// Function multiversioning for the CPU hot loops.
//
// SF_MULTIVERSION compiles a function for AVX-512 (x86-64-v4), AVX2
// (x86-64-v3) and baseline x86-64, and picks the best at load time, so one
// binary is fast on new machines and still runs on old ones. The loops it
// marks are written to be auto-vectorized; each one is tested against a
// scalar reference. Elsewhere (other CPUs, sanitizer builds) it is empty.
#ifndef SKETCHFUSE_COMMON_SIMD_H_
#define SKETCHFUSE_COMMON_SIMD_H_

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define SF_MULTIVERSION \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SF_MULTIVERSION
#endif

#endif  // SKETCHFUSE_COMMON_SIMD_H_
