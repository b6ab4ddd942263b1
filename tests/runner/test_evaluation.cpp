// From a worker's evaluation_report to the summary kopt reports: per
// workload status, errors, timing, fraction of speed of light, speedups; the
// weighted SOL fraction (failed workloads count 0) and the weighted
// geometric-mean speedup; a faster-than-light result becomes
// rejected_integrity; launch-bound rows are flagged; the table shows it all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "config/operator.hpp"
#include "core/roofline.hpp"
#include "runner/evaluation.hpp"

namespace fs = std::filesystem;
using namespace kopt;
using namespace kopt::runner;
using json = nlohmann::json;

namespace {

const fs::path kSource(KOPT_SOURCE_DIR);

config::operator_config vector_add() {
  auto r = config::load_operator_file(kSource / "configs" / "examples" / "vector_add.json");
  if (!r.ok()) throw std::runtime_error("vector_add.json does not load");
  return *r.op;
}

harness::gpu_peaks h200() {
  const auto table = harness::load_peak_table(kSource / "configs" / "hardware" / "gpus.json");
  return *harness::find_peaks(table, "NVIDIA H200");
}

subject_result ok_result(double median_ns, double max_abs = 0.0, double rsd = 0.004) {
  subject_result r;
  r.status = kopt::protocol::outcome::ok;
  r.detail = {{"status", "ok"},
              {"timing", {{"median_ns", median_ns}, {"rsd", rsd}, {"q1_ns", median_ns * 0.99},
                          {"q3_ns", median_ns * 1.01}, {"samples", 123}, {"stop_reason", "converged"}}},
              {"correctness", json::array({{{"seed", 1}, {"passed", true},
                                            {"outputs", {{"out", {{"max_abs_err", max_abs}, {"max_rel_err", max_abs / 2}}}}}}})}};
  return r;
}

subject_result failed(const std::string& status, const std::string& message) {
  subject_result r;
  r.status = *kopt::protocol::parse_outcome(status);
  r.message = message;
  r.detail = {{"status", status}, {"message", message}};
  return r;
}

// SOL of vector_add on the H200: 12 bytes per element at 4.8 TB/s (memory
// bound; n FLOPs at 67 TFLOP/s are far below).
double t_sol_ns(double n) { return 12.0 * n / 4.8e12 * 1e9; }

// weights: n1000 0.1, n65536 0.3, n1m 0.4, n16m 0.2
evaluation_report base_report() {
  evaluation_report rep;
  rep.results["n1000"]["candidate"] = ok_result(5000, 1e-7);
  rep.results["n1000"]["baseline"] = ok_result(6000);
  rep.results["n1000"]["reference"] = ok_result(7000);
  rep.results["n65536"]["candidate"] = ok_result(20000, 2e-7);
  rep.results["n65536"]["baseline"] = ok_result(40000);
  rep.results["n65536"]["reference"] = ok_result(50000);
  rep.results["n1m"]["candidate"] = ok_result(100000);
  rep.results["n1m"]["baseline"] = ok_result(150000);
  rep.results["n1m"]["reference"] = ok_result(200000);
  rep.results["n16m"]["candidate"] = failed("incorrect", "output differs from the reference (seed 0)");
  rep.results["n16m"]["baseline"] = ok_result(4e6);
  rep.results["n16m"]["reference"] = ok_result(5e6);
  return rep;
}

const workload_row& row(const evaluation_summary& s, const std::string& w) {
  for (const auto& r : s.rows)
    if (r.workload == w) return r;
  throw std::runtime_error("no row " + w);
}

}  // namespace

