#include "core/plan.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include "config/expr.hpp"

namespace kopt::harness {
namespace {

std::int64_t eval_field(const std::string& text, const name_values& names, const std::string& where) {
  try {
    return expr::evaluate(text, expr::map_resolver(names));
  } catch (const expr::expr_error& e) {
    throw kopt::error(fmt::format("{}: \"{}\": {}", where, text, e.what()));
  }
}

std::array<std::int64_t, 3> eval_dims(const std::vector<std::string>& dims, const name_values& names,
                                      const std::string& where, std::int64_t fill) {
  std::array<std::int64_t, 3> out{fill, fill, fill};
  if (dims.size() > 3) throw kopt::error(fmt::format("{}: more than 3 dimensions", where));
  for (std::size_t i = 0; i < dims.size(); ++i)
    out[i] = eval_field(dims[i], names, fmt::format("{}[{}]", where, i));
  return out;
}

}  // namespace

name_values default_parameters(const config::candidate& c) {
  name_values p;
  for (const auto& prm : c.parameters) p[prm.name] = prm.default_value;
  return p;
}

std::vector<resolved_tensor> resolve_tensors(const config::operator_config& op,
                                             const config::workload& w) {
  const auto names = config::workload_names(op, w);
  std::vector<resolved_tensor> out;
  auto add = [&](const config::tensor& t, bool is_output) {
    resolved_tensor r;
    r.name = t.name;
    r.type = t.type;
    r.is_output = is_output;
    r.in_place = t.in_place;
    r.elements = 1;
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      const auto d = eval_field(t.shape[i], names, fmt::format("{}.shape[{}]", t.name, i));
      if (d < 0) throw kopt::error(fmt::format("{}.shape[{}] is negative ({})", t.name, i, d));
      r.shape.push_back(d);
      if (__builtin_mul_overflow(r.elements, d, &r.elements))
        throw kopt::error(fmt::format("{}: element count overflows", t.name));
    }
    if (__builtin_mul_overflow(r.elements, static_cast<std::int64_t>(config::dtype_size(t.type)), &r.bytes))
      throw kopt::error(fmt::format("{}: byte count overflows", t.name));
    out.push_back(std::move(r));
  };
  for (const auto& t : op.inputs) add(t, false);
  for (const auto& t : op.outputs) add(t, true);
  return out;
}

resolved_plan resolve_plan(const config::operator_config& op, const config::candidate& c,
                           const config::workload& w, const name_values& parameters) {
  auto names = config::workload_names(op, w, parameters);
  resolved_plan plan;
  for (const auto& ws : c.workspaces) {
    plan.workspace_bytes[ws.name] = eval_field(ws.bytes, names, "workspaces." + ws.name + ".bytes");
    plan.workspace_zero_init[ws.name] = ws.zero_init;
  }
  for (std::size_t li = 0; li < c.launches.size(); ++li) {
    const auto& l = c.launches[li];
    const std::string where = fmt::format("launches[{}] ({})", li, l.kernel);
    resolved_launch r;
    r.kernel = l.kernel;
    r.grid = eval_dims(l.grid, names, where + ".grid", 1);
    r.block = eval_dims(l.block, names, where + ".block", 1);
    if (!l.cluster.empty()) r.cluster = eval_dims(l.cluster, names, where + ".cluster", 1);
    r.shared_bytes = eval_field(l.shared_bytes, names, where + ".shared_bytes");
    for (std::size_t ai = 0; ai < l.args.size(); ++ai) {
      const auto& a = l.args[ai];
      resolved_arg ra;
      ra.k = a.k;
      ra.name = a.name;
      ra.type = a.type;
      switch (a.k) {
        case config::launch_arg::kind::tensor:
        case config::launch_arg::kind::workspace:
          break;
        case config::launch_arg::kind::integer:
          ra.int_value = eval_field(a.name, names, fmt::format("{}.args[{}]", where, ai));
          if (a.type == config::dtype::int32 &&
              (ra.int_value > INT32_MAX || ra.int_value < INT32_MIN))
            throw kopt::error(fmt::format("{}.args[{}]: value {} does not fit int32", where, ai,
                                          ra.int_value));
          break;
        case config::launch_arg::kind::scalar: {
          double v = 0.0;
          bool found = false;
          for (const auto& s : op.scalars)
            if (s.name == a.name) { v = s.value; found = true; }
          if (auto it = w.scalars.find(a.name); it != w.scalars.end()) { v = it->second; found = true; }
          if (!found) throw kopt::error(fmt::format("{}.args[{}]: unknown scalar {}", where, ai, a.name));
          ra.float_value = v;
          ra.int_value = static_cast<std::int64_t>(v);
          break;
        }
      }
      r.args.push_back(std::move(ra));
    }
    plan.launches.push_back(std::move(r));
  }
  return plan;
}

