#include "core/roofline.hpp"

#include <fstream>

#include <fmt/format.h>

#include "common/error.hpp"
#include "config/expr.hpp"
#include "core/plan.hpp"

namespace kopt::harness {

nlohmann::json gpu_peaks::to_json() const {
  return {{"name", name}, {"dram_bytes_per_s", dram_bytes_per_s}, {"flops_per_s", flops_per_s}, {"source", source}};
}

nlohmann::json load_peak_table(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw kopt::error("cannot read the GPU peak table " + file.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw kopt::error(fmt::format("{}: {}", file.string(), e.what()));
  }
}

std::optional<gpu_peaks> find_peaks(const nlohmann::json& table, const std::string& device_name) {
  if (!table.contains("gpus")) return std::nullopt;
  for (const auto& [key, g] : table.at("gpus").items()) {
    for (const auto& m : g.value("match", std::vector<std::string>{})) {
      if (device_name.find(m) == std::string::npos) continue;
      gpu_peaks p;
      p.name = key;
      p.dram_bytes_per_s = g.value("dram_bytes_per_s", 0.0);
      p.flops_per_s = g.value("flops_per_s", std::map<std::string, double>{});
      p.source = "datasheet";
      return p;
    }
  }
  return std::nullopt;
}

roofline_counts roofline_for(const config::operator_config& op, const config::workload& w) {
  const auto names = config::workload_names(op, w);
  roofline_counts c;
  try {
    c.flops = static_cast<double>(expr::evaluate(op.roof.flops, expr::map_resolver(names)));
    if (op.roof.bytes) {
      c.bytes = static_cast<double>(expr::evaluate(*op.roof.bytes, expr::map_resolver(names)));
    } else {
      for (const auto& t : resolve_tensors(op, w))
        c.bytes += static_cast<double>(t.bytes) * (t.in_place ? 2.0 : 1.0);
    }
  } catch (const expr::expr_error& e) {
    throw kopt::error(fmt::format("roofline for workload {}: {}", w.id, e.what()));
  }
  return c;
}

sol_result speed_of_light(const roofline_counts& c, const std::string& flop_unit, const gpu_peaks& peaks,
                          double measured_ns, double tolerance) {
  sol_result r;
  if (peaks.dram_bytes_per_s > 0) r.t_memory_ns = c.bytes / peaks.dram_bytes_per_s * 1e9;
  if (auto it = peaks.flops_per_s.find(flop_unit); it != peaks.flops_per_s.end() && it->second > 0)
    r.t_compute_ns = c.flops / it->second * 1e9;
  r.t_sol_ns = std::max(r.t_memory_ns, r.t_compute_ns);
  r.bound = r.t_compute_ns > r.t_memory_ns ? "compute" : "memory";
  r.fraction = measured_ns > 0 ? r.t_sol_ns / measured_ns : 0.0;
  r.impossible = r.fraction > 1.0 + tolerance;
  return r;
}

nlohmann::json sol_result::to_json() const {
  return {{"t_sol_ns", t_sol_ns}, {"t_compute_ns", t_compute_ns}, {"t_memory_ns", t_memory_ns},
          {"bound", bound}, {"fraction", fraction}, {"impossible", impossible}};
}

}  // namespace kopt::harness
