#include "daemon/memory_tuning.h"

#include <malloc.h>

namespace sketchfuse {

bool KeepFreedMemoryMapped() {
  bool ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  ok = mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1 && ok;
  ok = mallopt(M_TOP_PAD, 64 << 20) == 1 && ok;
  // Blocks above the largest threshold (32 MiB) would still be mmap()ed
  // afresh each time: serve them from the heap too.
  ok = mallopt(M_MMAP_MAX, 0) == 1 && ok;
  // One arena: the heaps of glibc's per-thread arenas (64 MiB each) are
  // shrunk as blocks are freed, whatever the trim threshold, so buffers
  // that gRPC's threads free would be faulted in again on the next round.
  ok = mallopt(M_ARENA_MAX, 1) == 1 && ok;
  return ok;
}

}  // namespace sketchfuse
