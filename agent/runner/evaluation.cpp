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

// The diagnosis of one ok row: timing, roofline and peaks always; counters,
// function attributes and spills when the worker collected them.
json diagnose_row(const config::operator_config& op, const config::workload& w, const evaluation_report& rep,
                  const std::string& role, const workload_row& row, const std::optional<harness::gpu_peaks>& peaks) {
  harness::diagnosis_input in;
  in.median_ns = row.median_ns;
  in.launch_floor_ns = row.launch_floor_ns;
  try {
    const auto c = harness::roofline_for(op, w);
    in.roofline_bytes = c.bytes;
    in.roofline_flops = c.flops;
  } catch (const std::exception&) {
    // a roofline that does not evaluate leaves those parts of the diagnosis out
  }
  if (peaks) {
    in.peak_bytes_per_s = peaks->dram_bytes_per_s;
    if (auto it = peaks->flops_per_s.find(op.roof.flop_unit); it != peaks->flops_per_s.end())
      in.peak_flops_per_s = it->second;
  }
  if (row.sol_fraction) in.sol_fraction = *row.sol_fraction;
  in.sm_count = rep.device.value("sm_count", 0);
  in.max_threads_per_sm = rep.device.value("max_threads_per_sm", 2048);
  const json counters = row.detail.value("counters", json::object());
  if (counters.contains("metrics"))
    for (const auto& [k, v] : counters.at("metrics").items())
      if (v.is_number()) in.metrics[k] = v.get<double>();
  const json attrs = counters.value("attributes", json::object());
  json kernels_meta = json::object();
  if (auto it = rep.compiled.find(role); it != rep.compiled.end())
    kernels_meta = it->second.compile.value("kernels", json::object());
  for (const auto& l : row.detail.value("launches", json::array())) {
    harness::diagnosis_input::launch x;
    x.kernel = l.value("kernel", "");
    auto prod = [](const json& v) {
      std::int64_t p = 1;
      if (v.is_array())
        for (const auto& e : v) p *= std::max<std::int64_t>(e.get<std::int64_t>(), 1);
      return p;
    };
    x.blocks = prod(l.value("grid", json::array()));
    x.threads_per_block = prod(l.value("block", json::array()));
    x.blocks_per_sm = l.value("occupancy_blocks_per_sm", 0);
    const json a = attrs.value(x.kernel, json::object());
    x.registers = a.value("registers", 0);
    x.local_bytes = a.value("local_bytes", std::int64_t{0});
    const json km = kernels_meta.value(x.kernel, json::object());
    x.spill_bytes = km.value("spill_store_bytes", std::int64_t{0}) + km.value("spill_load_bytes", std::int64_t{0});
    if (const auto it = km.find("performance_advisories"); it != km.end() && it->is_array())
      for (const auto& a : *it)
        if (a.is_string()) x.performance_advisories.push_back(a.get<std::string>());
    in.launches.push_back(x);
  }
  return harness::diagnose(in).to_json();
}

}  // namespace

std::optional<harness::gpu_peaks> calibrated_peaks(const std::optional<harness::gpu_peaks>& datasheet,
                                                   const json& calibration) {
  if (!calibration.is_object()) return std::nullopt;
  const double bw = calibration.value("dram_bytes_per_s", 0.0);
  const double mma = calibration.value("bf16_tensor_flops_per_s", 0.0);
  if (bw <= 0 && mma <= 0) return std::nullopt;
  harness::gpu_peaks p = datasheet.value_or(harness::gpu_peaks{});
  if (p.name.empty()) p.name = "measured";
  p.source = "calibrated";
  if (bw > 0) p.dram_bytes_per_s = bw;
  if (mma > 0) p.flops_per_s["bf16_tensor"] = mma;
  return p;
}

