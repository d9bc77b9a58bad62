// --virtual_workers against the real thing: for every scheme, the same run
// (the MLP, 4 workers, 2 shards, seed 7) as four sketchfuse_worker processes
// with two sketchfuse_server shards on loopback, and as one
// `sketchfuse_worker --virtual_workers=4` process. The virtual run must end
// with the same model: the same test loss (6 decimals) and accuracy after
// its epoch, and every worker's bytes as the processes count them (sent and
// received per worker per step, each worker's bytes averaged). Also: a NaN
// injected into virtual worker 3's gradient ends the run as a divergence
// naming that worker, with the divergence exit status; so does a loss that
// blows up without going non-finite (a learning rate of 5).
// Usage (from Bazel): virtual_workers_test <sketchfuse_server> <sketchfuse_worker>
#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"
#include "tests/training_cluster.h"

namespace sketchfuse {
namespace {

constexpr int kWorkers = 4;

std::vector<std::string> RunFlags(const std::string& scheme) {
  return {"--job=virtual-eq",   absl::StrCat("--world_size=", kWorkers), "--workload=mlp", "--scheme=" + scheme,
          "--train_examples=2000", "--test_examples=2000", "--epochs=1", "--batch_size=32", "--seed=7",
          "--report_every=0"};
}

// A number in a summary (-1 when absent).
double SummaryNumber(const std::string& out, const std::string& field) {
  std::smatch m;
  if (std::regex_search(out, m, std::regex("\"" + field + "\": ([0-9.eE+-]+)"))) return std::stod(m[1]);
  return -1;
}

struct VirtualRun {
  int exit_code = -1;
  std::string out, err;
};

VirtualRun RunVirtual(const std::string& name, const std::vector<std::string>& flags) {
  const std::string dir = absl::StrCat(TestTempDir(), "/", name);
  std::vector<std::string> argv = {daemon_binaries.worker, absl::StrCat("--virtual_workers=", kWorkers),
                                   "--virtual_shards=2"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  VirtualRun run;
  const pid_t pid = Spawn(argv, dir + ".out", dir + ".err");
  run.exit_code = WaitFor(pid, std::chrono::seconds(300));
  run.out = ReadFileOrEmpty(dir + ".out");
  run.err = ReadFileOrEmpty(dir + ".err");
  return run;
}

class VirtualWorkersTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VirtualWorkersTest, EndsWithTheModelAndTheBytesOfFourProcesses) {
  const std::string scheme = GetParam();
  TrainingCluster cluster(daemon_binaries.server, daemon_binaries.worker,
                          absl::StrCat(TestTempDir(), "/", scheme, "-processes"), RunFlags(scheme));
  const std::vector<WorkerResult> processes = cluster.Train(kWorkers, 2);
  ASSERT_EQ(processes.size(), static_cast<size_t>(kWorkers));
  const VirtualRun virtual_run = RunVirtual(scheme + "-virtual", RunFlags(scheme));
  ASSERT_EQ(virtual_run.exit_code, 0) << virtual_run.err;
  const WorkerResult virtual_result = ParseSummary(virtual_run.out);
  // The same model: test loss and accuracy after the epoch, to the digit.
  EXPECT_EQ(virtual_result.last_epoch, processes[0].last_epoch);
  EXPECT_EQ(virtual_result.accuracy, processes[0].accuracy);
  EXPECT_EQ(virtual_result.steps, processes[0].steps);
  // The bytes: the mean of the processes' (each counted as it was sent).
  for (const char* field : {"bytes_sent_per_step", "bytes_received_per_step"}) {
    double mean = 0;
    for (int w = 0; w < kWorkers; ++w) mean += SummaryNumber(cluster.WorkerOut(w), field) / kWorkers;
    // Integer bytes per step, averaged over the workers in both: within a byte.
    EXPECT_NEAR(SummaryNumber(virtual_run.out, field), mean, 1.0) << field;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryScheme, VirtualWorkersTest,
                         ::testing::Values("sketch_ps", "topk_ps", "dense_ps", "dense_allreduce",
                                           "dense_bf16_allreduce", "sketch_allreduce", "fixed_sketch_allreduce",
                                           "fixed_sketch_ps", "topk_allgather", "gtopk", "importance_allreduce",
                                           "spardl", "auto", "fixed_sketch_auto"));

// Runs `flags` as four worker processes (two shards) and as one virtual
// process, named `name`: both must end with the same model (the test loss of
// the last epoch and the accuracy, to the digit, on every process). The
// virtual run, for more checks.
VirtualRun ExpectTheModelOfFourProcesses(const std::string& name, const std::vector<std::string>& flags) {
  TrainingCluster cluster(daemon_binaries.server, daemon_binaries.worker,
                          absl::StrCat(TestTempDir(), "/", name, "-processes"), flags);
  const std::vector<WorkerResult> processes = cluster.Train(kWorkers, 2);
  EXPECT_EQ(processes.size(), static_cast<size_t>(kWorkers)) << name;
  const VirtualRun virtual_run = RunVirtual(name + "-virtual", flags);
  EXPECT_EQ(virtual_run.exit_code, 0) << virtual_run.err;
  if (processes.size() != static_cast<size_t>(kWorkers) || virtual_run.exit_code != 0) return virtual_run;
  const WorkerResult virtual_result = ParseSummary(virtual_run.out);
  EXPECT_EQ(virtual_result.last_epoch, processes[0].last_epoch) << name;
  EXPECT_EQ(virtual_result.accuracy, processes[0].accuracy) << name;
  for (int w = 1; w < kWorkers; ++w) EXPECT_EQ(processes[w].accuracy, processes[0].accuracy) << name << " " << w;
  return virtual_run;
}

// Global momentum (--momentum_at=update): every process keeps its own copy
// of the optimizer's velocity, fed the same aggregated update, so the four
// processes and the virtual run end with the same model.
TEST(VirtualWorkersGlobalMomentumTest, EndsWithTheModelOfFourProcesses) {
  for (const std::string scheme : {"fixed_sketch_ps", "topk_allgather"}) {
    std::vector<std::string> flags = RunFlags(scheme);
    flags.push_back("--momentum_at=update");
    ExpectTheModelOfFourProcesses(scheme + "-update", flags);
  }
}

// What global momentum is: with every coordinate sent (Top-k at density 1,
// error feedback then holds nothing), it is dense momentum SGD, so
// topk_allgather ends where dense_allreduce does (the sums' order differs:
// an allgather adds rank by rank, the ring by chunks, so the digits may
// differ a little). Momentum correction at density 1 masks the whole
// velocity every step, which leaves plain SGD: a different model.
TEST(VirtualWorkersGlobalMomentumTest, AtFullDensityItIsDenseMomentumSgd) {
  const VirtualRun dense = RunVirtual("full-dense", RunFlags("dense_allreduce"));
  ASSERT_EQ(dense.exit_code, 0) << dense.err;
  std::vector<std::string> update = RunFlags("topk_allgather");
  update.push_back("--compressor=topk:density=1");
  std::vector<std::string> worker = update;
  update.push_back("--momentum_at=update");
  worker.push_back("--momentum_at=worker");
  worker.push_back("--release_cap=0");
  const VirtualRun global = RunVirtual("full-update", update);
  ASSERT_EQ(global.exit_code, 0) << global.err;
  const VirtualRun corrected = RunVirtual("full-worker", worker);
  ASSERT_EQ(corrected.exit_code, 0) << corrected.err;
  // One epoch: the summary's only test loss.
  const double dense_loss = SummaryNumber(dense.out, "test_loss");
  const double global_loss = SummaryNumber(global.out, "test_loss");
  const double corrected_loss = SummaryNumber(corrected.out, "test_loss");
  ASSERT_GT(dense_loss, 0) << dense.out;
  EXPECT_NEAR(global_loss, dense_loss, 1e-4 * dense_loss) << global.out;
  EXPECT_GT(std::abs(corrected_loss - dense_loss), 100 * std::abs(global_loss - dense_loss) + 1e-3) << corrected.out;
}

// The residual in units of the learning rate (--residual_in_rate_units, the
// default) under a warm-up over most of the epoch's 15 steps: the trainer of
// each process and the virtual workers rescale the residuals after the same
// steps by the same factors, so they end with the same model; and the rule
// changes the model against raw gradients (--residual_in_rate_units=false).
TEST(VirtualWorkersRateUnitsTest, EndsWithTheModelOfFourProcessesAndChangesIt) {
  for (const std::string scheme : {"fixed_sketch_ps", "topk_allgather"}) {
    std::vector<std::string> raw = RunFlags(scheme);
    raw.push_back("--lr_base_workers=1");
    raw.push_back("--lr_warmup_steps=12");
    std::vector<std::string> flags = raw;
    flags.push_back("--residual_in_rate_units");
    raw.push_back("--residual_in_rate_units=false");
    const VirtualRun virtual_run = ExpectTheModelOfFourProcesses(scheme + "-rate-units", flags);
    ASSERT_EQ(virtual_run.exit_code, 0) << virtual_run.err;
    const VirtualRun raw_run = RunVirtual(scheme + "-raw-virtual", raw);
    ASSERT_EQ(raw_run.exit_code, 0) << raw_run.err;
    EXPECT_NE(SummaryNumber(raw_run.out, "test_loss"), SummaryNumber(virtual_run.out, "test_loss")) << scheme;
  }
}

TEST(VirtualWorkersDivergenceTest, ANanInOneWorkersGradientStopsTheJobNamingIt) {
  std::vector<std::string> flags = RunFlags("sketch_allreduce");
  flags.push_back("--inject_nan_gradient_at_step=3");
  flags.push_back("--inject_nan_gradient_worker=3");
  const VirtualRun run = RunVirtual("diverged", flags);
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_NE(run.out.find("\"diverged\": {\"step\": 3"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\"worker\": \"virtual-3\""), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("virtual-3"), std::string::npos) << run.err;
}

// At a learning rate of 5 the MLP's mean loss goes 2.3, 4.5, 5054, 5.2e5,
// 1.6e11, 1.0e18, 1.2e35 over steps 0 to 6, and turns NaN at step 7, where
// the run stopped before the blow-up bound. The bound (100 ln 10 = 230.26
// nats) stops it at a finite loss, and names it: "the loss is ..., past 100
// times a uniform guess's".
TEST(VirtualWorkersDivergenceTest, ALossThatBlowsUpStopsTheJobBeforeItTurnsNaN) {
  std::vector<std::string> flags = RunFlags("dense_allreduce");
  flags.push_back("--learning_rate=5");
  const VirtualRun run = RunVirtual("blown-up", flags);
  EXPECT_EQ(run.exit_code, 3) << run.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.out, m,
                                std::regex("\"diverged\": \\{\"step\": ([0-9]+), \"group\": null, \"worker\": "
                                           "\"virtual-[0-3]\", \"what\": \"loss\", \"index\": null, "
                                           "\"value\": \"([^\"]+)\"")))
      << run.out;
  const int step = std::stoi(m[1]);
  const double loss = std::stod(m[2]);
  EXPECT_GE(step, 1) << "the first step's loss is the initial model's";
  EXPECT_LT(step, 7) << "not at the NaN (step 7), at the first loss past the bound";
  EXPECT_TRUE(std::isfinite(loss)) << m[2];
  EXPECT_GT(loss, 230.26) << m[2];
  EXPECT_EQ(SummaryNumber(run.out, "steps"), step) << "the steps done before it";
  EXPECT_NE(run.out.find("\"final_test_accuracy\": null"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("past 100 times a uniform guess's (the model has blown up)"), std::string::npos) << run.err;
}

// On the centralized route the workers before the diverged one have pushed
// the step's first round, which the others never will. The process still
// ends at once with the divergence: the shards fail those rounds as the
// workers stop. It used to wait for the round deadline, which a virtual run
// takes from --collective_timeout_s: here 1,000 s, past RunVirtual's 300 s
// (exit code -1 then).
TEST(VirtualWorkersDivergenceTest, OnTheCentralizedRouteTheJobStopsWithoutWaitingForItsRounds) {
  for (const std::string scheme : {"sketch_ps", "fixed_sketch_ps"}) {
    std::vector<std::string> flags = RunFlags(scheme);
    flags.push_back("--inject_nan_gradient_at_step=3");
    flags.push_back("--inject_nan_gradient_worker=3");
    flags.push_back("--collective_timeout_s=1000");
    const VirtualRun run = RunVirtual(scheme + "-diverged", flags);
    EXPECT_EQ(run.exit_code, 3) << scheme << " " << run.err;
    EXPECT_NE(run.out.find("\"diverged\": {\"step\": 3"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("\"worker\": \"virtual-3\""), std::string::npos) << run.out;
  }
}

}  // namespace
}  // namespace sketchfuse