std::vector<std::string> validate_plan(const resolved_plan& plan, const device_limits& lim,
                                       const std::map<std::string, std::int64_t>& static_shared) {
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < plan.launches.size(); ++i) {
    const auto& l = plan.launches[i];
    const std::string where = fmt::format("launches[{}] ({})", i, l.kernel);
    std::int64_t threads = 1;
    for (std::size_t d = 0; d < 3; ++d) {
      if (l.block[d] < 1) problems.push_back(fmt::format("{}: block[{}] = {} must be >= 1", where, d, l.block[d]));
      else if (l.block[d] > lim.max_block[d])
        problems.push_back(fmt::format("{}: block[{}] = {} exceeds the device limit {}", where, d,
                                       l.block[d], lim.max_block[d]));
      if (l.grid[d] < 1) problems.push_back(fmt::format("{}: grid[{}] = {} must be >= 1", where, d, l.grid[d]));
      else if (l.grid[d] > lim.max_grid[d])
        problems.push_back(fmt::format("{}: grid[{}] = {} exceeds the device limit {}", where, d,
                                       l.grid[d], lim.max_grid[d]));
      // Saturate instead of overflowing: the values come from untrusted expressions.
      if (__builtin_mul_overflow(threads, std::max<std::int64_t>(l.block[d], 1), &threads)) threads = INT64_MAX;
    }
    if (threads > lim.max_threads_per_block)
      problems.push_back(fmt::format("{}: {} threads per block exceed the device limit {}", where,
                                     threads, lim.max_threads_per_block));
    std::int64_t stat = 0;
    if (auto it = static_shared.find(l.kernel); it != static_shared.end()) stat = it->second;
    if (l.shared_bytes < 0)
      problems.push_back(fmt::format("{}: shared_bytes = {} is negative", where, l.shared_bytes));
    else if (l.shared_bytes > lim.max_shared_optin - stat)
      problems.push_back(fmt::format(
          "{}: {} bytes of shared memory ({} dynamic + {} static) exceed the device's opt-in limit of {} bytes per block",
          where, l.shared_bytes + stat, l.shared_bytes, stat, lim.max_shared_optin));
    const bool has_cluster = l.cluster[0] > 0 || l.cluster[1] > 0 || l.cluster[2] > 0;
    if (has_cluster) {
      if (!lim.supports_clusters) problems.push_back(where + ": thread-block clusters need sm_90 or newer");
      std::int64_t blocks = 1;
      for (std::size_t d = 0; d < 3; ++d) {
        if (l.cluster[d] < 1) {
          problems.push_back(fmt::format("{}: cluster[{}] = {} must be >= 1", where, d, l.cluster[d]));
          continue;
        }
        if (__builtin_mul_overflow(blocks, l.cluster[d], &blocks)) blocks = INT64_MAX;
        if (l.grid[d] % l.cluster[d] != 0)
          problems.push_back(fmt::format("{}: grid[{}] = {} is not a multiple of cluster[{}] = {}", where,
                                         d, l.grid[d], d, l.cluster[d]));
      }
      if (blocks > lim.max_cluster_blocks)
        problems.push_back(fmt::format("{}: cluster of {} blocks exceeds the portable limit of {}", where,
                                       blocks, lim.max_cluster_blocks));
    }
  }
  for (const auto& [name, bytes] : plan.workspace_bytes)
    if (bytes < 0) problems.push_back(fmt::format("workspaces.{}: {} bytes is negative", name, bytes));
  return problems;
}

nlohmann::json device_limits::to_json() const {
  return {{"max_threads_per_block", max_threads_per_block}, {"max_block", max_block},
          {"max_grid", max_grid}, {"max_shared_optin", max_shared_optin},
          {"max_cluster_blocks", max_cluster_blocks}, {"supports_clusters", supports_clusters}};
}

device_limits device_limits::from_json(const nlohmann::json& j) {
  device_limits d;
  d.max_threads_per_block = j.value("max_threads_per_block", d.max_threads_per_block);
  if (j.contains("max_block")) d.max_block = j.at("max_block").get<std::array<std::int64_t, 3>>();
  if (j.contains("max_grid")) d.max_grid = j.at("max_grid").get<std::array<std::int64_t, 3>>();
  d.max_shared_optin = j.value("max_shared_optin", d.max_shared_optin);
  d.max_cluster_blocks = j.value("max_cluster_blocks", d.max_cluster_blocks);
  d.supports_clusters = j.value("supports_clusters", d.supports_clusters);
  return d;
}

nlohmann::json to_json(const resolved_launch& l) {
  return {{"kernel", l.kernel}, {"grid", l.grid}, {"block", l.block}, {"cluster", l.cluster},
          {"shared_bytes", l.shared_bytes}};
}

}  // namespace kopt::harness
