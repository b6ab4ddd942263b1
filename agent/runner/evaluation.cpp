#include "runner/evaluation.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kopt::runner {

using json = nlohmann::json;

namespace {

double median_of(const subject_result& r) {
  return r.detail.contains("timing") ? r.detail.at("timing").value("median_ns", 0.0) : 0.0;
}

// Launch overhead dominates below about 10 us on current GPUs.
constexpr double launch_bound_ns = 10000.0;

}  // namespace

evaluation_summary summarize(const config::operator_config& op, const evaluation_report& rep,
                             const std::string& role, const std::optional<harness::gpu_peaks>& peaks,
                             const std::vector<std::string>& workloads) {
  evaluation_summary s;
  s.role = role;
  double wsum = 0, wsol = 0, wlog_b = 0, wb = 0, wlog_r = 0, wr = 0;
  for (const auto& w : op.workloads) {
    if (!workloads.empty() && std::find(workloads.begin(), workloads.end(), w.id) == workloads.end()) continue;
    workload_row row;
    row.workload = w.id;
    row.weight = w.weight;
    wsum += w.weight;
    auto wit = rep.results.find(w.id);
    if (wit == rep.results.end() || !wit->second.count(role)) {
      row.status = "not_run";
      if (s.overall_status.empty()) s.overall_status = "not_run";
      s.rows.push_back(row);
      continue;
    }
    const subject_result& r = wit->second.at(role);
    row.status = r.status;
    row.message = r.message;
    row.detail = r.detail;
    for (const auto& c : r.detail.value("correctness", json::array())) {
      const json outputs = c.value("outputs", json::object());
      for (const auto& [name, o] : outputs.items()) {
        row.max_abs_err = std::max(row.max_abs_err, o.value("max_abs_err", 0.0));
        row.max_rel_err = std::max(row.max_rel_err, o.value("max_rel_err", 0.0));
      }
    }
    if (r.detail.contains("timing")) {
      const auto& t = r.detail.at("timing");
      row.median_ns = t.value("median_ns", 0.0);
      row.rsd = t.value("rsd", 0.0);
      row.q1_ns = t.value("q1_ns", 0.0);
      row.q3_ns = t.value("q3_ns", 0.0);
      row.samples = t.value("samples", std::size_t{0});
      row.stop_reason = t.value("stop_reason", "");
      row.launch_bound = row.median_ns > 0 && row.median_ns < launch_bound_ns;
    }
    if (row.status == "ok" && peaks && row.median_ns > 0) {
      const auto counts = harness::roofline_for(op, w);
      const auto sol = harness::speed_of_light(counts, op.roof.flop_unit, *peaks, row.median_ns);
      row.sol = sol.to_json();
      row.sol["flops"] = counts.flops;
      row.sol["bytes"] = counts.bytes;
      row.sol_fraction = sol.fraction;
      if (sol.impossible) {
        row.status = "rejected_integrity";
        row.message = fmt::format(
            "measured {:.2f} us is faster than the speed of light {:.2f} us ({:.0f} % of SOL): "
            "impossible, so the measurement or the kernel is not honest",
            row.median_ns / 1e3, sol.t_sol_ns / 1e3, 100 * sol.fraction);
      }
    }
    if (row.status == "ok") {
      ++s.ok;
      if (row.sol_fraction) wsol += w.weight * *row.sol_fraction;
      auto other = [&](const std::string& who) -> std::optional<double> {
        auto it = wit->second.find(who);
        if (it == wit->second.end() || it->second.status != "ok" || who == role) return std::nullopt;
        const double m = median_of(it->second);
        return m > 0 && row.median_ns > 0 ? std::optional<double>(m / row.median_ns) : std::nullopt;
      };
      row.speedup_vs_baseline = other("baseline");
      row.speedup_vs_reference = other("reference");
      if (row.speedup_vs_baseline) { wlog_b += w.weight * std::log(*row.speedup_vs_baseline); wb += w.weight; }
      if (row.speedup_vs_reference) { wlog_r += w.weight * std::log(*row.speedup_vs_reference); wr += w.weight; }
    } else if (s.overall_status.empty()) {
      s.overall_status = row.status;
    }
    s.rows.push_back(std::move(row));
  }
  if (s.overall_status.empty()) s.overall_status = "ok";
  s.weighted_sol_fraction = wsum > 0 ? wsol / wsum : 0;
  if (wb > 0) s.weighted_speedup_vs_baseline = std::exp(wlog_b / wb);
  if (wr > 0) s.weighted_speedup_vs_reference = std::exp(wlog_r / wr);
  return s;
}

