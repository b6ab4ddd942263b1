// Element-wise comparison of a candidate's output with the reference's, to
// the rule of docs/measurement.md: by default an element fails only if its
// error exceeds both atol and rtol*|expected| (tolerance form "max_of"; form
// "sum" is torch.allclose's atol + rtol*|expected|, config::tolerance::accepts);
// NaN or Inf where the reference is
// finite always fails; integers must match exactly. The first few failures
// are kept with their multi-dimensional index, because they go back to the
// LLM as feedback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/operator.hpp"

namespace kopt::harness {

struct mismatch {
  std::vector<std::int64_t> index;
  double expected = 0.0;
  double actual = 0.0;
};

struct compare_result {
  std::size_t elements = 0;
  std::size_t failed = 0;
  std::size_t nonfinite_where_finite = 0;  // always fatal
  double matched_ratio = 1.0;
  double max_abs_err = 0.0;
  double max_rel_err = 0.0;
  std::vector<mismatch> first_failures;
  bool passed = true;
  nlohmann::json to_json() const;
};

compare_result compare_outputs(const void* actual, const void* expected, std::size_t elements,
                               config::dtype type, const std::vector<std::int64_t>& shape,
                               const config::tolerance& tol, std::size_t max_reported = 5);

}  // namespace kopt::harness
