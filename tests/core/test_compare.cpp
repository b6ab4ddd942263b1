// Element-wise comparison rule: an element fails only if its error exceeds
// both atol and rtol*|expected|; NaN/Inf where the reference is finite
// always fails (whatever matched_ratio allows); NaN/Inf in the reference
// must be reproduced; integers compare exactly; matched_ratio decides;
// the first failures carry their multi-dimensional index, also when the
// comparison is split over threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/compare.hpp"

using kopt::config::dtype;
using kopt::config::tolerance;
using namespace kopt::harness;

namespace {

tolerance tol(double atol, double rtol, double matched = 1.0) {
  tolerance t;
  t.atol = atol;
  t.rtol = rtol;
  t.matched_ratio = matched;
  return t;
}

compare_result cmp_f32(const std::vector<float>& actual, const std::vector<float>& expected, const tolerance& t,
                       std::vector<std::int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(expected.size())};
  return compare_outputs(actual.data(), expected.data(), expected.size(), dtype::float32, shape, t);
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST(Compare, IdenticalPasses) {
  const std::vector<float> v = {1, 2, 3, -4, 0};
  const auto r = cmp_f32(v, v, tol(0, 0));
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.elements, 5u);
  EXPECT_EQ(r.failed, 0u);
  EXPECT_EQ(r.matched_ratio, 1.0);
  EXPECT_EQ(r.max_abs_err, 0.0);
  EXPECT_TRUE(r.first_failures.empty());
}

TEST(Compare, FailsOnlyWhenBeyondBothAtolAndRtol) {
  const auto t = tol(0.1, 0.01);
  // |err| = 0.5 > atol, but rtol*|100| = 1: passes by the relative rule.
  EXPECT_TRUE(cmp_f32({100.5f}, {100.0f}, t).passed);
  // |err| = 0.05 < atol: passes by the absolute rule (rtol*|1| = 0.01 is exceeded).
  EXPECT_TRUE(cmp_f32({1.05f}, {1.0f}, t).passed);
  // Near zero only atol can save an element.
  EXPECT_TRUE(cmp_f32({0.09f}, {0.0f}, t).passed);
  EXPECT_FALSE(cmp_f32({0.2f}, {0.0f}, t).passed);
  // Beyond both.
  const auto r = cmp_f32({1.5f}, {1.0f}, t);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.failed, 1u);
  EXPECT_EQ(r.nonfinite_where_finite, 0u);
  EXPECT_DOUBLE_EQ(r.max_abs_err, 0.5);
  EXPECT_DOUBLE_EQ(r.max_rel_err, 0.5);
  // Large value, error beyond rtol*|e| and atol.
  EXPECT_FALSE(cmp_f32({102.0f}, {100.0f}, t).passed);
  // Sign of the error does not matter.
  EXPECT_FALSE(cmp_f32({0.5f}, {1.0f}, t).passed);
  EXPECT_TRUE(cmp_f32({-100.5f}, {-100.0f}, t).passed);
}

TEST(Compare, ErrorExactlyAtToleranceIsAccepted) {
  // Exactly representable: error 0.5, atol 0.5 -> not "exceeds".
  EXPECT_TRUE(cmp_f32({2.5f}, {2.0f}, tol(0.5, 0)).passed);
  EXPECT_FALSE(cmp_f32({2.5f}, {2.0f}, tol(0.25, 0)).passed);
  // rtol*|e| = 0.25 * 2 = 0.5 exactly.
  EXPECT_TRUE(cmp_f32({2.5f}, {2.0f}, tol(0, 0.25)).passed);
}