evaluation_summary summarize(const config::operator_config& op, const evaluation_report& rep,
                             const std::string& role, const std::optional<harness::gpu_peaks>& peaks,
                             const std::vector<std::string>& workloads) {
  using protocol::outcome;
  evaluation_summary s;
  s.role = role;
  std::optional<outcome> first_failure;
  double wsum = 0, wsol = 0, watt = 0, wlog_b = 0, wb = 0, wlog_r = 0, wr = 0;
  // Weights relative to the largest: the sums below stay finite and the
  // products do not underflow whatever scale the config used (a store may
  // hold operators from before the loader bounded weights).
  double max_weight = 0;
  for (const auto& w : op.workloads)
    if (workloads.empty() || std::find(workloads.begin(), workloads.end(), w.id) != workloads.end())
      max_weight = std::max(max_weight, w.weight);
  for (const auto& w : op.workloads) {
    if (!workloads.empty() && std::find(workloads.begin(), workloads.end(), w.id) == workloads.end()) continue;
    workload_row row;
    row.workload = w.id;
    row.weight = w.weight;
    const double nw = max_weight > 0 && std::isfinite(max_weight) ? w.weight / max_weight : 1.0;
    wsum += nw;
    auto wit = rep.results.find(w.id);
    if (wit == rep.results.end() || !wit->second.count(role)) {
      row.status = outcome::not_run;
      if (!first_failure) first_failure = outcome::not_run;
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
      row.launch_floor_ns = t.value("launch_floor_ns", 0.0);
      row.launch_bound = harness::is_launch_bound(row.median_ns, row.launch_floor_ns);
    }
    if (row.status == outcome::ok && peaks && row.median_ns > 0) {
      const auto counts = harness::roofline_for(op, w);
      const auto sol = harness::speed_of_light(counts, op.roof.flop_unit, *peaks, row.median_ns);
      row.sol = sol.to_json();
      row.sol["flops"] = counts.flops;
      row.sol["bytes"] = counts.bytes;
      row.sol_fraction = sol.fraction;
      if (row.launch_floor_ns > 0) {
        row.attainable_sol_fraction =
            harness::attainable_sol_fraction(sol.t_sol_ns, row.launch_floor_ns, row.median_ns);
        row.sol["launch_floor_ns"] = row.launch_floor_ns;
        row.sol["attainable_fraction"] = *row.attainable_sol_fraction;
      }
      if (sol.impossible) {
        row.status = outcome::rejected_integrity;
        row.message = fmt::format(
            "measured {:.2f} us is faster than the speed of light {:.2f} us ({:.0f} % of SOL): "
            "impossible, so the measurement or the kernel is not honest",
            row.median_ns / 1e3, sol.t_sol_ns / 1e3, 100 * sol.fraction);
      }
    }
    if (row.status == outcome::ok) {
      if (const auto cal = calibrated_peaks(peaks, rep.calibration); cal && row.median_ns > 0) {
        try {
          const auto sc = harness::speed_of_light(harness::roofline_for(op, w), op.roof.flop_unit, *cal, row.median_ns);
          row.sol_calibrated = sc.to_json();
        } catch (const std::exception&) {
        }
      }
      row.counters = r.detail.value("counters", json());
      row.diagnosis = diagnose_row(op, w, rep, role, row, peaks);
      ++s.ok;
      if (row.sol_fraction) wsol += nw * *row.sol_fraction;
      const auto att = row.attainable_sol_fraction ? row.attainable_sol_fraction : row.sol_fraction;
      if (att) watt += nw * *att;
      auto other = [&](const std::string& who) -> std::optional<double> {
        auto it = wit->second.find(who);
        if (it == wit->second.end() || it->second.status != outcome::ok || who == role)
          return std::nullopt;
        const double m = median_of(it->second);
        return m > 0 && row.median_ns > 0 ? std::optional<double>(m / row.median_ns) : std::nullopt;
      };
      row.speedup_vs_baseline = other("baseline");
      row.speedup_vs_reference = other("reference");
      if (row.speedup_vs_baseline) { wlog_b += nw * std::log(*row.speedup_vs_baseline); wb += nw; }
      if (row.speedup_vs_reference) { wlog_r += nw * std::log(*row.speedup_vs_reference); wr += nw; }
    } else if (!first_failure) {
      first_failure = row.status;
    }
    s.rows.push_back(std::move(row));
  }
  s.overall_status = first_failure.value_or(outcome::ok);
  s.weighted_sol_fraction = wsum > 0 ? wsol / wsum : 0;
  s.weighted_attainable_sol_fraction = wsum > 0 ? watt / wsum : 0;
  if (wb > 0) s.weighted_speedup_vs_baseline = std::exp(wlog_b / wb);
  if (wr > 0) s.weighted_speedup_vs_reference = std::exp(wlog_r / wr);
  return s;
}

