// Whether a challenger replaces the incumbent best. Both are measured in one
// request (stage "compare": same worker, same inputs, back to back per
// workload) with fresh input seeds, so the challenger's correctness is also
// re-checked on data it has not seen. Per workload the ratio
// median(challenger) / median(incumbent) gets a bootstrap confidence
// interval (harness::bootstrap_median_ratio); the campaign figure is the
// importance-weighted geometric mean of the ratios, and its interval the
// weighted geometric mean of the per-workload bounds (conservative: each
// bound is already a 95 % bound). Promotion needs: correct everywhere, the
// whole interval below 1 - min_gain (a win beyond noise), and no workload
// significantly slower by more than max_regression. Anything else inside
// the noise is a tie, and a tie keeps the incumbent.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "campaign/types.hpp"

namespace kopt::campaign {

struct promotion_rule {
  double min_gain = 0.0;         // required nominal gain beyond noise (0.02 = 2 %)
  // A workload significantly slower by more than this blocks promotion. 5 %:
  // the importance weights say what matters, so a few percent on one shape
  // must not veto a clear weighted win (the replay corpus on the H200: a
  // float4 kernel 10 % faster weighted, 3.9 % slower on the largest shape,
  // was refused at 1 %); a large regression on any shape still does.
  double max_regression = 0.05;
  double confidence = 0.95;
  std::size_t bootstrap_iterations = 2000;
  std::uint64_t seed = 12345;
};

struct workload_ratio {
  std::string workload;
  double weight = 0;
  double ratio = 1, low = 1, high = 1;  // challenger / incumbent time
};

struct promotion_decision {
  enum class verdict { promote, tie, worse, incorrect };
  verdict v = verdict::tie;
  double ratio = 1, low = 1, high = 1;  // weighted geomean, challenger / incumbent
  double gain = 0;                      // 1/ratio - 1 when promoted, else 0
  std::vector<workload_ratio> per_workload;
  std::string reason;
  bool promoted() const noexcept { return v == verdict::promote; }
  nlohmann::json to_json() const;
};
std::string_view to_string(promotion_decision::verdict v) noexcept;

// weights: workload -> importance.
promotion_decision decide_promotion(const subject_result& incumbent,
                                    const subject_result& challenger,
                                    const std::map<std::string, double>& weights,
                                    const promotion_rule& rule);

// exp(sum w log(b/a) / sum w) over workloads where both ran ok; 0 when none.
double weighted_geomean_ratio(const std::map<std::string, workload_result>& a,
                              const std::map<std::string, workload_result>& b,
                              const std::map<std::string, double>& weights);
// Weighted mean fraction of speed of light (failed or unknown count 0).
double weighted_sol(const std::map<std::string, workload_result>& r,
                    const std::map<std::string, double>& weights);
// Weighted geomean of medians (a size-free time score; lower is better);
// 0 when any weighted workload failed.
double weighted_geomean_time(const std::map<std::string, workload_result>& r,
                             const std::map<std::string, double>& weights);

}  // namespace kopt::campaign
