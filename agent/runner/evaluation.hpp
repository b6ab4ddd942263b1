// From a worker's evaluation_report to what kopt reports and stores per
// workload: status, errors, timing, fraction of speed of light and speedups,
// with the importance-weighted campaign figures (weighted mean fraction of
// speed of light, failed workloads counting as zero; weighted geometric-mean
// speedup over the workloads where both kernels ran). A result faster than
// speed of light is turned into rejected_integrity here, in one place.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/operator.hpp"
#include "core/diagnosis.hpp"
#include "core/roofline.hpp"
#include "runner/worker_client.hpp"

namespace kopt::runner {

struct workload_row {
  std::string workload;
  double weight = 0;
  protocol::outcome status = protocol::outcome::not_run;
  std::string message;
  double max_abs_err = 0, max_rel_err = 0;
  double median_ns = 0, rsd = 0, q1_ns = 0, q3_ns = 0;
  std::size_t samples = 0;
  std::string stop_reason;
  std::optional<double> sol_fraction;
  std::optional<double> speedup_vs_baseline;
  std::optional<double> speedup_vs_reference;
  bool launch_bound = false;
  nlohmann::json sol = nlohmann::json::object();
  // Speed of light against the worker's calibrated peaks (when it measured them).
  nlohmann::json sol_calibrated = nlohmann::json::object();
  nlohmann::json detail = nlohmann::json::object();
  nlohmann::json counters = nlohmann::json();   // the worker's counters pass, if any
  nlohmann::json diagnosis = nlohmann::json();  // harness::diagnose(), for ok rows
};

struct evaluation_summary {
  std::string role;
  std::vector<workload_row> rows;
  double weighted_sol_fraction = 0;              // failed workloads count 0
  std::optional<double> weighted_speedup_vs_baseline;
  std::optional<double> weighted_speedup_vs_reference;
  std::size_t ok = 0;
  // ok when every workload is ok, else the first failure's
  protocol::outcome overall_status = protocol::outcome::ok;
  nlohmann::json to_json() const;
};

// `workloads` restricts the summary (and its weighted totals) to those ids;
// empty means every workload of the operator.
evaluation_summary summarize(const config::operator_config& op, const evaluation_report& rep,
                             const std::string& role, const std::optional<harness::gpu_peaks>& peaks,
                             const std::vector<std::string>& workloads = {});

// Peaks measured by the worker at start (hello "calibration"), layered over
// the datasheet entry: bandwidth and bf16 tensor rate replaced where
// measured, source "calibrated". nullopt when nothing was measured.
std::optional<harness::gpu_peaks> calibrated_peaks(const std::optional<harness::gpu_peaks>& datasheet,
                                                   const nlohmann::json& calibration);

// A fixed-width table for terminals (one row per workload + totals).
std::string render_table(const evaluation_summary& s);

}  // namespace kopt::runner
