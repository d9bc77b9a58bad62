// Starting and stopping real processes in tests.
#ifndef SKETCHFUSE_TESTS_PROCESS_UTIL_H_
#define SKETCHFUSE_TESTS_PROCESS_UTIL_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace sketchfuse {

// The test's scratch directory ($TEST_TMPDIR, else /tmp).
std::string TestTempDir();

// The whole content of a file ("" if it cannot be read).
std::string ReadFileOrEmpty(const std::string& path);

// Starts `argv` with stdout and stderr sent to the given files; -1 on failure.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& out_path,
            const std::string& err_path);

// Exit code of `pid` (128 + signal if killed by one), or -1 if it did not exit
// within `timeout`, in which case it is killed.
int WaitFor(pid_t pid, std::chrono::seconds timeout);

// Waits until `path` holds something, up to `timeout`; returns its content.
std::string WaitForFile(const std::string& path, std::chrono::seconds timeout);

// Resident memory of `pid` in KiB (VmRSS in /proc/<pid>/status); 0 when it
// cannot be read.
uint64_t ResidentKib(pid_t pid);

// Kills `pid` with SIGKILL if it still runs, and reaps it.
void KillIfRunning(pid_t pid);

// The whole HTTP/1.0 response to GET `path` from 127.0.0.1:port ("" when it
// cannot connect).
std::string HttpGet(int port, const std::string& path);

// The value of the Prometheus sample `series` (name with labels, exactly as
// exposed, e.g. `x_total{code="ok"}`) in a scrape; -1 when absent.
double MetricValue(const std::string& scrape, const std::string& series);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_TESTS_PROCESS_UTIL_H_