json evaluation_summary::to_json() const {
  json rows_j = json::array();
  auto opt = [](const std::optional<double>& v) -> json { return v ? json(*v) : json(nullptr); };
  for (const auto& r : rows)
    rows_j.push_back({{"workload", r.workload}, {"weight", r.weight}, {"status", r.status},
                      {"message", r.message}, {"max_abs_err", r.max_abs_err}, {"max_rel_err", r.max_rel_err},
                      {"median_ns", r.median_ns}, {"rsd", r.rsd}, {"q1_ns", r.q1_ns}, {"q3_ns", r.q3_ns},
                      {"samples", r.samples}, {"stop_reason", r.stop_reason},
                      {"sol_fraction", opt(r.sol_fraction)}, {"speedup_vs_baseline", opt(r.speedup_vs_baseline)},
                      {"speedup_vs_reference", opt(r.speedup_vs_reference)}, {"launch_bound", r.launch_bound},
                      {"sol", r.sol}});
  return {{"role", role}, {"status", overall_status}, {"workloads_ok", ok}, {"workloads", rows.size()},
          {"weighted_sol_fraction", weighted_sol_fraction},
          {"weighted_speedup_vs_baseline", opt(weighted_speedup_vs_baseline)},
          {"weighted_speedup_vs_reference", opt(weighted_speedup_vs_reference)}, {"rows", rows_j}};
}

std::string render_table(const evaluation_summary& s) {
  std::string out = fmt::format("{}:\n{:<22} {:>7} {:<18} {:>10} {:>10} {:>11} {:>7} {:>7} {:>9}\n", s.role,
                                "workload", "weight", "status", "max_abs", "max_rel", "median_us", "rsd%",
                                "SOL%", "vs_base");
  for (const auto& r : s.rows) {
    out += fmt::format("{:<22} {:>7.4f} {:<18} {:>10.3g} {:>10.3g} {:>11.3f} {:>7.2f} {:>7} {:>9}{}\n",
                       r.workload.substr(0, 22), r.weight, r.status.substr(0, 18), r.max_abs_err,
                       r.max_rel_err, r.median_ns / 1e3, 100 * r.rsd,
                       r.sol_fraction ? fmt::format("{:.1f}", 100 * *r.sol_fraction) : "-",
                       r.speedup_vs_baseline ? fmt::format("{:.2f}x", *r.speedup_vs_baseline) : "-",
                       r.launch_bound ? "  (launch-bound)" : "");
    if (r.status != "ok" && !r.message.empty())
      out += fmt::format("    {}\n", r.message.substr(0, 300));
  }
  out += fmt::format("weighted: {:.1f} % of speed of light; {} / {} workloads ok", 100 * s.weighted_sol_fraction,
                     s.ok, s.rows.size());
  if (s.weighted_speedup_vs_baseline)
    out += fmt::format("; {:.2f}x vs baseline (weighted geomean)", *s.weighted_speedup_vs_baseline);
  if (s.weighted_speedup_vs_reference)
    out += fmt::format("; {:.2f}x vs reference", *s.weighted_speedup_vs_reference);
  out += "\n";
  return out;
}

}  // namespace kopt::runner
