// Scheduling hints for the daemon's latency-sensitive threads.
//
// On a busy host (every campaign step running on few cores) a thread that
// wakes to answer one HTTP request waits for a CPU behind the step threads:
// the daemon's /metrics took up to 28 ms on 2 cores although the request
// itself costs under 1 ms (docs/benchmarks.md, "Store at scale"). Linux
// 6.12+ (EEVDF) lets a thread ask for a shorter time slice
// (sched_attr::sched_runtime for SCHED_OTHER); a woken thread with a shorter
// slice than the running one preempts it. This needs no privilege and,
// unlike lowering the step threads' nice value, is not inherited by what the
// steps spawn (GPU workers must not time kernels at a reduced priority).
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace kopt {

// What asking for a slice came to, as data: a kernel that does not support
// custom slices (before 6.12) accepts the call but keeps its default, and
// that is a normal outcome on older hosts, not an error.
struct slice_request {
  enum class result { applied, unsupported, failed };
  result outcome = result::failed;
  std::string detail;  // errno text, or what the kernel kept
};

// Asks for `slice` (the kernel clamps it to 0.1-100 ms) on the calling thread.
slice_request request_thread_slice(std::chrono::microseconds slice);

// The calling thread's slice as the kernel reports it (its default when it
// asked for none), or nullopt on kernels that do not report one (before
// 6.12). For tests and diagnostics.
std::optional<std::chrono::microseconds> thread_slice();

}  // namespace kopt
