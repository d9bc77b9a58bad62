// The contract between a fuzz target and the two ways it runs.
//
// Each target defines LLVMFuzzerTestOneInput (libFuzzer's entry point: one
// input, which must never crash, hang or leak, whatever its bytes) and
// FuzzSeeds (valid inputs to mutate from). It runs:
//   - under libFuzzer (coverage-guided; `--config=fuzz`, clang), where
//     FuzzSeeds is unused and the corpus comes from `--write_corpus`;
//   - in every build as a test, through fuzz_driver.cc: the seeds, then a
//     fixed number of seeded random mutations of them (bit flips, byte
//     overwrites, insertions, deletions, truncations, splices). Not
//     coverage-guided, but deterministic and cheap enough for CI.
// A target reports a broken promise with FuzzCheck, which aborts (a crash to
// both runners) and prints what broke.
#ifndef SKETCHFUSE_TESTS_FUZZ_FUZZ_TARGET_H_
#define SKETCHFUSE_TESTS_FUZZ_FUZZ_TARGET_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace sketchfuse {

// Valid inputs of the target's format.
std::vector<std::string> FuzzSeeds();

inline void FuzzCheck(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz target: broken promise: %s\n", what.c_str());
  std::abort();
}

}  // namespace sketchfuse

#endif  // SKETCHFUSE_TESTS_FUZZ_FUZZ_TARGET_H_
