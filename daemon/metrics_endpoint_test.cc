// The scrape endpoint on a real socket: GET /metrics answers with the
// registry's metrics in Prometheus' text format; a taken port and a port out
// of range are refused naming the problem.
#include "daemon/metrics_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;

// The body of GET /metrics on 127.0.0.1:port ("" on failure).
std::string Scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  send(fd, request.data(), request.size(), 0);
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) response.append(buffer, n);
  close(fd);
  return response;
}

TEST(MetricsEndpointTest, ServesTheRegistryOverHttp) {
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_GT((*endpoint)->port(), 0);
  auto& family = prometheus::BuildCounter()
                     .Name("sketchfuse_test_events_total")
                     .Help("Events seen by the test.")
                     .Register((*endpoint)->registry());
  family.Add({{"kind", "a"}}).Increment(3);
  const std::string body = Scrape((*endpoint)->port());
  EXPECT_THAT(body, HasSubstr("200 OK"));
  EXPECT_THAT(body, HasSubstr("# HELP sketchfuse_test_events_total Events seen by the test."));
  EXPECT_THAT(body, HasSubstr("sketchfuse_test_events_total{kind=\"a\"} 3"));
}

TEST(MetricsEndpointTest, AnswersOtherRequestsWithClearErrors) {
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_THAT((*endpoint)->Respond("GET /other HTTP/1.1\r\n\r\n"), HasSubstr("404 Not Found"));
  EXPECT_THAT((*endpoint)->Respond("POST /metrics HTTP/1.1\r\n\r\n"), HasSubstr("400 Bad Request"));
  EXPECT_THAT((*endpoint)->Respond(std::string(100, '\0')), HasSubstr("400 Bad Request"));
  EXPECT_THAT((*endpoint)->Respond(""), HasSubstr("400 Bad Request"));
  // A client that sends garbage and hangs up does not stop the endpoint.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons((*endpoint)->port());
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  send(fd, "\x01\x02garbage", 9, 0);
  close(fd);
  EXPECT_THAT(Scrape((*endpoint)->port()), HasSubstr("200 OK"));
}

TEST(MetricsEndpointTest, RefusesBadAndTakenPorts) {
  EXPECT_EQ(MetricsEndpoint::Start("localhost-ish", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsEndpoint::Start("127.0.0.1", 70000).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> first = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> second = MetricsEndpoint::Start("127.0.0.1", (*first)->port());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(std::to_string((*first)->port())));
}

}  // namespace
}  // namespace sketchfuse
