#include "daemon/metrics_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace sketchfuse {
namespace {

constexpr size_t kMaxRequestBytes = 8 << 10;

std::string HttpResponse(const std::string& status, const std::string& content_type, const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& host, int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " is outside [0, 65535]"));
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("metrics host '", host, "' is not an IPv4 address"));
  }
  const std::string where = absl::StrCat(host, ":", port);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", where, ": ", strerror(errno)));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || listen(fd, 16) != 0) {
    const std::string error = strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", where, ": ", error));
  }
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(fd, ntohs(address.sin_port)));
}

MetricsEndpoint::MetricsEndpoint(int listen_fd, int port)
    : listen_fd_(listen_fd), port_(port), registry_(std::make_shared<prometheus::Registry>()) {
  thread_ = std::thread([this] { Serve(); });
}

MetricsEndpoint::~MetricsEndpoint() {
  stop_ = true;
  thread_.join();
  close(listen_fd_);
}

std::string MetricsEndpoint::Respond(const std::string& request) const {
  const size_t line_end = request.find("\r\n");
  const std::string line = request.substr(0, line_end);
  if (line_end == std::string::npos || line.rfind("GET ", 0) != 0 || line.find(" HTTP/1.") == std::string::npos) {
    return HttpResponse("400 Bad Request", "text/plain", "expected GET /metrics HTTP/1.x\n");
  }
  const std::string path = line.substr(4, line.find(' ', 4) - 4);
  if (path != "/metrics") return HttpResponse("404 Not Found", "text/plain", "the metrics are at /metrics\n");
  return HttpResponse("200 OK", "text/plain; version=0.0.4; charset=utf-8",
                      prometheus::TextSerializer().Serialize(registry_->Collect()));
}

void MetricsEndpoint::Serve() {
  while (!stop_) {
    pollfd listening{listen_fd_, POLLIN, 0};
    if (poll(&listening, 1, 100) <= 0) continue;
    const int connection = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    timeval timeout{2, 0};
    setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    std::string request;
    char buffer[1024];
    while (request.size() < kMaxRequestBytes && request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = recv(connection, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      request.append(buffer, static_cast<size_t>(n));
    }
    const std::string response = Respond(request);
    for (size_t sent = 0; sent < response.size();) {
      const ssize_t n = send(connection, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    close(connection);
  }
}

}  // namespace sketchfuse