TEST(Compare, NonFiniteWhereReferenceFiniteAlwaysFails) {
  // matched_ratio 0 would accept any number of ordinary mismatches, but
  // never a NaN or Inf where the reference is finite.
  const auto loose = tol(1e30, 1e30, 0.0);
  for (float bad : {kNaN, kInf, -kInf}) {
    const auto r = cmp_f32({1.0f, bad, 3.0f}, {1.0f, 2.0f, 3.0f}, loose);
    EXPECT_FALSE(r.passed) << bad;
    EXPECT_EQ(r.failed, 1u) << bad;
    EXPECT_EQ(r.nonfinite_where_finite, 1u) << bad;
    ASSERT_EQ(r.first_failures.size(), 1u);
    EXPECT_EQ(r.first_failures[0].index, std::vector<std::int64_t>{1});
    EXPECT_EQ(r.first_failures[0].expected, 2.0);
    if (std::isnan(bad)) EXPECT_TRUE(std::isnan(r.first_failures[0].actual));
    else EXPECT_EQ(r.first_failures[0].actual, static_cast<double>(bad));
  }
}

TEST(Compare, NonFiniteReferenceMustBeReproduced) {
  const auto t = tol(0.1, 0.1);
  EXPECT_TRUE(cmp_f32({kNaN}, {kNaN}, t).passed);
  EXPECT_TRUE(cmp_f32({kInf}, {kInf}, t).passed);
  EXPECT_TRUE(cmp_f32({-kInf}, {-kInf}, t).passed);
  EXPECT_FALSE(cmp_f32({1.0f}, {kNaN}, t).passed);
  EXPECT_FALSE(cmp_f32({-kInf}, {kInf}, t).passed);
  EXPECT_FALSE(cmp_f32({1e30f}, {kInf}, t).passed);
  EXPECT_FALSE(cmp_f32({kNaN}, {kInf}, t).passed);
}

TEST(Compare, IntegersCompareExactly) {
  const std::vector<std::int32_t> e = {1, 2, 3, 4};
  std::vector<std::int32_t> a = e;
  a[2] = 4;  // off by one, well within any float tolerance
  const auto r = compare_outputs(a.data(), e.data(), 4, dtype::int32, {4}, tol(100, 100));
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.failed, 1u);
  EXPECT_DOUBLE_EQ(r.max_abs_err, 1.0);
  EXPECT_DOUBLE_EQ(r.max_rel_err, 1.0 / 3.0);
  ASSERT_EQ(r.first_failures.size(), 1u);
  EXPECT_EQ(r.first_failures[0].index, std::vector<std::int64_t>{2});
  EXPECT_EQ(r.first_failures[0].expected, 3.0);
  EXPECT_EQ(r.first_failures[0].actual, 4.0);
  EXPECT_TRUE(compare_outputs(e.data(), e.data(), 4, dtype::int32, {4}, tol(0, 0)).passed);
}

TEST(Compare, Int64BeyondDoublePrecisionIsDistinguished) {
  const std::int64_t big = std::int64_t{1} << 53;
  const std::vector<std::int64_t> e = {big, 7};
  const std::vector<std::int64_t> a = {big + 1, 7};  // equal as doubles
  const auto r = compare_outputs(a.data(), e.data(), 2, dtype::int64, {2}, tol(1e9, 1e9));
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.failed, 1u);
}

TEST(Compare, SmallIntegerAndBoolTypes) {
  const std::vector<std::uint8_t> e = {0, 255, 1};
  const std::vector<std::uint8_t> a = {0, 254, 1};
  EXPECT_FALSE(compare_outputs(a.data(), e.data(), 3, dtype::uint8, {3}, tol(10, 10)).passed);
  EXPECT_TRUE(compare_outputs(e.data(), e.data(), 3, dtype::int8, {3}, tol(0, 0)).passed);
  // bool: any non-zero byte is true, so 1 and 2 are the same value.
  const std::vector<std::uint8_t> be = {0, 1, 1};
  const std::vector<std::uint8_t> ba = {0, 2, 0};
  const auto r = compare_outputs(ba.data(), be.data(), 3, dtype::boolean, {3}, tol(0, 0));
  EXPECT_EQ(r.failed, 1u);
  ASSERT_EQ(r.first_failures.size(), 1u);
  EXPECT_EQ(r.first_failures[0].index, std::vector<std::int64_t>{2});
}

