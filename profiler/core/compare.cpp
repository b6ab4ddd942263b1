#include "core/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <thread>

#include "core/numeric.hpp"

namespace kopt::harness {
namespace {

std::vector<std::int64_t> unravel(std::size_t flat, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> idx(shape.size(), 0);
  auto rest = static_cast<std::int64_t>(flat);
  for (std::size_t d = shape.size(); d-- > 0;) {
    const std::int64_t extent = std::max<std::int64_t>(shape[d], 1);
    idx[d] = rest % extent;
    rest /= extent;
  }
  return idx;
}

struct partial {
  std::size_t failed = 0, nonfinite = 0;
  double max_abs = 0.0, max_rel = 0.0;
  std::vector<std::size_t> first;  // flat indices of the first failures
};

// One instantiation per dtype, so that decoding is not a switch per element
// (the loop is the whole cost of a check for outputs of tens of millions of
// elements: half of an evaluation's non-timing time on the H200 machine).
template <config::dtype type>
partial compare_range_t(const void* actual, const void* expected, std::size_t begin, std::size_t end,
                        const config::tolerance& tol, std::size_t keep) {
  partial p;
  constexpr bool is_int = !(type == config::dtype::float64 || type == config::dtype::float32 ||
                            type == config::dtype::float16 || type == config::dtype::bfloat16 ||
                            type == config::dtype::float8_e4m3fn || type == config::dtype::float8_e5m2);
  constexpr std::size_t width = type == config::dtype::float64 || type == config::dtype::int64 ? 8
                                : type == config::dtype::float32 || type == config::dtype::int32 ? 4
                                : type == config::dtype::float16 || type == config::dtype::bfloat16 ||
                                          type == config::dtype::int16
                                    ? 2
                                    : 1;
  const auto* ab = static_cast<const unsigned char*>(actual);
  const auto* eb = static_cast<const unsigned char*>(expected);
  // max_rel as a fraction rel_num / rel_den, compared by cross-multiplying:
  // no division per element.
  double rel_num = 0.0, rel_den = 1.0;
  for (std::size_t i = begin; i < end; ++i) {
    // Bit-identical elements pass under every rule below (same NaN, same
    // infinity, or a difference of 0) and change no maximum: skip them.
    if (std::memcmp(ab + width * i, eb + width * i, width) == 0) continue;
    bool fail = false;
    if constexpr (is_int) {
      const std::int64_t a = decode_integer(actual, i, type);
      const std::int64_t e = decode_integer(expected, i, type);
      if (a != e) {
        fail = true;
        const double d = std::fabs(static_cast<double>(a) - static_cast<double>(e));
        p.max_abs = std::max(p.max_abs, d);
        if (e != 0) p.max_rel = std::max(p.max_rel, d / std::fabs(static_cast<double>(e)));
      }
    } else {
      const double a = decode_element(actual, i, type);
      const double e = decode_element(expected, i, type);
      if (std::isnan(e)) {
        fail = !std::isnan(a);
      } else if (std::isinf(e)) {
        fail = a != e;
      } else if (!std::isfinite(a)) {
        fail = true;
        ++p.nonfinite;
      } else {
        const double d = std::fabs(a - e);
        const double ae = std::fabs(e);
        p.max_abs = std::max(p.max_abs, d);
        if constexpr (type == config::dtype::float64) {
          // Products of float64 values can overflow: divide.
          if (ae != 0.0) p.max_rel = std::max(p.max_rel, d / ae);
        } else if (ae != 0.0 && d * rel_den > rel_num * ae) {
          rel_num = d;  // float32 and narrower: the products fit a double
          rel_den = ae;
        }
        fail = !tol.accepts(d, ae);
      }
    }
    if (fail) {
      ++p.failed;
      if (p.first.size() < keep) p.first.push_back(i);
    }
  }
  if constexpr (!is_int) p.max_rel = std::max(p.max_rel, rel_num / rel_den);
  return p;
}

partial compare_range(const void* actual, const void* expected, std::size_t begin, std::size_t end,
                      config::dtype type, const config::tolerance& tol, std::size_t keep) {
  using config::dtype;
  switch (type) {
#define KOPT_CASE(T) \
  case dtype::T:     \
    return compare_range_t<dtype::T>(actual, expected, begin, end, tol, keep);
    KOPT_CASE(float64)
    KOPT_CASE(float32)
    KOPT_CASE(float16)
    KOPT_CASE(bfloat16)
    KOPT_CASE(float8_e4m3fn)
    KOPT_CASE(float8_e5m2)
    KOPT_CASE(int64)
    KOPT_CASE(int32)
    KOPT_CASE(int16)
    KOPT_CASE(int8)
    KOPT_CASE(uint8)
    KOPT_CASE(boolean)
#undef KOPT_CASE
  }
  return compare_range_t<dtype::float32>(actual, expected, begin, end, tol, keep);
}

}  // namespace

compare_result compare_outputs(const void* actual, const void* expected, std::size_t elements,
                               config::dtype type, const std::vector<std::int64_t>& shape,
                               const config::tolerance& tol, std::size_t max_reported) {
  // Large outputs are split over the host's cores: a 100M-element check
  // should not dominate an evaluation.
  constexpr std::size_t chunk_min = std::size_t{1} << 22;
  const std::size_t threads =
      elements < chunk_min ? 1 : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 16);
  std::vector<std::future<partial>> parts;
  const std::size_t step = (elements + threads - 1) / std::max<std::size_t>(threads, 1);
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t b = t * step, e = std::min(elements, b + step);
    if (b >= e) break;
    parts.push_back(std::async(threads == 1 ? std::launch::deferred : std::launch::async,
                               compare_range, actual, expected, b, e, type, tol, max_reported));
  }
  compare_result r;
  r.elements = elements;
  for (auto& f : parts) {
    partial p = f.get();
    r.failed += p.failed;
    r.nonfinite_where_finite += p.nonfinite;
    r.max_abs_err = std::max(r.max_abs_err, p.max_abs);
    r.max_rel_err = std::max(r.max_rel_err, p.max_rel);
    for (std::size_t flat : p.first) {
      if (r.first_failures.size() >= max_reported) break;
      r.first_failures.push_back({unravel(flat, shape), decode_element(expected, flat, type),
                                  decode_element(actual, flat, type)});
    }
  }
  r.matched_ratio = elements == 0 ? 1.0
                                  : static_cast<double>(elements - r.failed) / static_cast<double>(elements);
  r.passed = r.nonfinite_where_finite == 0 && r.matched_ratio >= tol.matched_ratio;
  return r;
}

nlohmann::json compare_result::to_json() const {
  nlohmann::json fails = nlohmann::json::array();
  for (const auto& m : first_failures) {
    auto num = [](double v) -> nlohmann::json {
      if (std::isnan(v)) return "nan";
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      return v;
    };
    fails.push_back({{"index", m.index}, {"expected", num(m.expected)}, {"actual", num(m.actual)}});
  }
  return {{"elements", elements},         {"failed", failed},
          {"nonfinite", nonfinite_where_finite}, {"matched_ratio", matched_ratio},
          {"max_abs_err", max_abs_err},   {"max_rel_err", max_rel_err},
          {"first_failures", fails},      {"passed", passed}};
}

}  // namespace kopt::harness