TEST(Summarize, WeightedSolAndGeomeanSpeedup) {
  const auto op = vector_add();
  const auto s = summarize(op, base_report(), "candidate", h200());
  EXPECT_EQ(s.role, "candidate");
  ASSERT_EQ(s.rows.size(), 4u);
  EXPECT_EQ(s.ok, 3u);
  EXPECT_EQ(s.overall_status, kopt::protocol::outcome::incorrect);

  const auto& a = row(s, "n1000");
  EXPECT_EQ(a.status, kopt::protocol::outcome::ok);
  EXPECT_DOUBLE_EQ(a.weight, 0.1);
  EXPECT_DOUBLE_EQ(a.median_ns, 5000);
  EXPECT_DOUBLE_EQ(a.max_abs_err, 1e-7);
  EXPECT_DOUBLE_EQ(a.max_rel_err, 5e-8);
  EXPECT_EQ(a.samples, 123u);
  EXPECT_EQ(a.stop_reason, "converged");
  ASSERT_TRUE(a.sol_fraction.has_value());
  EXPECT_NEAR(*a.sol_fraction, t_sol_ns(1000) / 5000, 1e-12);
  ASSERT_TRUE(a.speedup_vs_baseline.has_value());
  EXPECT_DOUBLE_EQ(*a.speedup_vs_baseline, 1.2);
  ASSERT_TRUE(a.speedup_vs_reference.has_value());
  EXPECT_DOUBLE_EQ(*a.speedup_vs_reference, 1.4);
  EXPECT_EQ(a.sol.at("bound"), "memory");
  EXPECT_DOUBLE_EQ(a.sol.at("bytes").get<double>(), 12000.0);
  EXPECT_DOUBLE_EQ(a.sol.at("flops").get<double>(), 1000.0);

  EXPECT_NEAR(*row(s, "n65536").sol_fraction, t_sol_ns(65536) / 20000, 1e-12);
  EXPECT_DOUBLE_EQ(*row(s, "n65536").speedup_vs_baseline, 2.0);
  EXPECT_NEAR(*row(s, "n1m").sol_fraction, t_sol_ns(1048576) / 100000, 1e-12);
  EXPECT_DOUBLE_EQ(*row(s, "n1m").speedup_vs_baseline, 1.5);

  const auto& d = row(s, "n16m");
  EXPECT_EQ(d.status, kopt::protocol::outcome::incorrect);
  EXPECT_EQ(d.message, "output differs from the reference (seed 0)");
  EXPECT_FALSE(d.sol_fraction.has_value());
  EXPECT_FALSE(d.speedup_vs_baseline.has_value());

  // The failed workload counts 0 with its weight in the denominator.
  const double want_sol = (0.1 * t_sol_ns(1000) / 5000 + 0.3 * t_sol_ns(65536) / 20000 +
                           0.4 * t_sol_ns(1048576) / 100000 + 0.2 * 0.0) / 1.0;
  EXPECT_NEAR(s.weighted_sol_fraction, want_sol, 1e-12);
  // Geomean over the workloads where both ran, weighted.
  ASSERT_TRUE(s.weighted_speedup_vs_baseline.has_value());
  const double want_speedup = std::exp((0.1 * std::log(1.2) + 0.3 * std::log(2.0) + 0.4 * std::log(1.5)) / 0.8);
  EXPECT_NEAR(*s.weighted_speedup_vs_baseline, want_speedup, 1e-12);
  ASSERT_TRUE(s.weighted_speedup_vs_reference.has_value());
  const double want_ref = std::exp((0.1 * std::log(1.4) + 0.3 * std::log(2.5) + 0.4 * std::log(2.0)) / 0.8);
  EXPECT_NEAR(*s.weighted_speedup_vs_reference, want_ref, 1e-12);
}

TEST(Summarize, LaunchBoundFlag) {
  const auto s = summarize(vector_add(), base_report(), "candidate", h200());
  EXPECT_TRUE(row(s, "n1000").launch_bound);    // 5 us
  EXPECT_FALSE(row(s, "n65536").launch_bound);  // 20 us
  EXPECT_FALSE(row(s, "n1m").launch_bound);
  EXPECT_FALSE(row(s, "n16m").launch_bound);    // no timing
}

