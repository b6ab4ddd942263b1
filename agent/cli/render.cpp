#include "cli/render.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace kopt::cli {

using nlohmann::json;

namespace {

template <typename T>
json opt_json(const std::optional<T>& v) {
  if (v) return json(*v);
  return nullptr;
}

json opt_time(const std::optional<std::int64_t>& v) {
  if (v) return store::format_time(*v);
  return nullptr;
}

}  // namespace

json to_json(const store::campaign_record& c) {
  return json{
      {"id", c.id},
      {"operator_id", c.operator_id},
      {"operator", c.operator_name},
      {"state", store::to_string(c.state)},
      {"provider", c.provider},
      {"model", c.model},
      {"priority", c.priority},
      {"team", c.team},
      {"budget",
       {{"iterations", opt_json(c.budget.iterations)},
        {"wall_time_s", opt_json(c.budget.wall_time_s)},
        {"tokens", opt_json(c.budget.tokens)},
        {"cost_usd", opt_json(c.budget.cost_usd)}}},
      {"spent",
       {{"iterations", c.spent_iterations},
        {"wall_time_s", c.spent_wall_time_s},
        {"tokens", c.spent_tokens},
        {"cost_usd", c.spent_cost_usd}}},
      {"best_candidate_id", opt_json(c.best_candidate_id)},
      {"best_score", opt_json(c.best_score)},
      {"settings", c.settings},
      {"created_at", store::format_time(c.created_at)},
      {"updated_at", store::format_time(c.updated_at)},
      {"started_at", opt_time(c.started_at)},
      {"finished_at", opt_time(c.finished_at)},
      {"stop_reason", opt_json(c.stop_reason)},
  };
}

json to_json(const store::workload_record& w) {
  return json{{"id", w.id}, {"key", w.key}, {"axes", w.axes}, {"weight", w.weight}};
}

json to_json(const store::operator_record& op, bool with_config) {
  json j{{"id", op.id},
         {"name", op.name},
         {"op_type", op.op_type},
         {"content_hash", op.content_hash},
         {"source_path", opt_json(op.source_path)},
         {"created_at", store::format_time(op.created_at)}};
  if (with_config) j["config"] = op.config;
  return j;
}

json to_json(const store::candidate_record& c, bool with_source) {
  json j{{"id", c.id},
         {"campaign_id", c.campaign_id},
         {"iteration_id", opt_json(c.iteration_id)},
         {"parent_id", opt_json(c.parent_id)},
         {"origin", store::to_string(c.origin)},
         {"source_hash", c.source_hash},
         {"launch_plan", c.launch_plan},
         {"parameters", c.parameters},
         {"provider", opt_json(c.provider)},
         {"model", opt_json(c.model)},
         {"llm_call_id", opt_json(c.llm_call_id)},
         {"note", opt_json(c.note)},
         {"created_at", store::format_time(c.created_at)}};
  if (with_source) j["source"] = c.source;
  return j;
}

json to_json(const store::compilation_record& c) {
  return json{{"id", c.id},
              {"parameter_values", c.parameter_values},
              {"arch", c.arch},
              {"options", c.options},
              {"status", c.status},
              {"log", c.log},
              {"registers", opt_json(c.registers)},
              {"shared_bytes", opt_json(c.shared_bytes)},
              {"spill_bytes", opt_json(c.spill_bytes)},
              {"duration_ms", opt_json(c.duration_ms)},
              {"cubin_hash", opt_json(c.cubin_hash)},
              {"compiler_version", opt_json(c.compiler_version)},
              {"created_at", store::format_time(c.created_at)}};
}

