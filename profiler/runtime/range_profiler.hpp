// Hardware counters of a launch plan through the CUPTI Range Profiler, in a
// pass of its own that is never timed (docs/measurement.md: counters change
// what they measure, so they come after timing, on a separate run).
//
// Two modes, as CUPTI offers them:
//  - kernel replay (auto ranges): one range per kernel; CUPTI saves and
//    restores device memory between its passes. Used for single-kernel plans.
//  - user replay (one user range around the whole plan): the caller restores
//    the plan's state before every pass (kopt restores in-place inputs,
//    poisons outputs and re-initializes workspaces), so multi-kernel plans are
//    measured as one unit, including kernels that overlap on streams.
// Activity tracing (the timing clock) is suspended meanwhile.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "counters/metrics.hpp"

namespace kopt::harness {

struct profiled_range {
  std::string name;
  std::map<std::string, double> values;
};

struct profile_result {
  std::string mode;  // "kernel_replay" | "user_replay"
  std::size_t passes = 0;
  std::size_t runs = 0;  // how often the plan ran (user replay: passes)
  double wall_ms = 0;    // host wall time of the whole profiling pass
  bool config_cached = false;
  std::vector<profiled_range> ranges;
  std::map<std::string, double> totals;  // summed over ranges for counters; single range: its values
  nlohmann::json to_json() const;
};

class range_profiler {
 public:
  // Initializes the CUPTI profiler on the current CUDA context of `device`.
  range_profiler(int device, std::filesystem::path cache_dir);
  ~range_profiler();
  range_profiler(const range_profiler&) = delete;
  range_profiler& operator=(const range_profiler&) = delete;

  const std::string& chip() const;
  const counters::metric_catalog& catalog() const;

  // prepare(): restores state (called before every run); run(): launches the
  // plan and waits for it. Throws kopt::error on CUPTI failures.
  profile_result profile(const std::vector<std::string>& metrics, bool kernel_replay, std::size_t kernels_per_run,
                         const std::function<void()>& prepare, const std::function<void()>& run);

 private:
  struct impl;
  std::unique_ptr<impl> p_;
};

}  // namespace kopt::harness