TEST(Summarize, FasterThanSpeedOfLightIsRejected) {
  auto rep = base_report();
  // n16m needs at least 41.9 us on an H200; 10 us is impossible.
  rep.results["n16m"]["candidate"] = ok_result(10000);
  const auto s = summarize(vector_add(), rep, "candidate", h200());
  const auto& d = row(s, "n16m");
  EXPECT_EQ(d.status, kopt::protocol::outcome::rejected_integrity);
  EXPECT_NE(d.message.find("faster than the speed of light"), std::string::npos) << d.message;
  ASSERT_TRUE(d.sol_fraction.has_value());
  EXPECT_NEAR(*d.sol_fraction, t_sol_ns(16777216) / 10000, 1e-9);
  EXPECT_EQ(d.sol.at("impossible"), true);
  EXPECT_FALSE(d.speedup_vs_baseline.has_value());
  EXPECT_EQ(s.ok, 3u);
  EXPECT_EQ(s.overall_status, kopt::protocol::outcome::rejected_integrity);
  // It does not count towards the SOL figure (a fraction of 4.2 would
  // otherwise dominate it) nor towards the speedup.
  const double want_sol = 0.1 * t_sol_ns(1000) / 5000 + 0.3 * t_sol_ns(65536) / 20000 +
                          0.4 * t_sol_ns(1048576) / 100000;
  EXPECT_NEAR(s.weighted_sol_fraction, want_sol, 1e-12);
  EXPECT_LT(s.weighted_sol_fraction, 1.0);

  // Just under SOL (within the timer tolerance) stays ok.
  rep.results["n16m"]["candidate"] = ok_result(t_sol_ns(16777216) / 1.01);
  const auto s2 = summarize(vector_add(), rep, "candidate", h200());
  EXPECT_EQ(row(s2, "n16m").status, kopt::protocol::outcome::ok);
  EXPECT_EQ(s2.overall_status, kopt::protocol::outcome::ok);
  EXPECT_EQ(s2.ok, 4u);
}

TEST(Summarize, WithoutPeaksNoSol) {
  const auto s = summarize(vector_add(), base_report(), "candidate", std::nullopt);
  EXPECT_FALSE(row(s, "n1000").sol_fraction.has_value());
  EXPECT_EQ(s.weighted_sol_fraction, 0.0);
  // Speedups do not need peaks.
  ASSERT_TRUE(s.weighted_speedup_vs_baseline.has_value());
  // Even a very fast time cannot be judged impossible.
  auto rep = base_report();
  rep.results["n16m"]["candidate"] = ok_result(10);
  EXPECT_EQ(row(summarize(vector_add(), rep, "candidate", std::nullopt), "n16m").status,
            kopt::protocol::outcome::ok);
}

TEST(Summarize, MissingResultsAreNotRun) {
  evaluation_report rep;
  rep.results["n1000"]["candidate"] = ok_result(5000);
  rep.results["n1m"]["baseline"] = ok_result(5000);  // another role only
  const auto s = summarize(vector_add(), rep, "candidate", h200());
  EXPECT_EQ(row(s, "n1000").status, kopt::protocol::outcome::ok);
  EXPECT_EQ(row(s, "n65536").status, kopt::protocol::outcome::not_run);
  EXPECT_EQ(row(s, "n1m").status, kopt::protocol::outcome::not_run);
  EXPECT_EQ(s.ok, 1u);
  // "not_run" rows count 0 in the weighted SOL.
  EXPECT_NEAR(s.weighted_sol_fraction, 0.1 * t_sol_ns(1000) / 5000, 1e-12);
  EXPECT_FALSE(s.weighted_speedup_vs_baseline.has_value());
  EXPECT_NE(s.overall_status, kopt::protocol::outcome::ok);
}