TEST(Compare, MatchedRatioDecides) {
  std::vector<float> e(10, 1.0f), a(10, 1.0f);
  a[3] = 5.0f;  // one of ten fails
  const auto r90 = cmp_f32(a, e, tol(0.01, 0.01, 0.9));
  EXPECT_DOUBLE_EQ(r90.matched_ratio, 0.9);
  EXPECT_TRUE(r90.passed);
  EXPECT_EQ(r90.failed, 1u);
  EXPECT_FALSE(cmp_f32(a, e, tol(0.01, 0.01, 0.95)).passed);
  EXPECT_FALSE(cmp_f32(a, e, tol(0.01, 0.01, 1.0)).passed);
  a[4] = 5.0f;
  EXPECT_FALSE(cmp_f32(a, e, tol(0.01, 0.01, 0.9)).passed);
  EXPECT_DOUBLE_EQ(cmp_f32(a, e, tol(0.01, 0.01, 0.8)).matched_ratio, 0.8);
  EXPECT_TRUE(cmp_f32(a, e, tol(0.01, 0.01, 0.8)).passed);
}

TEST(Compare, FirstFailuresHaveMultiIndexAndAreBounded) {
  // shape (2, 3, 4): flat 17 = (1, 1, 1), flat 23 = (1, 2, 3), flat 4 = (0, 1, 0)
  std::vector<float> e(24), a(24);
  for (std::size_t i = 0; i < 24; ++i) e[i] = a[i] = static_cast<float>(i);
  a[4] = 100.0f;
  a[17] = -1.0f;
  a[23] = 0.0f;
  const auto r = cmp_f32(a, e, tol(0.5, 0), {2, 3, 4});
  EXPECT_EQ(r.failed, 3u);
  ASSERT_EQ(r.first_failures.size(), 3u);
  EXPECT_EQ(r.first_failures[0].index, (std::vector<std::int64_t>{0, 1, 0}));
  EXPECT_EQ(r.first_failures[0].expected, 4.0);
  EXPECT_EQ(r.first_failures[0].actual, 100.0);
  EXPECT_EQ(r.first_failures[1].index, (std::vector<std::int64_t>{1, 1, 1}));
  EXPECT_EQ(r.first_failures[2].index, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_DOUBLE_EQ(r.max_abs_err, 96.0);
  EXPECT_DOUBLE_EQ(r.max_rel_err, 24.0);  // 96 / 4

  // Only max_reported failures are kept; the count stays exact.
  std::vector<float> all_bad(24, -1000.0f);
  const auto r2 = compare_outputs(all_bad.data(), e.data(), 24, dtype::float32, {2, 3, 4}, tol(0.5, 0), 2);
  EXPECT_EQ(r2.failed, 24u);
  ASSERT_EQ(r2.first_failures.size(), 2u);
  EXPECT_EQ(r2.first_failures[0].index, (std::vector<std::int64_t>{0, 0, 0}));
  EXPECT_EQ(r2.first_failures[1].index, (std::vector<std::int64_t>{0, 0, 1}));
  EXPECT_EQ(r2.matched_ratio, 0.0);
}

TEST(Compare, EmptyOutputPasses) {
  const auto r = compare_outputs(nullptr, nullptr, 0, dtype::float32, {0}, tol(0, 0));
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.matched_ratio, 1.0);
  EXPECT_EQ(r.failed, 0u);
}