json to_json(const store::evaluation_record& e) {
  const auto& t = e.timing;
  return json{{"id", e.id},
              {"workload_id", e.workload_id},
              {"workload", e.workload_key},
              {"compilation_id", opt_json(e.compilation_id)},
              {"stage", e.stage},
              {"status", store::to_string(e.status)},
              {"max_abs_err", opt_json(e.max_abs_err)},
              {"max_rel_err", opt_json(e.max_rel_err)},
              {"matched_ratio", opt_json(e.matched_ratio)},
              {"timing",
               {{"median_ns", opt_json(t.median_ns)},
                {"min_ns", opt_json(t.min_ns)},
                {"mean_ns", opt_json(t.mean_ns)},
                {"stdev_ns", opt_json(t.stdev_ns)},
                {"q1_ns", opt_json(t.q1_ns)},
                {"q3_ns", opt_json(t.q3_ns)},
                {"samples", opt_json(t.samples)},
                {"stop_reason", opt_json(t.stop_reason)},
                {"discarded", opt_json(t.discarded)},
                {"detail", t.detail}}},
              {"correctness", e.correctness},
              {"counters", e.counters},
              {"sol_fraction", opt_json(e.sol_fraction)},
              {"device", e.device},
              {"seeds", e.seeds},
              {"error", opt_json(e.error)},
              {"created_at", store::format_time(e.created_at)}};
}

json to_json(const store::iteration_summary& s) {
  const auto& it = s.iteration;
  return json{{"id", it.id},
              {"number", it.number},
              {"status", it.status},
              {"strategy", it.strategy},
              {"parent_candidate_id", opt_json(it.parent_candidate_id)},
              {"dropout_p", opt_json(it.dropout_p)},
              {"prompt_info", it.prompt_info},
              {"note", opt_json(it.note)},
              {"started_at", store::format_time(it.started_at)},
              {"finished_at", opt_time(it.finished_at)},
              {"candidates", s.candidates},
              {"compile_errors", s.compile_errors},
              {"evaluations", s.evaluations},
              {"outcomes", s.outcomes},
              {"llm_calls", s.llm_calls},
              {"tokens", s.tokens},
              {"cost_usd", s.cost_usd},
              {"best_candidate_id", opt_json(s.best_candidate_id)},
              {"best_score", opt_json(s.best_score)}};
}

json to_json(const store::event_record& e) {
  return json{{"id", e.id},
              {"campaign_id", opt_json(e.campaign_id)},
              {"kind", e.kind},
              {"level", e.level},
              {"message", e.message},
              {"data", e.data},
              {"created_at", store::format_time(e.created_at)}};
}

void print_json(const json& j) {
  std::cout << j.dump(2) << '\n';
}

std::string fmt_opt(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : "-";
}

std::string fmt_double(double v, int digits) {
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "?";
}

std::string fmt_opt(const std::optional<double>& v, int digits) {
  return v ? fmt_double(*v, digits) : "-";
}

std::string fmt_sig(double v, int digits) {
  return fmt::format("{:.{}g}", v, digits);
}

std::string fmt_time(std::int64_t unix_ms) {
  std::string s = store::format_time(unix_ms);  // 2026-11-30T21:48:20.123Z
  if (s.size() == 24) s = s.substr(0, 10) + " " + s.substr(11, 8) + "Z";
  return s;
}

std::string fmt_time(const std::optional<std::int64_t>& unix_ms) {
  return unix_ms ? fmt_time(*unix_ms) : "-";
}

std::string fmt_duration_ms(std::int64_t ms) {
  if (ms < 0) return "-";
  if (ms < 60'000) return fmt_double(static_cast<double>(ms) / 1000.0, 1) + "s";
  const std::int64_t s = ms / 1000;
  char buf[48];
  int n = 0;
  if (s < 3600) {
    n = std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                      static_cast<long long>(s % 60));
  } else {
    n = std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                      static_cast<long long>((s % 3600) / 60));
  }
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "?";
}

std::string fmt_ns(const std::optional<double>& ns) {
  if (!ns) return "-";
  if (*ns >= 1e6) return fmt_double(*ns / 1e6, 3) + " ms";
  if (*ns >= 1e3) return fmt_double(*ns / 1e3, 2) + " us";
  return fmt_double(*ns, 0) + " ns";
}

void text_table::print(std::ostream& out) const {
  std::vector<std::size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (std::size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      s += cell;
      if (i + 1 < width.size()) s += std::string(width[i] - cell.size() + 2, ' ');
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << '\n';
  };
  line(header_);
  for (const auto& r : rows_) line(r);
}

}  // namespace kopt::cli