json evaluation_summary::to_json() const {
  json rows_j = json::array();
  auto opt = [](const std::optional<double>& v) -> json { return v ? json(*v) : json(nullptr); };
  for (const auto& r : rows)
    rows_j.push_back({{"workload", r.workload},
                      {"weight", r.weight},
                      {"status", r.status},
                      {"message", r.message},
                      {"max_abs_err", r.max_abs_err},
                      {"max_rel_err", r.max_rel_err},
                      {"median_ns", r.median_ns},
                      {"rsd", r.rsd},
                      {"q1_ns", r.q1_ns},
                      {"q3_ns", r.q3_ns},
                      {"samples", r.samples},
                      {"stop_reason", r.stop_reason},
                      {"sol_fraction", opt(r.sol_fraction)},
                      {"attainable_sol_fraction", opt(r.attainable_sol_fraction)},
                      {"launch_floor_ns", r.launch_floor_ns},
                      {"speedup_vs_baseline", opt(r.speedup_vs_baseline)},
                      {"speedup_vs_reference", opt(r.speedup_vs_reference)},
                      {"launch_bound", r.launch_bound},
                      {"sol", r.sol},
                      {"sol_calibrated", r.sol_calibrated},
                      {"counters", r.counters},
                      {"diagnosis", r.diagnosis}});
  return {{"role", role},
          {"status", overall_status},
          {"workloads_ok", ok},
          {"workloads", rows.size()},
          {"weighted_sol_fraction", weighted_sol_fraction},
          {"weighted_attainable_sol_fraction", weighted_attainable_sol_fraction},
          {"weighted_speedup_vs_baseline", opt(weighted_speedup_vs_baseline)},
          {"weighted_speedup_vs_reference", opt(weighted_speedup_vs_reference)},
          {"rows", rows_j}};
}

std::string render_table(const evaluation_summary& s) {
  std::string out = fmt::format(
      "{}:\n{:<22} {:>7} {:<18} {:>10} {:>10} {:>11} {:>7} {:>7} {:>7} {:>9}\n", s.role, "workload",
      "weight", "status", "max_abs", "max_rel", "median_us", "rsd%", "SOL%", "att%", "vs_base");
  for (const auto& r : s.rows) {
    out += fmt::format(
        "{:<22} {:>7.4f} {:<18} {:>10.3g} {:>10.3g} {:>11.3f} {:>7.2f} {:>7} {:>7} {:>9}{}\n",
        r.workload.substr(0, 22), r.weight, std::string(protocol::to_string(r.status)).substr(0, 18),
        r.max_abs_err, r.max_rel_err, r.median_ns / 1e3, 100 * r.rsd,
        r.sol_fraction ? fmt::format("{:.1f}", 100 * *r.sol_fraction) : "-",
        r.attainable_sol_fraction ? fmt::format("{:.1f}", 100 * *r.attainable_sol_fraction) : "-",
        r.speedup_vs_baseline ? fmt::format("{:.2f}x", *r.speedup_vs_baseline) : "-",
        r.launch_bound ? "  (launch-bound)" : "");
    if (r.status != protocol::outcome::ok && !r.message.empty())
      out += fmt::format("    {}\n", r.message.substr(0, 300));
  }
  out += fmt::format("weighted: {:.1f} % of speed of light", 100 * s.weighted_sol_fraction);
  if (std::any_of(s.rows.begin(), s.rows.end(),
                  [](const workload_row& r) { return r.attainable_sol_fraction; }))
    out += fmt::format(" ({:.1f} % attainable, with the measured launch floor)",
                       100 * s.weighted_attainable_sol_fraction);
  out += fmt::format("; {} / {} workloads ok", s.ok, s.rows.size());
  if (s.weighted_speedup_vs_baseline)
    out += fmt::format("; {:.2f}x vs baseline (weighted geomean)", *s.weighted_speedup_vs_baseline);
  if (s.weighted_speedup_vs_reference)
    out += fmt::format("; {:.2f}x vs reference", *s.weighted_speedup_vs_reference);
  out += "\n";
  return out;
}

}  // namespace kopt::runner
