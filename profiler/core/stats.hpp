// Timing statistics and the noise-based stopping rule of
// docs/measurement.md: stop once at least `min_samples` samples and
// `min_time_s` of measuring are in and the relative standard deviation is
// under `max_rsd`, or when a hard limit is hit; the reason is recorded
// because a result stopped by the time limit is noisier than one that
// converged. The median is the primary statistic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kopt::harness {

struct timing_summary {
  std::size_t samples = 0;
  double median_ns = 0, min_ns = 0, max_ns = 0, mean_ns = 0, stdev_ns = 0, q1_ns = 0, q3_ns = 0;
  double rsd() const noexcept { return mean_ns > 0 ? stdev_ns / mean_ns : 0.0; }
  nlohmann::json to_json() const;
};

timing_summary summarize(std::vector<double> samples_ns);

struct stopping_rule {
  std::size_t min_samples = 10;
  double min_time_s = 0.1;   // wall time spent measuring (flushes included)
  double max_rsd = 0.01;
  // Also converged when the standard error of the median (1.2533 sd/sqrt(n),
  // relative) is below this: launch-bound kernels have a sample RSD of a few
  // percent that no amount of sampling lowers, but the median we report is
  // then known to better than half a percent.
  double max_median_se = 0.005;
  double max_time_s = 1.0;   // hard limit per workload
  std::size_t max_samples = 5000;

  enum class verdict { go_on, converged, time_limit, sample_limit };
  verdict check(const std::vector<double>& samples_ns, double elapsed_s) const;
  static const char* name(verdict v) noexcept;
  nlohmann::json to_json() const;
  static stopping_rule from_json(const nlohmann::json& j);
};

// Bootstrap confidence interval of median(b)/median(a) (resampling both),
// used to decide whether two kernels differ beyond noise. Deterministic for
// a given seed.
struct ratio_ci {
  double ratio = 1.0, low = 1.0, high = 1.0;
  // a difference inside the interval is a tie
  bool b_faster() const noexcept { return high < 1.0; }
  bool b_slower() const noexcept { return low > 1.0; }
};
ratio_ci bootstrap_median_ratio(const std::vector<double>& a, const std::vector<double>& b,
                                std::size_t iterations = 2000, std::uint64_t seed = 12345,
                                double confidence = 0.95);

}  // namespace kopt::harness
