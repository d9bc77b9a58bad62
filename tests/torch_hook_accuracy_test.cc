// The PyTorch front end trains as the C++ worker does: examples/pytorch_ddp.py
// (4 processes, DDP with sketchfuse.torch's hook, Debian's PyTorch) against
// four sketchfuse_worker processes on the same settings (the CNN, 2 epochs of
// 24,000 Fashion-MNIST examples, batch 32, lr 0.05, momentum 0.9, seed 1; the
// example reproduces the worker's model initialization, shards and example
// order, and lays each bucket out in the worker's backward order). Final test
// accuracy on the 10,000 test images within 0.5 points for topk_allgather,
// dense_allreduce and sketch_allreduce over the process group, and for
// sketch_ps through two server shards (the example starts them). Measured when
// written: both sides 85.12%, 86.82%, 85.32% and 85.07%, to the digit; the
// margin leaves room for sums whose order differs between the two sides'
// Gloo allreduce algorithms.
//
// The processes run on the reference BLAS (tests/BUILD puts Debian's libblas3
// first on LD_LIBRARY_PATH), as every run did until scripts/setup.sh installed
// OpenBLAS. On OpenBLAS (2026-11-28) the first three schemes still end to the
// digit on both sides (85.17/86.82/85.51% with its Haswell kernels, 83.89/
// 86.60/85.68% with the Cooperlake kernels it picks on this VM), but sketch_ps
// ends 0.76 and 0.93 points apart (worker 84.32 against the example's 85.08%,
// and 84.63 against 85.56%), each side repeatable to the digit: some step of
// the sketch_ps path rounds differently on the two sides under OpenBLAS, and
// the peel amplifies it. Not found yet (the servers merge in worker order;
// OpenBLAS's products do not depend on alignment here). The test checks
// that the hook computes what the worker computes, so it pins the BLAS on
// which the two sides' arithmetic is known to agree.
// Usage (from Bazel): torch_hook_accuracy_test <sketchfuse_server> <sketchfuse_worker>,
// with SKETCHFUSE_EXAMPLE and SKETCHFUSE_LIB in the environment.
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"
#include "tests/training_cluster.h"

namespace sketchfuse {
namespace {

constexpr int kWorld = 4;

double WorkerAccuracy(const std::string& scheme, int shards) {
  const std::vector<std::string> flags = {
      "--job=torch_hook", absl::StrCat("--world_size=", kWorld), "--workload=cnn", "--scheme=" + scheme,
      "--train_examples=24000", "--test_examples=10000", "--epochs=2", "--batch_size=32", "--seed=1",
      "--report_every=0"};
  TrainingCluster cluster(daemon_binaries.server, daemon_binaries.worker,
                          absl::StrCat(TestTempDir(), "/worker_", scheme), flags);
  const std::vector<WorkerResult> results = cluster.Train(kWorld, shards);
  if (results.size() != static_cast<size_t>(kWorld)) {
    ADD_FAILURE() << scheme << ": the C++ workers did not finish";
    return -1;
  }
  return 100.0 * results[0].accuracy;
}

double ExampleAccuracy(const std::string& scheme, int shards) {
  const char* example = std::getenv("SKETCHFUSE_EXAMPLE");
  if (example == nullptr) {
    ADD_FAILURE() << "SKETCHFUSE_EXAMPLE is not set";
    return -1;
  }
  const std::string dir = TestTempDir();
  const std::string json = absl::StrCat(dir, "/example_", scheme, "_{rank}.json");
  std::vector<std::string> argv = {"/usr/bin/python3", example,  "--nproc_per_node=4", "--scheme=" + scheme,
                                   "--model=cnn",      "--seed=1", "--json=" + json};
  if (shards > 0) {
    argv.push_back(absl::StrCat("--start_servers=", shards));
    argv.push_back("--server_binary=" + daemon_binaries.server);
  }
  const pid_t pid = Spawn(argv,
                          absl::StrCat(dir, "/example_", scheme, ".out"), absl::StrCat(dir, "/example_", scheme, ".err"));
  const int code = WaitFor(pid, std::chrono::seconds(600));
  if (code != 0) {
    ADD_FAILURE() << scheme << ": the example exited with " << code << ":\n"
                  << ReadFileOrEmpty(absl::StrCat(dir, "/example_", scheme, ".err"));
    return -1;
  }
  const std::string summary = ReadFileOrEmpty(absl::StrCat(dir, "/example_", scheme, "_0.json"));
  std::smatch match;
  if (!std::regex_search(summary, match, std::regex("\"test_accuracy\": ([0-9.]+)"))) {
    ADD_FAILURE() << scheme << ": no test_accuracy in the example's summary:\n" << summary;
    return -1;
  }
  std::printf("%s", ReadFileOrEmpty(absl::StrCat(dir, "/example_", scheme, ".out")).c_str());
  return std::stod(match[1]);
}

TEST(TorchHookAccuracyTest, TheExampleEndsWhereTheWorkerEnds) {
  struct Case {
    std::string scheme;
    int shards;  // servers the example starts (0: none, a decentralized scheme)
  };
  constexpr double kMarginPoints = 0.5;
  for (const Case& c : {Case{"topk_allgather", 0}, Case{"dense_allreduce", 0}, Case{"sketch_allreduce", 0},
                        Case{"sketch_ps", 2}}) {
    const double worker = WorkerAccuracy(c.scheme, c.shards > 0 ? c.shards : 1);
    const double example = ExampleAccuracy(c.scheme, c.shards);
    std::printf("%s: sketchfuse_worker %.2f%%, PyTorch DDP hook %.2f%%\n", c.scheme.c_str(), worker, example);
    EXPECT_GT(worker, 80) << c.scheme;
    EXPECT_NEAR(example, worker, kMarginPoints) << c.scheme;
  }
}

}  // namespace
}  // namespace sketchfuse
