// Kernel timing from the CUPTI Activity API: GPU-side start and end
// timestamps of every kernel. This is the primary clock of kopt's
// measurements: CUDA events, which include launch and queueing effects, are
// only a cross-check. CUPTI's activity state is process-wide, so this is a
// singleton.
//
// Two record kinds, the clock of a measurement (docs/methodology.md, "The
// clock"; figures from the H200 in docs/benchmarks.md):
//  - concurrent_kernel (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, the default,
//    as the measurement standard asks): from the first block's start to the
//    last block's end, as Nsight Systems shows; about 1.1 us below Nsight
//    Compute's gpu__time_duration per launch.
//  - kernel (CUPTI_ACTIVITY_KIND_KERNEL): CUPTI serializes kernels and the
//    record includes the launch's front-end work; in kopt's sample loop about
//    0.8 us above gpu__time_duration, and noisier below 20 us.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kopt::harness {

struct kernel_record {
  std::string name;
  std::uint64_t start_ns = 0, end_ns = 0;
  std::uint32_t stream = 0, correlation = 0;
};

enum class activity_clock { kernel, concurrent_kernel };
const char* clock_name(activity_clock c) noexcept;
std::optional<activity_clock> parse_clock(std::string_view name) noexcept;

class activity_timer {
 public:
  static activity_timer& instance();
  // Which record kind times kernels; switching drops the records so far.
  void set_clock(activity_clock c);
  activity_clock clock() const noexcept { return clock_; }
  // Subscribes to kernel activity; throws kopt::error with CUPTI's message.
  void enable();
  // Forces CUPTI to hand over every completed record and returns them (and
  // forgets them). Call after the work has finished on the device.
  std::vector<kernel_record> collect();
  std::uint64_t dropped() const noexcept { return dropped_; }
  // Stops recording kernels (for the counters pass, whose replays are not
  // samples) and starts again; records collected meanwhile are dropped.
  void suspend();
  void resume();

  // CUPTI buffer callbacks (public for the C trampolines).
  void on_buffer(std::uint8_t* buffer, std::size_t valid);

 private:
  activity_timer() = default;
  std::mutex mu_;
  std::vector<kernel_record> records_;
  std::uint64_t dropped_ = 0;
  bool enabled_ = false;
  bool suspended_ = false;
  activity_clock clock_ = activity_clock::concurrent_kernel;
};

}  // namespace kopt::harness
