// Process-wide allocator settings for the daemons' step loops.
//
// Every training step allocates and frees buffers of megabytes (payloads,
// updates, sketch tables). By default glibc serves blocks above 128 KiB with
// fresh mmap()s (raising the threshold only after frees) and returns freed
// heap tops to the kernel, so the next step touches new pages: on the
// development VMs a page fault costs enough that a 26 MB copy took 80 ms
// instead of 3 (measured on the ResNet-50 synthetic profile, docs/BENCHMARKS.md).
#ifndef SKETCHFUSE_COMMON_MEMORY_TUNING_H_
#define SKETCHFUSE_COMMON_MEMORY_TUNING_H_

namespace sketchfuse {

// Keeps freed memory for reuse: blocks up to 32 MiB (glibc's largest mmap
// threshold) come from the heap, and freed heap memory is not returned to
// the kernel while less than 1 GiB is free. Call once, early in main().
// Resident memory then stays at its high-water mark, as with a caching
// allocator. Returns false if glibc refused a setting.
bool KeepFreedMemoryMapped();

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_MEMORY_TUNING_H_
