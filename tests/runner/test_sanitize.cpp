// The compute-sanitizer wrapper without a GPU: its log parser (memcheck's
// "ERROR SUMMARY", racecheck's hazard summary), the lookup of the tool, and
// a run on a machine without it, which is "skipped" with the reason, never
// "ok".
#include <gtest/gtest.h>

#include <cstdlib>

#include "runner/sanitize.hpp"

using namespace kopt::runner;

TEST(Sanitize, ParsesMemcheckSummaries) {
  const std::string clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
  const auto c = parse_sanitizer_log(clean);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->errors, 0);
  const std::string bad =
      "========= COMPUTE-SANITIZER\n"
      "========= Invalid __global__ write of size 4 bytes\n"
      "=========     at k+0x90\n"
      "========= ERROR SUMMARY: 2 errors\n";
  const auto b = parse_sanitizer_log(bad);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->errors, 2);
  EXPECT_NE(b->first_reports.find("Invalid __global__ write"), std::string::npos)
      << b->first_reports;
  EXPECT_EQ(b->first_reports.find("SUMMARY"), std::string::npos);
}

TEST(Sanitize, ParsesRacecheckSummaries) {
  const std::string race =
      "========= COMPUTE-SANITIZER\n"
      "========= Error: Race reported between Write access at k+0x40\n"
      "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n";
  const auto r = parse_sanitizer_log(race);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->errors, 1);
  EXPECT_FALSE(parse_sanitizer_log("no summary here").has_value());
}

TEST(Sanitize, MissingToolIsSkippedWithItsReason) {
  ::setenv("KOPT_COMPUTE_SANITIZER", "/nonexistent/compute-sanitizer", 1);
  EXPECT_FALSE(find_compute_sanitizer().has_value());
  const auto rep = sanitize(worker_options{}, nlohmann::json::object());
  EXPECT_EQ(rep.status, "skipped");
  EXPECT_FALSE(rep.rejected());
  EXPECT_NE(rep.reason.find("compute-sanitizer not found"), std::string::npos) << rep.reason;
  EXPECT_EQ(rep.to_json().at("status"), "skipped");
  ::unsetenv("KOPT_COMPUTE_SANITIZER");
}
