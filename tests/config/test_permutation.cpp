// The `permutation` generator's values (config/permutation.hpp): distinct within each row, and
// with `disjoint` distinct across the whole tensor; the per-row form must keep producing the
// same values for a seed (stored results compare input sets across versions).
#include <gtest/gtest.h>

#include <set>

#include "config/permutation.hpp"

using kopt::config::permutation_values;

TEST(Permutation, RowsHoldDistinctValuesInRange) {
  const auto v = permutation_values(/*n=*/40, /*elements=*/6 * 10, /*row=*/10, false, 7);
  ASSERT_EQ(v.size(), 60u);
  for (int r = 0; r < 6; ++r) {
    std::set<std::int64_t> row(v.begin() + 10 * r, v.begin() + 10 * (r + 1));
    EXPECT_EQ(row.size(), 10u) << "row " << r;
    EXPECT_GE(*row.begin(), 0);
    EXPECT_LT(*row.rbegin(), 40);
  }
}

TEST(Permutation, PerRowRowsMayShareValuesDisjointNeverDoes) {
  // 8 rows of 16 out of [0, 160): per-row draws share values almost surely, disjoint ones never.
  const auto shared = permutation_values(160, 8 * 16, 16, false, 11);
  EXPECT_LT(std::set<std::int64_t>(shared.begin(), shared.end()).size(), shared.size());
  const auto disjoint = permutation_values(160, 8 * 16, 16, true, 11);
  ASSERT_EQ(disjoint.size(), 128u);
  const std::set<std::int64_t> all(disjoint.begin(), disjoint.end());
  EXPECT_EQ(all.size(), 128u);
  EXPECT_GE(*all.begin(), 0);
  EXPECT_LT(*all.rbegin(), 160);
}

TEST(Permutation, SeededAndReproducible) {
  EXPECT_EQ(permutation_values(50, 30, 10, false, 3), permutation_values(50, 30, 10, false, 3));
  EXPECT_NE(permutation_values(50, 30, 10, false, 3), permutation_values(50, 30, 10, false, 4));
  EXPECT_EQ(permutation_values(50, 30, 10, true, 3), permutation_values(50, 30, 10, true, 3));
}
