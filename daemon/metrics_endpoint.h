// A Prometheus scrape endpoint: a small HTTP server answering GET /metrics
// with the registry's metrics in Prometheus' text format (prometheus-cpp's
// serializer), on a thread of its own. The servers and the workers each open
// one with --metrics_port.
//
// It does not use prometheus-cpp's civetweb exposer: civetweb's threads get a
// small fixed stack, which LibTorch's static thread-local storage leaves too
// short in the worker (a scrape crashed it).
//
// Requests are read with a 2-second timeout and at most 8 KiB; anything but
// GET /metrics gets 404 or 400. One connection at a time: scrapes are rare.
#ifndef SKETCHFUSE_DAEMON_METRICS_ENDPOINT_H_
#define SKETCHFUSE_DAEMON_METRICS_ENDPOINT_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace sketchfuse {

class MetricsEndpoint {
 public:
  // Listens on host:port (an IPv4 address; port 0 picks a free one).
  // INVALID_ARGUMENT for a port outside [0, 65535] or a host that is not an
  // IPv4 address; UNAVAILABLE naming the address when it cannot listen there.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& host, int port);
  ~MetricsEndpoint();  // stops serving

  prometheus::Registry& registry() { return *registry_; }
  // The port it listens on.
  int port() const { return port_; }

  // The response to one HTTP request (exposed for tests).
  std::string Respond(const std::string& request) const;

 private:
  MetricsEndpoint(int listen_fd, int port);
  void Serve();

  const int listen_fd_;
  const int port_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_DAEMON_METRICS_ENDPOINT_H_
