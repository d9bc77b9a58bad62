// A local training cluster of real processes on loopback, for the
// multi-process training tests: sketchfuse_server shards (shard 0 serving
// the coordinator) and sketchfuse_worker processes, each with its logs in
// the cluster's directory. The servers hold a shard token besides the
// workers' token, so each worker's calls are bound to its rank
// (server/worker_proof.h), as in the main job. Everything still running is
// killed when the cluster is destroyed.
#ifndef SKETCHFUSE_TESTS_TRAINING_CLUSTER_H_
#define SKETCHFUSE_TESTS_TRAINING_CLUSTER_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace sketchfuse {

// The daemons the training tests run. Set from the test's command line by
// training_test_main.cc (`<test> <sketchfuse_server> <sketchfuse_worker>`,
// as the BUILD rules pass them).
struct DaemonBinaries {
  std::string server;
  std::string worker;
};
extern DaemonBinaries daemon_binaries;

// What a worker's JSON summary says.
struct WorkerResult {
  double accuracy = -1;
  // The last epoch record without times and training loss: equal between
  // workers that hold the same model.
  std::string last_epoch;
  long resumed_from = -1;
  long steps = -1;
  long collective_steps = -1;
  // Push attempts the centralized route retried (0 when it reported none).
  long retried_pushes = 0;
  // The summary's peel_recovered_share; -1 when null (no peeled sketches).
  double peel_recovered_share = -1;
};

WorkerResult ParseSummary(const std::string& out);

class TrainingCluster {
 public:
  // `run_flags` are the flags every process of the run shares (job, world
  // size, workload, scheme, ...).
  TrainingCluster(std::string server_binary, std::string worker_binary, std::string dir,
                  std::vector<std::string> run_flags);
  ~TrainingCluster();

  // Flags for every server started from now on (e.g. --state_dir).
  void SetServerFlags(std::vector<std::string> flags) { server_flags_ = std::move(flags); }
  // The address servers listen on and advertise (default 127.0.0.1).
  void SetHost(std::string host) { host_ = std::move(host); }

  // Writes the job config (partitioned for `shards` shards, see
  // worker/pipeline/job_plan.h) and starts `shards` servers, on `ports` if given
  // (else free ones); returns the coordinator's address ("" on failure, with
  // a test failure recorded).
  std::string StartServers(int shards, const std::vector<int>& ports = {});
  // Sends `signal` to every server and reaps them; with SIGTERM, expects a
  // clean exit.
  void StopServers(int signal);
  // Kills shard `s` with SIGKILL and reaps it; returns its exit code.
  int KillServer(int s);
  // Starts shard `s` again with the flags and the port it had, and waits
  // until it listens (its output goes to server<s>.restart<k>.out/.err).
  // False (with a test failure recorded) if it does not come up.
  bool RestartServer(int s);
  // The output of shard `s`'s latest process.
  std::string ServerOut(int s) const;

  // Starts worker `w`; `prefix` goes before the binary (e.g. `ip netns exec
  // NAME` to run it in a network namespace).
  pid_t StartWorker(int w, const std::vector<std::string>& extra = {}, const std::vector<std::string>& prefix = {});
  // Waits until worker `w`'s output contains `text`; false after `timeout`.
  bool WaitForWorkerOutput(int w, const std::string& text, std::chrono::seconds timeout) const;
  // Kills a started worker with SIGKILL, reaps it and forgets it; returns its
  // exit code (128 + SIGKILL).
  int KillWorker(pid_t pid);
  // Waits for a started worker to exit (up to `timeout`, then kills it),
  // forgets it and returns its exit code; for workers expected to fail.
  int WaitForWorkerExit(pid_t pid, std::chrono::seconds timeout);
  // Waits for every worker started and not killed (test failure on a
  // non-zero exit) and returns their summaries, by worker index.
  std::vector<WorkerResult> WaitForWorkers();

  // A whole job: servers, `world` workers, their summaries, servers stopped.
  std::vector<WorkerResult> Train(int world, int shards, const std::vector<std::string>& worker_flags = {});

  std::string WorkerOut(int w) const;
  const std::string& dir() const { return dir_; }
  const std::string& coordinator() const { return coordinator_; }

 private:
  const std::string server_binary_, worker_binary_, dir_;
  const std::vector<std::string> run_flags_;
  std::string host_ = "127.0.0.1";
  std::vector<std::string> server_flags_;
  std::string coordinator_;
  struct Server {
    std::vector<std::string> argv;  // with the port it listens on, for restarts
    pid_t pid = -1;
    int restarts = 0;
  };
  std::vector<Server> servers_;
  std::vector<std::pair<int, pid_t>> workers_;  // (index, pid)
};

// `n` distinct free TCP ports on loopback (bound and released).
std::vector<int> FreePorts(int n);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_TESTS_TRAINING_CLUSTER_H_
