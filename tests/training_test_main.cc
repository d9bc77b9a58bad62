// main() of the training tests: GoogleTest's flags, then the paths of the
// two daemons, which go to daemon_binaries (tests/training_cluster.h).
#include <cstdio>

#include "gtest/gtest.h"
#include "tests/training_cluster.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <sketchfuse_server> <sketchfuse_worker>\n", argv[0]);
    return 2;
  }
  sketchfuse::daemon_binaries = {argv[1], argv[2]};
  return RUN_ALL_TESTS();
}
