// Timing statistics: type-7 quantiles (numpy's default), sample standard
// deviation, the stopping rule's verdicts and the bootstrap ratio of medians
// on clearly different and on identical distributions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/stats.hpp"

using namespace kopt::harness;

namespace {

std::vector<double> normal_samples(double mean, double sd, std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(mean, sd);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST(Summarize, Empty) {
  const auto t = summarize({});
  EXPECT_EQ(t.samples, 0u);
  EXPECT_EQ(t.median_ns, 0.0);
  EXPECT_EQ(t.rsd(), 0.0);
}

TEST(Summarize, SingleSample) {
  const auto t = summarize({42.0});
  EXPECT_EQ(t.samples, 1u);
  EXPECT_EQ(t.median_ns, 42.0);
  EXPECT_EQ(t.min_ns, 42.0);
  EXPECT_EQ(t.max_ns, 42.0);
  EXPECT_EQ(t.q1_ns, 42.0);
  EXPECT_EQ(t.q3_ns, 42.0);
  EXPECT_EQ(t.mean_ns, 42.0);
  EXPECT_EQ(t.stdev_ns, 0.0);
}

TEST(Summarize, EvenCountUnsortedInput) {
  // numpy: percentile([1,2,3,4], [25,50,75]) = [1.75, 2.5, 3.25]; std(ddof=1) = sqrt(5/3)
  const auto t = summarize({4, 1, 3, 2});
  EXPECT_EQ(t.samples, 4u);
  EXPECT_DOUBLE_EQ(t.median_ns, 2.5);
  EXPECT_DOUBLE_EQ(t.q1_ns, 1.75);
  EXPECT_DOUBLE_EQ(t.q3_ns, 3.25);
  EXPECT_DOUBLE_EQ(t.min_ns, 1.0);
  EXPECT_DOUBLE_EQ(t.max_ns, 4.0);
  EXPECT_DOUBLE_EQ(t.mean_ns, 2.5);
  EXPECT_DOUBLE_EQ(t.stdev_ns, std::sqrt(5.0 / 3.0));
  EXPECT_DOUBLE_EQ(t.rsd(), std::sqrt(5.0 / 3.0) / 2.5);
}

TEST(Summarize, OddCountAndOutlier) {
  // numpy: percentile([1,2,3,4,100], [25,50,75]) = [2, 3, 4]
  const auto t = summarize({100, 3, 1, 4, 2});
  EXPECT_DOUBLE_EQ(t.median_ns, 3.0);
  EXPECT_DOUBLE_EQ(t.q1_ns, 2.0);
  EXPECT_DOUBLE_EQ(t.q3_ns, 4.0);
  EXPECT_DOUBLE_EQ(t.mean_ns, 22.0);
  EXPECT_DOUBLE_EQ(t.max_ns, 100.0);
}

TEST(Summarize, TenValuesInterpolate) {
  // numpy: percentile(10..100 step 10, [25, 50, 75]) = [32.5, 55, 77.5]
  std::vector<double> v;
  for (int i = 10; i >= 1; --i) v.push_back(10.0 * i);
  const auto t = summarize(v);
  EXPECT_DOUBLE_EQ(t.q1_ns, 32.5);
  EXPECT_DOUBLE_EQ(t.median_ns, 55.0);
  EXPECT_DOUBLE_EQ(t.q3_ns, 77.5);
  // sample stdev of 10..100 = sqrt(sum((x-55)^2)/9) = sqrt(8250/9)
  EXPECT_NEAR(t.stdev_ns, std::sqrt(8250.0 / 9.0), 1e-9);
}

TEST(Summarize, ToJson) {
  const auto j = summarize({1, 2, 3}).to_json();
  EXPECT_EQ(j.at("samples"), 3);
  EXPECT_DOUBLE_EQ(j.at("median_ns").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j.at("stdev_ns").get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j.at("rsd").get<double>(), 0.5);
  for (const char* k : {"min_ns", "max_ns", "mean_ns", "q1_ns", "q3_ns"}) EXPECT_TRUE(j.contains(k)) << k;
}

TEST(StoppingRule, Verdicts) {
  const stopping_rule rule;  // 10 samples, 0.1 s min, 1 % rsd, 1 s max, 5000 max
  using v = stopping_rule::verdict;
  const std::vector<double> steady(20, 1000.0);
  std::vector<double> noisy;
  for (int i = 0; i < 20; ++i) noisy.push_back(i % 2 ? 1000.0 : 1500.0);

  EXPECT_EQ(rule.check(std::vector<double>(5, 1000.0), 0.5), v::go_on);  // too few samples
  EXPECT_EQ(rule.check(steady, 0.05), v::go_on);                          // too little time
  EXPECT_EQ(rule.check(steady, 0.2), v::converged);
  EXPECT_EQ(rule.check(noisy, 0.2), v::go_on);
  EXPECT_EQ(rule.check(noisy, 1.0), v::time_limit);
  EXPECT_EQ(rule.check(std::vector<double>(5, 1000.0), 2.0), v::time_limit);
  EXPECT_EQ(rule.check(std::vector<double>(5000, 1000.0), 0.0), v::sample_limit);
  std::vector<double> noisy_many;
  for (int i = 0; i < 5000; ++i) noisy_many.push_back(i % 2 ? 1.0 : 2.0);
  EXPECT_EQ(rule.check(noisy_many, 0.5), v::sample_limit);
  // All zeros (a broken timer) never counts as converged.
  EXPECT_EQ(rule.check(std::vector<double>(20, 0.0), 0.5), v::go_on);
}

TEST(StoppingRule, RsdThresholdIsRespected) {
  stopping_rule rule;
  rule.max_rsd = 0.05;
  // 1000 / 1060 alternating: sd ~ 30.8, mean 1030 -> rsd ~ 0.03
  std::vector<double> s;
  for (int i = 0; i < 20; ++i) s.push_back(i % 2 ? 1000.0 : 1060.0);
  EXPECT_EQ(rule.check(s, 0.2), stopping_rule::verdict::converged);
  rule.max_rsd = 0.02;
  EXPECT_EQ(rule.check(s, 0.2), stopping_rule::verdict::go_on);
}

TEST(StoppingRule, NamesAndJson) {
  EXPECT_STREQ(stopping_rule::name(stopping_rule::verdict::converged), "converged");
  EXPECT_STREQ(stopping_rule::name(stopping_rule::verdict::time_limit), "time_limit");
  EXPECT_STREQ(stopping_rule::name(stopping_rule::verdict::sample_limit), "sample_limit");
  EXPECT_STREQ(stopping_rule::name(stopping_rule::verdict::go_on), "running");

  stopping_rule r;
  r.min_samples = 7;
  r.min_time_s = 0.3;
  r.max_rsd = 0.02;
  r.max_time_s = 4.5;
  r.max_samples = 99;
  const auto back = stopping_rule::from_json(r.to_json());
  EXPECT_EQ(back.min_samples, 7u);
  EXPECT_DOUBLE_EQ(back.min_time_s, 0.3);
  EXPECT_DOUBLE_EQ(back.max_rsd, 0.02);
  EXPECT_DOUBLE_EQ(back.max_time_s, 4.5);
  EXPECT_EQ(back.max_samples, 99u);
  // Missing keys keep the defaults.
  const auto partial = stopping_rule::from_json({{"max_rsd", 0.5}});
  EXPECT_DOUBLE_EQ(partial.max_rsd, 0.5);
  EXPECT_EQ(partial.min_samples, stopping_rule{}.min_samples);
  EXPECT_DOUBLE_EQ(partial.max_time_s, stopping_rule{}.max_time_s);
}

TEST(Bootstrap, ClearlyFasterAndSlower) {
  const auto a = normal_samples(1000, 20, 200, 1);
  const auto b = normal_samples(500, 10, 200, 2);
  const auto r = bootstrap_median_ratio(a, b);
  EXPECT_NEAR(r.ratio, 0.5, 0.02);
  EXPECT_LE(r.low, r.ratio);
  EXPECT_GE(r.high, r.ratio);
  EXPECT_LT(r.high, 1.0);
  EXPECT_TRUE(r.b_faster());
  EXPECT_FALSE(r.b_slower());

  const auto s = bootstrap_median_ratio(b, a);
  EXPECT_NEAR(s.ratio, 2.0, 0.08);
  EXPECT_TRUE(s.b_slower());
  EXPECT_FALSE(s.b_faster());
}

TEST(Bootstrap, IdenticalDistributionsAreATie) {
  const auto a = normal_samples(1000, 30, 300, 3);
  const auto same = bootstrap_median_ratio(a, a);
  EXPECT_DOUBLE_EQ(same.ratio, 1.0);
  EXPECT_LE(same.low, 1.0);
  EXPECT_GE(same.high, 1.0);
  EXPECT_FALSE(same.b_faster());
  EXPECT_FALSE(same.b_slower());

  // Two independent draws from one distribution: also a tie.
  const auto b = normal_samples(1000, 30, 300, 4);
  const auto r = bootstrap_median_ratio(a, b);
  EXPECT_NEAR(r.ratio, 1.0, 0.02);
  EXPECT_LE(r.low, 1.0);
  EXPECT_GE(r.high, 1.0);
  EXPECT_FALSE(r.b_faster());
  EXPECT_FALSE(r.b_slower());
  EXPECT_LT(r.high - r.low, 0.05);  // narrow: 300 samples at 3 % noise
}

TEST(Bootstrap, DeterministicForASeed) {
  const auto a = normal_samples(1000, 50, 50, 5);
  const auto b = normal_samples(990, 50, 50, 6);
  const auto r1 = bootstrap_median_ratio(a, b, 500, 77);
  const auto r2 = bootstrap_median_ratio(a, b, 500, 77);
  EXPECT_EQ(r1.low, r2.low);
  EXPECT_EQ(r1.high, r2.high);
  EXPECT_EQ(r1.ratio, r2.ratio);
}

TEST(Bootstrap, WiderConfidenceGivesWiderInterval) {
  const auto a = normal_samples(1000, 50, 60, 7);
  const auto b = normal_samples(1000, 50, 60, 8);
  const auto r90 = bootstrap_median_ratio(a, b, 2000, 1, 0.90);
  const auto r99 = bootstrap_median_ratio(a, b, 2000, 1, 0.99);
  EXPECT_LE(r99.low, r90.low);
  EXPECT_GE(r99.high, r90.high);
  EXPECT_LT(r99.low, r99.high);
}

TEST(Bootstrap, EmptyInputIsNeutral) {
  const auto r = bootstrap_median_ratio({}, {1.0, 2.0});
  EXPECT_EQ(r.ratio, 1.0);
  EXPECT_FALSE(r.b_faster());
  EXPECT_FALSE(r.b_slower());
}
