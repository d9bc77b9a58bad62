#include "worker/pipeline/trace_writer.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace sketchfuse {

TraceWriter::TraceWriter(int rank, std::string process_name) : rank_(rank), process_name_(std::move(process_name)) {}

void TraceWriter::NameTrack(int track, const std::string& name) { tracks_[track] = name; }

void TraceWriter::AddSpan(int track, const std::string& name, absl::Time begin, absl::Time end,
                          const std::map<std::string, std::string>& args) {
  if (end < begin) end = begin;
  std::vector<std::string> fields;
  for (const auto& [key, value] : args) fields.push_back(absl::StrCat(JsonString(key), ": ", JsonString(value)));
  events_.push_back(absl::StrFormat(
      "{\"name\": %s, \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %d, \"dur\": %d, \"args\": {%s}}",
      JsonString(name), rank_, track, absl::ToUnixMicros(begin), absl::ToInt64Microseconds(end - begin),
      absl::StrJoin(fields, ", ")));
}

std::string TraceWriter::ToJson() const {
  std::vector<std::string> all;
  all.push_back(absl::StrFormat("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": %s}}",
                                rank_, JsonString(process_name_)));
  for (const auto& [track, name] : tracks_) {
    all.push_back(absl::StrFormat(
        "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": %s}}", rank_,
        track, JsonString(name)));
  }
  all.insert(all.end(), events_.begin(), events_.end());
  return absl::StrCat("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", absl::StrJoin(all, ",\n"), "\n]}\n");
}

std::unique_ptr<TraceWriter> PipelineTraceWriter(int rank, int num_groups) {
  auto trace = std::make_unique<TraceWriter>(rank, absl::StrCat("worker rank ", rank));
  trace->NameTrack(0, "compute");
  for (int g = 0; g < num_groups; ++g) trace->NameTrack(g + 1, absl::StrCat("group ", g));
  return trace;
}

void AddStepToTrace(int64_t step, const StepTimeline& timeline, absl::Time apply_begin, absl::Time apply_end,
                    TraceWriter* trace) {
  const std::map<std::string, std::string> args = {{"step", absl::StrCat(step)}};
  trace->AddSpan(0, "backward", timeline.begin, timeline.backward_end, args);
  trace->AddSpan(0, "apply update", apply_begin, apply_end, args);
  for (size_t g = 0; g < timeline.groups.size(); ++g) {
    for (const TraceSpan& span : timeline.groups[g]) {
      trace->AddSpan(static_cast<int>(g) + 1, span.name, span.begin, span.end,
                     {{"step", absl::StrCat(step)}, {"group", absl::StrCat(g)}, {"route", timeline.routes[g]}});
    }
  }
}

absl::Status TraceWriter::WriteFile(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << ToJson();
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write the timeline '", tmp, "'"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot rename '", tmp, "' to '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace sketchfuse
