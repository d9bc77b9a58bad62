// A network namespace of the test's own, joined to the test's namespace by a
// veth pair, for multi-process tests that need a real link between
// processes: cut it (a partition) or shape it (tc). Only addresses inside
// 10.213.0.0/16 on that pair are used; nothing else on the machine is
// touched. Needs CAP_NET_ADMIN (root, and outside Bazel's sandbox: such
// tests are tagged no-sandbox); Create says so when it is missing.
#ifndef SKETCHFUSE_TESTS_NETNS_LINK_H_
#define SKETCHFUSE_TESTS_NETNS_LINK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sketchfuse {

class NetnsLink {
 public:
  // Creates namespace "sf-<tag>-<pid>" and a veth pair, the test's end at
  // 10.213.<n>.1/30 and the namespace's at 10.213.<n>.2/30 (n from the pid),
  // both up, with loopback up in the namespace. FAILED_PRECONDITION (with
  // ip's message) when namespaces cannot be made here; everything made is
  // removed on failure.
  static absl::StatusOr<std::unique_ptr<NetnsLink>> Create(const std::string& tag);
  ~NetnsLink();  // removes the namespace (and with it the pair)

  // The test's end of the pair: servers listen here to be reachable from
  // the namespace (and, locally, from the test's namespace too).
  const std::string& host_address() const { return host_address_; }
  const std::string& namespace_address() const { return namespace_address_; }
  // Put before a command's argv to run it inside the namespace.
  std::vector<std::string> ExecPrefix() const;

  // Takes the test's end of the pair down (false: packets are dropped both
  // ways, connections stall as in a real partition) or up again.
  absl::Status SetConnected(bool connected);

 private:
  NetnsLink() = default;

  std::string name_, host_device_, host_address_, namespace_address_;
};

// Runs `argv` (argv[0] a path) and waits; INTERNAL with its stderr when it
// fails.
absl::Status RunCommand(const std::vector<std::string>& argv);

// The path of the `ip` tool, or "" when none is installed.
std::string IpTool();

}  // namespace sketchfuse

#endif  // SKETCHFUSE_TESTS_NETNS_LINK_H_