TEST(Compare, Bf16ElementsDecodedBeforeComparing) {
  // 1.0 vs 1.0078125 (next bf16 up): error 2^-7.
  const std::vector<std::uint16_t> e = {0x3F80, 0x3F80};
  const std::vector<std::uint16_t> a = {0x3F80, 0x3F81};
  EXPECT_TRUE(compare_outputs(a.data(), e.data(), 2, dtype::bfloat16, {2}, tol(0.01, 0)).passed);
  const auto r = compare_outputs(a.data(), e.data(), 2, dtype::bfloat16, {2}, tol(0.001, 0.001));
  EXPECT_FALSE(r.passed);
  EXPECT_DOUBLE_EQ(r.max_abs_err, 0.0078125);
  // bf16 NaN where the reference is finite.
  const std::vector<std::uint16_t> n = {0x3F80, 0x7FC0};
  const auto rn = compare_outputs(n.data(), e.data(), 2, dtype::bfloat16, {2}, tol(1, 1, 0));
  EXPECT_FALSE(rn.passed);
  EXPECT_EQ(rn.nonfinite_where_finite, 1u);
}

TEST(Compare, Fp8AndF16) {
  const std::vector<std::uint8_t> e = {0x7E, 0x38};  // 448, 1
  const std::vector<std::uint8_t> a = {0x7D, 0x38};  // 416, 1
  const auto r = compare_outputs(a.data(), e.data(), 2, dtype::float8_e4m3fn, {2}, tol(1, 0.05));
  EXPECT_FALSE(r.passed);  // 32 > 1 and 32 > 22.4
  EXPECT_DOUBLE_EQ(r.max_abs_err, 32.0);
  EXPECT_TRUE(compare_outputs(a.data(), e.data(), 2, dtype::float8_e4m3fn, {2}, tol(1, 0.1)).passed);
  const std::vector<std::uint8_t> inf = {0x7C, 0x3C};  // e5m2 inf where the reference is finite
  const std::vector<std::uint8_t> fin = {0x7B, 0x3C};
  EXPECT_FALSE(compare_outputs(inf.data(), fin.data(), 2, dtype::float8_e5m2, {2}, tol(1e9, 1e9, 0)).passed);
  const std::vector<std::uint16_t> he = {0x3C00}, ha = {0x3C01};
  EXPECT_TRUE(compare_outputs(ha.data(), he.data(), 1, dtype::float16, {1}, tol(1e-3, 0)).passed);
  EXPECT_FALSE(compare_outputs(ha.data(), he.data(), 1, dtype::float16, {1}, tol(1e-4, 1e-4)).passed);
}

TEST(Compare, LargeOutputSplitOverThreadsKeepsOrderAndCounts) {
  // Above the threading threshold (4 Mi elements): counts and the order of
  // the first failures must not depend on how the work is split.
  const std::size_t n = (std::size_t{1} << 22) + 12345;
  std::vector<float> e(n), a(n);
  for (std::size_t i = 0; i < n; ++i) e[i] = a[i] = static_cast<float>(i % 1000);
  const std::vector<std::size_t> bad = {7, 100, n / 2 + 3, n - 1, n / 3, 3 * n / 4};
  for (auto i : bad) a[i] = e[i] + 10.0f;
  a[n / 2 + 10] = kNaN;
  const auto r = compare_outputs(a.data(), e.data(), n, dtype::float32, {static_cast<std::int64_t>(n)},
                                 tol(1e-3, 1e-3), 100);
  EXPECT_EQ(r.elements, n);
  EXPECT_EQ(r.failed, bad.size() + 1);
  EXPECT_EQ(r.nonfinite_where_finite, 1u);
  EXPECT_FALSE(r.passed);
  ASSERT_EQ(r.first_failures.size(), bad.size() + 1);
  std::vector<std::size_t> want = bad;
  want.push_back(n / 2 + 10);
  std::sort(want.begin(), want.end());
  for (std::size_t k = 0; k < want.size(); ++k)
    EXPECT_EQ(r.first_failures[k].index, std::vector<std::int64_t>{static_cast<std::int64_t>(want[k])}) << k;
  EXPECT_DOUBLE_EQ(r.max_abs_err, 10.0);

  // With a limit of 3 the globally first three are reported.
  const auto r3 = compare_outputs(a.data(), e.data(), n, dtype::float32, {static_cast<std::int64_t>(n)},
                                  tol(1e-3, 1e-3), 3);
  ASSERT_EQ(r3.first_failures.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k)
    EXPECT_EQ(r3.first_failures[k].index, std::vector<std::int64_t>{static_cast<std::int64_t>(want[k])}) << k;
}

