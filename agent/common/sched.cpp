#include "common/sched.hpp"

#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace kopt {

namespace {

// struct sched_attr of sched_setattr(2). glibc 2.36 has no wrapper and
// <linux/sched/types.h> clashes with <sched.h>, so the layout (stable kernel
// ABI, versioned by its size field) is spelled out here.
struct sched_attr_v1 {
  std::uint32_t size;
  std::uint32_t sched_policy;
  std::uint64_t sched_flags;
  std::int32_t sched_nice;
  std::uint32_t sched_priority;
  std::uint64_t sched_runtime;  // SCHED_OTHER on Linux >= 6.12: the requested slice, ns
  std::uint64_t sched_deadline;
  std::uint64_t sched_period;
  std::uint32_t sched_util_min;
  std::uint32_t sched_util_max;
};

constexpr std::uint32_t policy_other = 0;  // SCHED_OTHER
// The kernel's clamp of a requested slice (kernel/sched/syscalls.c).
constexpr std::chrono::microseconds min_slice{100}, max_slice{100'000};

bool get_attr(sched_attr_v1& a) {
  std::memset(&a, 0, sizeof a);
  return syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) == 0;
}

}  // namespace

slice_request request_thread_slice(std::chrono::microseconds slice) {
  sched_attr_v1 cur{};
  if (!get_attr(cur))
    return {slice_request::result::failed, fmt::format("sched_getattr: {}", std::strerror(errno))};
  if (cur.sched_policy != policy_other)
    return {slice_request::result::unsupported,
            fmt::format("the thread's scheduling policy is {}, not SCHED_OTHER", cur.sched_policy)};
  sched_attr_v1 a{};
  a.size = sizeof a;
  a.sched_policy = policy_other;
  a.sched_nice = cur.sched_nice;
  a.sched_runtime = static_cast<std::uint64_t>(slice.count()) * 1000;
  if (syscall(SYS_sched_setattr, 0, &a, 0) != 0) {
    // Some kernels refuse the flag combination; the result is the same
    // as a kernel without custom slices.
    const int err = errno;
    return {err == EINVAL || err == E2BIG ? slice_request::result::unsupported
                                          : slice_request::result::failed,
            fmt::format("sched_setattr: {}", std::strerror(err))};
  }
  // Kernels before 6.12 accept sched_runtime for SCHED_OTHER and ignore it:
  // only reading the slice back tells whether it took.
  const auto want = std::clamp(slice, min_slice, max_slice);
  const auto now = thread_slice();
  if (!now || *now != want)
    return {slice_request::result::unsupported,
            fmt::format("the kernel kept a slice of {} us (custom slices need Linux 6.12 or newer)",
                        now ? now->count() : 0)};
  return {slice_request::result::applied, ""};
}

std::optional<std::chrono::microseconds> thread_slice() {
  sched_attr_v1 a{};
  // Linux >= 6.12 reports every fair thread's slice (its default too);
  // older kernels report 0.
  if (!get_attr(a) || a.sched_policy != policy_other || a.sched_runtime == 0) return std::nullopt;
  return std::chrono::microseconds(a.sched_runtime / 1000);
}

}  // namespace kopt
