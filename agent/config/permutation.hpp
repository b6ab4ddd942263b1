// The values of a `permutation` input generator (docs/operator-config.md, "Generators"), kept
// apart from the CUDA upload in profiler/runtime/inputs.cpp so the rule can be tested without a
// GPU.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace kopt::config {

// `elements` values in rows of `row` (the tensor's last dimension), each row holding distinct
// values of [0, n): the first `row` values of a Fisher-Yates shuffle of [0, n) per row. With
// `disjoint_rows`, one shuffle of [0, n) serves the whole tensor, row after row, so no value
// appears twice anywhere (n >= elements, which the validator checks). Why disjoint exists: a
// block table whose rows share physical blocks lets a kernel move fewer bytes than the
// sequences' lengths say, which a speed-of-light byte count cannot express simply; with disjoint
// rows the minimal traffic is the used blocks, as in the production layout Atrex-Bench models.
inline std::vector<std::int64_t> permutation_values(std::int64_t n, std::int64_t elements,
                                                    std::int64_t row, bool disjoint_rows,
                                                    std::uint64_t seed) {
  std::vector<std::int64_t> vals(static_cast<std::size_t>(std::max<std::int64_t>(elements, 0)));
  row = std::max<std::int64_t>(row, 1);
  std::mt19937_64 prng(seed);
  auto shuffled = [&](std::int64_t count) {
    std::vector<std::int64_t> perm(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
    for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(i);
    std::shuffle(perm.begin(), perm.end(), prng);
    return perm;
  };
  if (disjoint_rows) {
    const auto perm = shuffled(std::max(n, elements));
    std::copy_n(perm.begin(), vals.size(), vals.begin());
    return vals;
  }
  for (std::int64_t r0 = 0; r0 < elements; r0 += row) {
    const auto perm = shuffled(std::max(n, row));
    for (std::int64_t i = 0; i < row && r0 + i < elements; ++i)
      vals[static_cast<std::size_t>(r0 + i)] = perm[static_cast<std::size_t>(i)];
  }
  return vals;
}

}  // namespace kopt::config
