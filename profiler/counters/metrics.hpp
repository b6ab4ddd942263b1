// CUPTI Profiler Host API: metric names, descriptions, config images and
// pass counts for a chip. The host API needs no GPU and no driver, so
// everything here runs (and is tested) in CI: metric lists are validated
// against the chip's metric database before any GPU time is spent, and a
// name CUPTI does not know gets a clear error with suggestions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace kopt::counters {

// Metric tiers. "default" is cheap (2 replay passes on GH100) and is what a
// campaign collects for its best candidates; "full" is the speed-of-light
// set for `kopt profile --full` (about 12 passes on GH100).
enum class tier { default_tier, full };
const std::vector<std::string>& tier_metrics(tier t);
tier parse_tier(const std::string& s);  // "default" | "full"; throws kopt::error

struct metric_info {
  std::string name, description, hw_unit, dim_unit, type;  // type: counter|ratio|throughput
  nlohmann::json to_json() const;
};

struct config_image {
  std::vector<std::uint8_t> image;
  std::size_t passes = 0;
  bool from_cache = false;
};

// A metric name the chip does not know (describe, configure): the
// caller's mistake, told apart by type from a profiler that cannot run.
class unknown_metric_error : public kopt::error {
 public:
  using kopt::error::error;
};

// One CUPTI profiler host object for one chip ("GH100", "AD102", ...).
class metric_catalog {
 public:
  explicit metric_catalog(std::string chip);  // throws kopt::error
  ~metric_catalog();
  metric_catalog(const metric_catalog&) = delete;
  metric_catalog& operator=(const metric_catalog&) = delete;

  const std::string& chip() const noexcept { return chip_; }

  // Every base metric of the chip (without the .sum/.avg... roll-ups).
  std::vector<std::string> base_metrics() const;

  // Describes each name; throws kopt::error listing every unknown name,
  // with the closest known base metrics as suggestions.
  std::vector<metric_info> describe(const std::vector<std::string>& names) const;

  // Config image and replay pass count for `names` (validated first).
  // Cached per chip and metric list under cache_dir when it is not empty.
  config_image configure(const std::vector<std::string>& names, const std::filesystem::path& cache_dir) const;

  // Evaluates `names` for range `range` of a decoded counter-data image.
  std::vector<double> evaluate(const std::vector<std::uint8_t>& counter_data, std::size_t range,
                               const std::vector<std::string>& names) const;

 private:
  struct impl;
  std::string chip_;
  std::unique_ptr<impl> p_;
};

// Chips this CUPTI build supports.
std::vector<std::string> supported_chips();

// Default cache directory: $KOPT_CACHE_DIR/cupti, else
// $XDG_CACHE_HOME/kopt/cupti, else ~/.cache/kopt/cupti.
std::filesystem::path default_cache_dir();

}  // namespace kopt::counters