TEST(Summarize, RestrictedToRequestedWorkloads) {
  // `kopt eval --workloads n1000` must not count the others as failures.
  evaluation_report rep;
  rep.results["n1000"]["candidate"] = ok_result(5000);
  const auto s = summarize(vector_add(), rep, "candidate", h200(), {"n1000"});
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.overall_status, kopt::protocol::outcome::ok);
  EXPECT_EQ(s.ok, 1u);
  // The weighted fraction is over the requested workload alone.
  EXPECT_NEAR(s.weighted_sol_fraction, *row(s, "n1000").sol_fraction, 1e-12);
}

TEST(Summarize, BaselineSummaryHasNoSelfSpeedup) {
  const auto s = summarize(vector_add(), base_report(), "baseline", h200());
  EXPECT_EQ(s.ok, 4u);
  EXPECT_EQ(s.overall_status, kopt::protocol::outcome::ok);
  EXPECT_FALSE(s.weighted_speedup_vs_baseline.has_value());
  ASSERT_TRUE(s.weighted_speedup_vs_reference.has_value());
  EXPECT_FALSE(row(s, "n1000").speedup_vs_baseline.has_value());
}

TEST(Summarize, FailedBaselineIsLeftOutOfTheGeomean) {
  auto rep = base_report();
  rep.results["n65536"]["baseline"] = failed("timeout", "hang");
  const auto s = summarize(vector_add(), rep, "candidate", h200());
  EXPECT_FALSE(row(s, "n65536").speedup_vs_baseline.has_value());
  const double want = std::exp((0.1 * std::log(1.2) + 0.4 * std::log(1.5)) / 0.5);
  EXPECT_NEAR(*s.weighted_speedup_vs_baseline, want, 1e-12);
}

TEST(Summarize, ToJson) {
  const auto s = summarize(vector_add(), base_report(), "candidate", h200());
  const auto j = s.to_json();
  EXPECT_EQ(j.at("role"), "candidate");
  EXPECT_EQ(j.at("status"), "incorrect");
  EXPECT_EQ(j.at("workloads_ok"), 3);
  EXPECT_EQ(j.at("workloads"), 4);
  EXPECT_NEAR(j.at("weighted_sol_fraction").get<double>(), s.weighted_sol_fraction, 1e-15);
  ASSERT_EQ(j.at("rows").size(), 4u);
  bool saw_null = false;
  for (const auto& r : j.at("rows"))
    if (r.at("workload") == "n16m") saw_null = r.at("sol_fraction").is_null();
  EXPECT_TRUE(saw_null);
  EXPECT_EQ(json::parse(j.dump()), j);
}

TEST(RenderTable, ContainsTheRows) {
  auto rep = base_report();
  const auto s = summarize(vector_add(), rep, "candidate", h200());
  const auto t = render_table(s);
  EXPECT_NE(t.find("candidate:"), std::string::npos) << t;
  for (const char* w : {"n1000", "n65536", "n1m", "n16m"}) EXPECT_NE(t.find(w), std::string::npos) << w << "\n" << t;
  EXPECT_NE(t.find("incorrect"), std::string::npos) << t;
  EXPECT_NE(t.find("output differs from the reference"), std::string::npos) << t;
  EXPECT_NE(t.find("(launch-bound)"), std::string::npos) << t;
  EXPECT_NE(t.find("1.20x"), std::string::npos) << t;   // n1000 vs baseline
  EXPECT_NE(t.find("2.00x"), std::string::npos) << t;   // n65536
  EXPECT_NE(t.find("3 / 4 workloads ok"), std::string::npos) << t;
  EXPECT_NE(t.find("vs baseline (weighted geomean)"), std::string::npos) << t;
  // One line per workload, a header, the role and the totals, one message line.
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 1 + 1 + 4 + 1 + 1);

  rep.results["n16m"]["candidate"] = ok_result(10000);
  const auto t2 = render_table(summarize(vector_add(), rep, "candidate", h200()));
  EXPECT_NE(t2.find("rejected_integrity"), std::string::npos) << t2;
  EXPECT_NE(t2.find("faster than the speed of light"), std::string::npos) << t2;
}
