// Speed of light per workload (docs/measurement.md):
//   T_SOL = max(FLOPs / peak FLOP/s of the unit the dtype uses,
//               bytes / peak DRAM bandwidth)
// with FLOPs and bytes from the operator config (bytes default: every input
// read once, every output written once, in-place inputs both) and peaks from
// configs/hardware/gpus.json or a calibration. A measured time below T_SOL
// is physically impossible: the caller must treat it as an integrity or
// measurement failure, never as a win.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "config/operator.hpp"

namespace kopt::harness {

struct gpu_peaks {
  std::string name;          // table key, e.g. H200
  double dram_bytes_per_s = 0;
  std::map<std::string, double> flops_per_s;  // by unit: fp32, bf16_tensor, ...
  std::string source;        // "datasheet" or "calibrated"
  nlohmann::json to_json() const;
};

// Finds the table entry whose `match` strings occur in the device name.
std::optional<gpu_peaks> find_peaks(const nlohmann::json& table, const std::string& device_name);
nlohmann::json load_peak_table(const std::filesystem::path& file);

struct roofline_counts {
  double flops = 0;
  double bytes = 0;
};

// Throws kopt::error when an expression fails for this workload.
roofline_counts roofline_for(const config::operator_config& op, const config::workload& w);

struct sol_result {
  double t_sol_ns = 0;
  double t_compute_ns = 0, t_memory_ns = 0;
  std::string bound;        // "memory" or "compute"
  double fraction = 0;      // T_SOL / T_measured
  bool impossible = false;  // fraction > 1 (beyond a small tolerance)
  nlohmann::json to_json() const;
};

// `tolerance` allows for clock and timer granularity (default 2 %).
sol_result speed_of_light(const roofline_counts& c, const std::string& flop_unit, const gpu_peaks& peaks,
                          double measured_ns, double tolerance = 0.02);

// Attainable SOL (issue 17): max(T_SOL, launch floor) / T_measured, the
// fraction of what a single launch allows; the physical fraction when no
// floor is known (floor <= 0). The one formula for eval, bench, campaigns,
// prompts and reports.
inline double attainable_sol_fraction(double t_sol_ns, double launch_floor_ns,
                                      double measured_ns) noexcept {
  if (!(measured_ns > 0)) return 0.0;
  return (launch_floor_ns > t_sol_ns ? launch_floor_ns : t_sol_ns) / measured_ns;
}

// Launch-bound: with a measured launch floor, more than half of the time is
// the floor (median < 2 x floor); without one, under 10 us, where launch and
// drain dominate on current GPUs. The one rule for evaluation summaries and
// the diagnosis (so the prompts, knowledge retrieval and reports agree).
inline constexpr double launch_bound_floor_factor = 2.0;
inline constexpr double launch_bound_without_floor_ns = 10000.0;

inline double launch_bound_threshold_ns(double launch_floor_ns) noexcept {
  return launch_floor_ns > 0 ? launch_bound_floor_factor * launch_floor_ns
                             : launch_bound_without_floor_ns;
}

inline bool is_launch_bound(double median_ns, double launch_floor_ns) noexcept {
  return median_ns > 0 && median_ns < launch_bound_threshold_ns(launch_floor_ns);
}

}  // namespace kopt::harness