TEST(Compare, ToJsonSpellsNonFiniteValues) {
  const auto r = cmp_f32({kNaN, kInf}, {1.0f, 2.0f}, tol(0, 0, 0));
  const auto j = r.to_json();
  EXPECT_EQ(j.at("failed"), 2);
  EXPECT_EQ(j.at("nonfinite"), 2);
  EXPECT_EQ(j.at("passed"), false);
  ASSERT_EQ(j.at("first_failures").size(), 2u);
  EXPECT_EQ(j.at("first_failures")[0].at("actual"), "nan");
  EXPECT_EQ(j.at("first_failures")[1].at("actual"), "inf");
  EXPECT_EQ(j.at("first_failures")[0].at("expected"), 1.0);
  EXPECT_EQ(j.at("first_failures")[1].at("index"), nlohmann::json::array({1}));
  // Must serialize (no NaN numbers in JSON).
  EXPECT_NO_THROW((void)j.dump());
  EXPECT_EQ(nlohmann::json::parse(j.dump()), j);
}

// The per-dtype loop skips bit-identical elements and keeps the largest
// relative error as a fraction (no division per element): its maxima and
// counts must equal a plain element-by-element computation, on data large
// enough to be split over threads.
TEST(Compare, FastLoopMatchesAPlainComputation) {
  const std::size_t n = (std::size_t{1} << 22) + 12345;
  std::vector<float> e(n), a(n);
  std::uint32_t x = 12345;
  auto next = [&] { x = x * 1664525u + 1013904223u; return x; };
  for (std::size_t i = 0; i < n; ++i) {
    e[i] = static_cast<float>(static_cast<int>(next() % 20001) - 10000) / 1000.0f;
    const std::uint32_t r = next() % 8;
    a[i] = r < 5 ? e[i] : e[i] + static_cast<float>(static_cast<int>(next() % 201) - 100) * 1e-4f;
  }
  const tolerance t = tol(1e-3, 1e-3, 0.5);
  double max_abs = 0, max_rel = 0;
  std::size_t failed = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(e[i]));
    max_abs = std::max(max_abs, d);
    if (e[i] != 0.0f) max_rel = std::max(max_rel, d / std::fabs(static_cast<double>(e[i])));
    failed += d > t.atol && d > t.rtol * std::fabs(static_cast<double>(e[i])) ? 1 : 0;
  }
  const auto r = cmp_f32(a, e, t);
  EXPECT_EQ(r.failed, failed);
  EXPECT_DOUBLE_EQ(r.max_abs_err, max_abs);
  EXPECT_DOUBLE_EQ(r.max_rel_err, max_rel);
  EXPECT_GT(failed, 0u);
  EXPECT_LT(failed, n / 2);
}

// float64 keeps dividing for the relative error: the products the narrower
// types compare could overflow at magnitudes near 1e300.
TEST(Compare, Float64RelativeErrorAtExtremeMagnitudes) {
  const std::vector<double> e = {1e300, 2e300, 1e-300, 3.0};
  const std::vector<double> a = {1.5e300, 2e300, 1.2e-300, 3.0};
  const auto r = compare_outputs(a.data(), e.data(), e.size(), dtype::float64, {4}, tol(0, 1.0));
  EXPECT_DOUBLE_EQ(r.max_rel_err, 0.5);
  EXPECT_DOUBLE_EQ(r.max_abs_err, 0.5e300);
  EXPECT_EQ(r.failed, 0u);
  EXPECT_TRUE(r.passed);
}
