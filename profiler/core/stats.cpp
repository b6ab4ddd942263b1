#include "core/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace kopt::harness {
namespace {

// Linear interpolation between order statistics (type 7, as numpy does).
double quantile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return 0.0;
  const double pos = q * static_cast<double>(s.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, s.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return s[lo] + (s[hi] - s[lo]) * frac;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return quantile_sorted(v, 0.5);
}

}  // namespace

timing_summary summarize(std::vector<double> s) {
  timing_summary t;
  t.samples = s.size();
  if (s.empty()) return t;
  std::sort(s.begin(), s.end());
  t.min_ns = s.front();
  t.max_ns = s.back();
  t.median_ns = quantile_sorted(s, 0.5);
  t.q1_ns = quantile_sorted(s, 0.25);
  t.q3_ns = quantile_sorted(s, 0.75);
  t.mean_ns = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
  if (s.size() > 1) {
    double acc = 0.0;
    for (double v : s) acc += (v - t.mean_ns) * (v - t.mean_ns);
    t.stdev_ns = std::sqrt(acc / static_cast<double>(s.size() - 1));
  }
  return t;
}

nlohmann::json timing_summary::to_json() const {
  return {{"samples", samples}, {"median_ns", median_ns}, {"min_ns", min_ns}, {"max_ns", max_ns},
          {"mean_ns", mean_ns}, {"stdev_ns", stdev_ns},   {"q1_ns", q1_ns},   {"q3_ns", q3_ns},
          {"rsd", rsd()}};
}

stopping_rule::verdict stopping_rule::check(const std::vector<double>& s, double elapsed_s) const {
  if (s.size() >= max_samples) return verdict::sample_limit;
  if (elapsed_s >= max_time_s) return verdict::time_limit;
  if (s.size() < min_samples || elapsed_s < min_time_s) return verdict::go_on;
  // RSD of the whole set: robust enough once min_samples is reached, and the
  // median we report is insensitive to the odd outlier anyway.
  double mean = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
  double acc = 0.0;
  for (double v : s) acc += (v - mean) * (v - mean);
  const double sd = std::sqrt(acc / static_cast<double>(s.size() - 1));
  if (mean <= 0) return verdict::go_on;
  const double se_rel = 1.2533 * sd / std::sqrt(static_cast<double>(s.size())) / mean;
  return (sd / mean < max_rsd || se_rel < max_median_se) ? verdict::converged : verdict::go_on;
}

const char* stopping_rule::name(verdict v) noexcept {
  switch (v) {
    case verdict::go_on: return "running";
    case verdict::converged: return "converged";
    case verdict::time_limit: return "time_limit";
    case verdict::sample_limit: return "sample_limit";
  }
  return "?";
}

nlohmann::json stopping_rule::to_json() const {
  return {{"min_samples", min_samples}, {"min_time_s", min_time_s}, {"max_rsd", max_rsd},
          {"max_median_se", max_median_se},
          {"max_time_s", max_time_s},   {"max_samples", max_samples}};
}

stopping_rule stopping_rule::from_json(const nlohmann::json& j) {
  stopping_rule r;
  r.min_samples = j.value("min_samples", r.min_samples);
  r.min_time_s = j.value("min_time_s", r.min_time_s);
  r.max_rsd = j.value("max_rsd", r.max_rsd);
  r.max_median_se = j.value("max_median_se", r.max_median_se);
  r.max_time_s = j.value("max_time_s", r.max_time_s);
  r.max_samples = j.value("max_samples", r.max_samples);
  return r;
}

ratio_ci bootstrap_median_ratio(const std::vector<double>& a, const std::vector<double>& b,
                                std::size_t iterations, std::uint64_t seed, double confidence) {
  ratio_ci r;
  if (a.empty() || b.empty()) return r;
  r.ratio = median_of(b) / median_of(a);
  std::mt19937_64 rng(seed);
  std::vector<double> ratios;
  ratios.reserve(iterations);
  std::vector<double> ra(a.size()), rb(b.size());
  std::uniform_int_distribution<std::size_t> da(0, a.size() - 1), db(0, b.size() - 1);
  for (std::size_t it = 0; it < iterations; ++it) {
    for (auto& v : ra) v = a[da(rng)];
    for (auto& v : rb) v = b[db(rng)];
    ratios.push_back(median_of(rb) / median_of(ra));
  }
  std::sort(ratios.begin(), ratios.end());
  const double alpha = (1.0 - confidence) / 2.0;
  r.low = quantile_sorted(ratios, alpha);
  r.high = quantile_sorted(ratios, 1.0 - alpha);
  return r;
}

}  // namespace kopt::harness
