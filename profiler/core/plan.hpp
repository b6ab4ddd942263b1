// Launch plans made concrete for one workload and one set of parameter
// values, and checked against the device's limits before anything is
// launched: a plan that asks for 2048 threads per block or 300 KB of shared
// memory is refused with a precise reason (status launch_error), never
// handed to the driver to fail obscurely.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/operator.hpp"

namespace kopt::harness {

using name_values = std::map<std::string, std::int64_t, std::less<>>;

struct resolved_arg {
  config::launch_arg::kind k = config::launch_arg::kind::tensor;
  std::string name;
  config::dtype type = config::dtype::int32;
  std::int64_t int_value = 0;
  double float_value = 0.0;
};

struct resolved_launch {
  std::string kernel;
  std::array<std::int64_t, 3> grid{1, 1, 1};
  std::array<std::int64_t, 3> block{1, 1, 1};
  std::array<std::int64_t, 3> cluster{0, 0, 0};  // all zero: no cluster
  std::int64_t shared_bytes = 0;
  std::vector<resolved_arg> args;
};

struct resolved_tensor {
  std::string name;
  config::dtype type = config::dtype::float32;
  std::vector<std::int64_t> shape;
  std::int64_t elements = 0;
  std::int64_t bytes = 0;
  bool is_output = false;
  bool in_place = false;
};

struct resolved_plan {
  std::vector<resolved_launch> launches;
  std::map<std::string, std::int64_t> workspace_bytes;
  std::map<std::string, bool> workspace_zero_init;
};

// Shapes of every input and output for a workload.
std::vector<resolved_tensor> resolve_tensors(const config::operator_config& op,
                                             const config::workload& w);

// Throws kopt::error with the launch, field and reason on a bad expression.
resolved_plan resolve_plan(const config::operator_config& op, const config::candidate& c,
                           const config::workload& w, const name_values& parameters);

// Default parameter values of a candidate.
name_values default_parameters(const config::candidate& c);

struct device_limits {
  std::int64_t max_threads_per_block = 1024;
  std::array<std::int64_t, 3> max_block{1024, 1024, 64};
  std::array<std::int64_t, 3> max_grid{2147483647, 65535, 65535};
  std::int64_t max_shared_optin = 232448;     // bytes per block with opt-in (H100/H200)
  std::int64_t max_cluster_blocks = 8;        // portable cluster size
  bool supports_clusters = true;              // sm_90+
  nlohmann::json to_json() const;
  static device_limits from_json(const nlohmann::json& j);
};

// Every problem of the plan against the limits (empty when it fits).
// `static_shared` maps kernel name -> static shared bytes when known.
std::vector<std::string> validate_plan(const resolved_plan& plan, const device_limits& limits,
                                       const std::map<std::string, std::int64_t>& static_shared = {});

nlohmann::json to_json(const resolved_launch& l);

}  // namespace kopt::harness
