#include "tests/netns_link.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "tests/process_util.h"

namespace sketchfuse {

std::string IpTool() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

absl::Status RunCommand(const std::vector<std::string>& argv) {
  const std::string err = absl::StrCat(TestTempDir(), "/command.", getpid(), ".err");
  const pid_t pid = Spawn(argv, "/dev/null", err);
  if (pid < 0) return absl::InternalError(absl::StrCat("cannot start ", argv[0]));
  const int code = WaitFor(pid, std::chrono::seconds(30));
  const std::string message(absl::StripAsciiWhitespace(ReadFileOrEmpty(err)));
  std::remove(err.c_str());
  if (code != 0) {
    return absl::InternalError(absl::StrCat("'", absl::StrJoin(argv, " "), "' failed (exit ", code, "): ", message));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NetnsLink>> NetnsLink::Create(const std::string& tag) {
  const std::string ip = IpTool();
  if (ip.empty()) return absl::FailedPreconditionError("no 'ip' tool (Debian package iproute2)");
  std::unique_ptr<NetnsLink> link(new NetnsLink());
  const int pid = getpid();
  const int subnet = pid % 250 + 1;
  link->name_ = absl::StrCat("sf-", tag, "-", pid);
  link->host_device_ = absl::StrCat("sfh", pid);
  const std::string peer = absl::StrCat("sfn", pid);
  link->host_address_ = absl::StrCat("10.213.", subnet, ".1");
  link->namespace_address_ = absl::StrCat("10.213.", subnet, ".2");
  const std::vector<std::vector<std::string>> steps = {
      {ip, "netns", "add", link->name_},
      {ip, "link", "add", link->host_device_, "type", "veth", "peer", "name", peer, "netns", link->name_},
      {ip, "addr", "add", link->host_address_ + "/30", "dev", link->host_device_},
      {ip, "link", "set", link->host_device_, "up"},
      {ip, "netns", "exec", link->name_, ip, "addr", "add", link->namespace_address_ + "/30", "dev", peer},
      {ip, "netns", "exec", link->name_, ip, "link", "set", peer, "up"},
      {ip, "netns", "exec", link->name_, ip, "link", "set", "lo", "up"},
  };
  for (const std::vector<std::string>& step : steps) {
    if (absl::Status s = RunCommand(step); !s.ok()) {
      // The destructor removes what was made.
      return absl::FailedPreconditionError(
          absl::StrCat("cannot make a network namespace here (needs root with CAP_NET_ADMIN, outside a "
                       "sandbox): ", s.message()));
    }
  }
  return link;
}

NetnsLink::~NetnsLink() {
  const std::string ip = IpTool();
  if (ip.empty() || name_.empty()) return;
  // Deleting the namespace deletes its end of the pair, and so the pair.
  (void)RunCommand({ip, "link", "del", host_device_});
  (void)RunCommand({ip, "netns", "del", name_});
}

std::vector<std::string> NetnsLink::ExecPrefix() const { return {IpTool(), "netns", "exec", name_}; }

absl::Status NetnsLink::SetConnected(bool connected) {
  return RunCommand({IpTool(), "link", "set", host_device_, connected ? "up" : "down"});
}

}  // namespace sketchfuse
