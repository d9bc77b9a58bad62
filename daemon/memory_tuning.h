// Process-wide allocator settings for the daemons' step loops.
//
// Every training step allocates and frees buffers of megabytes (payloads,
// updates, sketch tables). By default glibc serves blocks above 128 KiB with
// fresh mmap()s (raising the threshold only after frees) and returns freed
// heap tops to the kernel, so the next step touches new pages: on the
// development VMs a page fault costs enough that a 26 MB copy took 80 ms
// instead of 3 (measured on the ResNet-50 synthetic profile, docs/BENCHMARKS.md).
#ifndef SKETCHFUSE_DAEMON_MEMORY_TUNING_H_
#define SKETCHFUSE_DAEMON_MEMORY_TUNING_H_

namespace sketchfuse {

// Keeps freed memory for reuse: every block comes from the heap (no block
// is mmap()ed on its own, however large), all threads share the main arena
// (the heaps of glibc's per-thread arenas shrink as blocks are freed), and
// freed heap memory is not returned to the kernel while less than 1 GiB is
// free. Call once, early in main(), before threads start. Resident memory
// then stays at its high-water mark, as with a caching allocator. Measured
// on a 16 MiB gRPC push and reply (bench/server_bench, docs/BENCHMARKS.md):
// 112 ms with per-thread arenas, 27 ms with one. Returns false if glibc
// refused a setting.
bool KeepFreedMemoryMapped();

}  // namespace sketchfuse

#endif  // SKETCHFUSE_DAEMON_MEMORY_TUNING_H_
