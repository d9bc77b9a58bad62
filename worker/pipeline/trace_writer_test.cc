// The timeline's JSON: metadata naming the process and tracks, complete
// events with microsecond times and escaped arguments; atomic writes and a
// clear error for an unwritable path.
#include "worker/pipeline/trace_writer.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(TraceWriterTest, WritesCompleteEventsWithNamedTracks) {
  TraceWriter trace(3, "worker-3");
  trace.NameTrack(0, "compute");
  trace.NameTrack(2, "group 1");
  const absl::Time t0 = absl::FromUnixMicros(1000000);
  trace.AddSpan(0, "backward", t0, t0 + absl::Microseconds(250), {{"step", "7"}});
  trace.AddSpan(2, "compress \"fast\"", t0 + absl::Microseconds(100), t0 + absl::Microseconds(50));
  EXPECT_EQ(trace.num_events(), 2u);
  const std::string json = trace.ToJson();
  EXPECT_NE(json.find("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 3, \"args\": {\"name\": \"worker-3\"}}"),
            std::string::npos) << json;
  EXPECT_NE(json.find("\"tid\": 2, \"args\": {\"name\": \"group 1\"}"), std::string::npos);
  EXPECT_NE(json.find("{\"name\": \"backward\", \"ph\": \"X\", \"pid\": 3, \"tid\": 0, \"ts\": 1000000, \"dur\": 250, "
                      "\"args\": {\"step\": \"7\"}}"),
            std::string::npos)
      << json;
  // Quotes escaped; an end before the begin becomes a zero-length event.
  EXPECT_NE(json.find("\"name\": \"compress \\\"fast\\\"\", \"ph\": \"X\", \"pid\": 3, \"tid\": 2, \"ts\": 1000100, "
                      "\"dur\": 0"),
            std::string::npos)
      << json;
  EXPECT_EQ(JsonString("a\nb\x01"), "\"a\\nb\\u0001\"");
}

TEST(TraceWriterTest, WritesAtomicallyAndNamesAnUnwritablePath) {
  TraceWriter trace(0, "worker-0");
  trace.AddSpan(0, "apply", absl::FromUnixMicros(5), absl::FromUnixMicros(9));
  const std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/trace.json";
  ASSERT_TRUE(trace.WriteFile(path).ok());
  std::stringstream content;
  content << std::ifstream(path).rdbuf();
  EXPECT_EQ(content.str(), trace.ToJson());
  absl::Status bad = trace.WriteFile("/nonexistent-dir/trace.json");
  EXPECT_EQ(bad.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(bad.message().find("/nonexistent-dir/trace.json"), std::string::npos);
}

}  // namespace
}  // namespace sketchfuse
