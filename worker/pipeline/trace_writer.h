// A per-step timeline in Chrome's trace event format (JSON), which Perfetto
// (ui.perfetto.dev) and chrome://tracing open. One process per worker (its
// rank), one track for the worker's compute (backward pass, applying the
// update) and one per fusion group (compress, push/communicate, wait,
// decode). Timestamps are wall-clock microseconds, so the files of the
// workers of one machine line up when merged.
//
// NOTE: not thread-safe; the trainer's thread adds and writes.
#ifndef SKETCHFUSE_WORKER_PIPELINE_TRACE_WRITER_H_
#define SKETCHFUSE_WORKER_PIPELINE_TRACE_WRITER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/json_text.h"
#include "worker/pipeline/step_pipeline.h"

namespace sketchfuse {

class TraceWriter {
 public:
  // Events of worker `rank` named `process_name`.
  TraceWriter(int rank, std::string process_name);

  // Names track `track` (0 is the compute track).
  void NameTrack(int track, const std::string& name);

  // A complete event [begin, end) on `track`, with string arguments.
  void AddSpan(int track, const std::string& name, absl::Time begin, absl::Time end,
               const std::map<std::string, std::string>& args = {});

  size_t num_events() const { return events_.size(); }

  // The whole trace as JSON.
  std::string ToJson() const;

  // Writes ToJson() to `path` atomically (temporary file, then rename);
  // PERMISSION_DENIED naming the file when it cannot be written.
  absl::Status WriteFile(const std::string& path) const;

 private:
  const int rank_;
  const std::string process_name_;
  std::map<int, std::string> tracks_;
  std::vector<std::string> events_;  // serialized "X" events
};

// A writer for worker `rank` with its compute track and one track per group.
std::unique_ptr<TraceWriter> PipelineTraceWriter(int rank, int num_groups);

// Adds one step: "backward" and "apply update" on the compute track, and each
// group's spans on its track, with the step, group and route as arguments.
void AddStepToTrace(int64_t step, const StepTimeline& timeline, absl::Time apply_begin, absl::Time apply_end,
                    TraceWriter* trace);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_PIPELINE_TRACE_WRITER_H_
