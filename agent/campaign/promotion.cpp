#include "campaign/promotion.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/stats.hpp"

namespace kopt::campaign {

using json = nlohmann::json;

std::string_view to_string(promotion_decision::verdict v) noexcept {
  switch (v) {
    case promotion_decision::verdict::promote: return "promote";
    case promotion_decision::verdict::tie: return "tie";
    case promotion_decision::verdict::worse: return "worse";
    case promotion_decision::verdict::incorrect: return "incorrect";
  }
  return "unknown";
}

json promotion_decision::to_json() const {
  json pw = json::array();
  for (const auto& w : per_workload)
    pw.push_back({{"workload", w.workload},
                  {"weight", w.weight},
                  {"ratio", w.ratio},
                  {"low", w.low},
                  {"high", w.high}});
  return {{"verdict", to_string(v)}, {"ratio", ratio}, {"low", low},      {"high", high},
          {"gain", gain},            {"reason", reason}, {"per_workload", pw}};
}

promotion_decision decide_promotion(const subject_result& incumbent,
                                    const subject_result& challenger,
                                    const std::map<std::string, double>& weights,
                                    const promotion_rule& rule) {
  promotion_decision d;
  double wsum = 0, lr = 0, ll = 0, lh = 0;
  for (const auto& [wl, weight] : weights) {
    auto c = challenger.workloads.find(wl);
    if (challenger.compile_status != "ok" || c == challenger.workloads.end() || !c->second.ok() ||
        !(c->second.median_ns > 0)) {
      d.v = promotion_decision::verdict::incorrect;
      d.reason = fmt::format("challenger not ok on {}: {}", wl,
                             c == challenger.workloads.end() ? std::string("not run")
                                                             : c->second.status);
      return d;
    }
    auto i = incumbent.workloads.find(wl);
    if (i == incumbent.workloads.end() || !i->second.ok() || !(i->second.median_ns > 0)) {
      // The incumbent failed where the challenger passed (e.g. a fresh seed
      // exposed it): the challenger wins that workload outright.
      d.per_workload.push_back({wl, weight, 0.0, 0.0, 0.0});
      continue;
    }
    workload_ratio r{wl, weight, c->second.median_ns / i->second.median_ns, 0, 0};
    const auto& a = i->second.samples_ns;
    const auto& b = c->second.samples_ns;
    if (a.size() >= 2 && b.size() >= 2) {
      const auto ci = harness::bootstrap_median_ratio(a, b, rule.bootstrap_iterations, rule.seed,
                                                      rule.confidence);
      r.ratio = ci.ratio;
      r.low = ci.low;
      r.high = ci.high;
    } else {
      // No samples: nothing is known about the noise, so only the point
      // estimate; treat it as exact (the fake evaluator always has samples).
      r.low = r.high = r.ratio;
    }
    d.per_workload.push_back(r);
    wsum += weight;
    lr += weight * std::log(r.ratio);
    ll += weight * std::log(r.low);
    lh += weight * std::log(r.high);
  }
  if (wsum > 0) {
    d.ratio = std::exp(lr / wsum);
    d.low = std::exp(ll / wsum);
    d.high = std::exp(lh / wsum);
  }
  for (const auto& r : d.per_workload)
    if (r.ratio > 0 && r.low > 1.0 + rule.max_regression) {
      d.v = promotion_decision::verdict::worse;
      d.reason = fmt::format("significantly slower on {} ({:.3f}x the incumbent's time, {:.3f}..{:.3f})",
                             r.workload, r.ratio, r.low, r.high);
      return d;
    }
  if (d.high < 1.0 - rule.min_gain) {
    d.v = promotion_decision::verdict::promote;
    d.gain = 1.0 / d.ratio - 1.0;
    d.reason = fmt::format("faster beyond noise: time ratio {:.4f} ({:.4f}..{:.4f})", d.ratio, d.low,
                           d.high);
  } else if (d.low > 1.0) {
    d.v = promotion_decision::verdict::worse;
    d.reason = fmt::format("slower: time ratio {:.4f} ({:.4f}..{:.4f})", d.ratio, d.low, d.high);
  } else {
    d.v = promotion_decision::verdict::tie;
    d.reason = fmt::format("inside the noise: time ratio {:.4f} ({:.4f}..{:.4f})", d.ratio, d.low,
                           d.high);
  }
  return d;
}

double weighted_geomean_ratio(const std::map<std::string, workload_result>& a,
                              const std::map<std::string, workload_result>& b,
                              const std::map<std::string, double>& weights) {
  double wsum = 0, l = 0;
  for (const auto& [wl, w] : weights) {
    auto x = a.find(wl);
    auto y = b.find(wl);
    if (x == a.end() || y == b.end() || !x->second.ok() || !y->second.ok() ||
        !(x->second.median_ns > 0) || !(y->second.median_ns > 0))
      continue;
    wsum += w;
    l += w * std::log(y->second.median_ns / x->second.median_ns);
  }
  return wsum > 0 ? std::exp(l / wsum) : 0.0;
}

double weighted_sol(const std::map<std::string, workload_result>& r,
                    const std::map<std::string, double>& weights) {
  double wsum = 0, s = 0;
  for (const auto& [wl, w] : weights) {
    wsum += w;
    auto it = r.find(wl);
    if (it != r.end() && it->second.ok() && it->second.sol_fraction) s += w * *it->second.sol_fraction;
  }
  return wsum > 0 ? s / wsum : 0.0;
}

double weighted_geomean_time(const std::map<std::string, workload_result>& r,
                             const std::map<std::string, double>& weights) {
  double wsum = 0, l = 0;
  for (const auto& [wl, w] : weights) {
    auto it = r.find(wl);
    if (it == r.end() || !it->second.ok() || !(it->second.median_ns > 0)) return 0.0;
    wsum += w;
    l += w * std::log(it->second.median_ns);
  }
  return wsum > 0 ? std::exp(l / wsum) : 0.0;
}

}  // namespace kopt::campaign
