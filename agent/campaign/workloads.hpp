// Representative workloads for screening. Timing every candidate on every
// production shape is what makes campaigns slow; most candidates lose
// everywhere, so they are first timed on a few workloads that stand for the
// rest: one per size band (small / launch-bound, medium, large, by a size
// proxy: the roofline bytes, else FLOPs), the most important of each band,
// plus any workload that carries more than a quarter of the weighted time
// (weight x time, time from measurements when known, else the size proxy),
// since losing there loses the campaign. Survivors get the full sweep.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/operator.hpp"

namespace kopt::campaign {

struct representative_pick {
  std::string workload;
  std::string reason;  // band:small, band:medium, band:large, heavy
  double weight = 0;
  double size = 0;            // size proxy
  double weighted_share = 0;  // share of weighted time
};

struct representative_set {
  std::vector<std::string> workloads;  // in config order, unique
  std::vector<representative_pick> picks;
  nlohmann::json to_json() const;
};

// Size proxy of a workload: roofline bytes, else FLOPs, else 1.
double size_proxy(const config::operator_config& op, const config::workload& w);

// The ids of the operator's public workloads (private_ones = false), or of
// its private ones (workloads[].private: never in prompts, never screened,
// measured only at verify and reported separately), in config order.
std::vector<std::string> workload_ids(const config::operator_config& op, bool private_ones);

// Private workloads are never among the representatives.
// `times_ns` (workload -> measured median) replaces the size proxy as the
// time estimate of the heavy rule when given for every workload.
representative_set representative_workloads(
    const config::operator_config& op, const std::map<std::string, double>& times_ns = {},
    double heavy_share = 0.25);

}  // namespace kopt::campaign
