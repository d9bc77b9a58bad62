// A phase of a group's exchange, for the per-step timeline (compress, push,
// communicate, decode).
#ifndef SKETCHFUSE_WORKER_CORE_TRACE_SPAN_H_
#define SKETCHFUSE_WORKER_CORE_TRACE_SPAN_H_

#include <string>

#include "absl/time/time.h"

namespace sketchfuse {

struct TraceSpan {
  std::string name;
  absl::Time begin;
  absl::Time end;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_CORE_TRACE_SPAN_H_
