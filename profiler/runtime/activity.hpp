// Kernel timing from the CUPTI Activity API (CONCURRENT_KERNEL records:
// GPU-side start and end timestamps of every kernel, all streams). This is
// the primary clock of kopt's measurements: CUDA events, which include
// launch and queueing effects, are only a cross-check. CUPTI's activity
// state is process-wide, so this is a singleton.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace kopt::harness {

struct kernel_record {
  std::string name;
  std::uint64_t start_ns = 0, end_ns = 0;
  std::uint32_t stream = 0, correlation = 0;
};

class activity_timer {
 public:
  static activity_timer& instance();
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
};

}  // namespace kopt::harness
