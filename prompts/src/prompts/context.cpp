#include "prompts/context.hpp"

#include <cmath>
#include <cstdio>

#include "common/error.hpp"

namespace kopt::prompts {

using nlohmann::json;

namespace {

std::string from_snprintf(int n, const char* buf, std::size_t cap) {
  if (n < 0) return "?";
  return std::string(buf, std::min(static_cast<std::size_t>(n), cap - 1));
}

// `digits` after the decimal point ("%.*f").
std::string fixed(int digits, double v) {
  char buf[64];
  return from_snprintf(std::snprintf(buf, sizeof buf, "%.*f", digits, v), buf, sizeof buf);
}

// `digits` significant digits ("%.*g").
std::string significant(double v, int digits) {
  char buf[64];
  return from_snprintf(std::snprintf(buf, sizeof buf, "%.*g", digits, v), buf, sizeof buf);
}

std::string short_number(double v) { return significant(v, 4); }

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// A tolerance stated loosely: one significant digit, so the prompt conveys
// the order of magnitude the check expects without handing over the exact
// slack to aim for.
std::string loose(double v) {
  if (v == 0.0) return "0";
  return significant(v, 1);
}

std::string accuracy_text(const config::tolerance& t) {
  std::string s = "about atol " + loose(t.atol) + " + rtol " + loose(t.rtol) + " x |reference|";
  if (t.matched_ratio >= 1.0) {
    s += ", on every element";
  } else {
    s += ", on at least " + significant(t.matched_ratio * 100.0, 4) + " % of elements";
  }
  return s;
}

json tensor_json(const config::tensor& t, const config::tolerance& op_tol) {
  json j{{"name", t.name},
         {"shape", "[" + join(t.shape, ", ") + "]"},
         {"dtype", std::string(config::dtype_name(t.type))},
         {"in_place", t.in_place},
         {"description", t.description},
         {"accuracy", ""}};
  if (t.tol && (t.tol->atol != op_tol.atol || t.tol->rtol != op_tol.rtol ||
                t.tol->matched_ratio != op_tol.matched_ratio)) {
    j["accuracy"] = accuracy_text(*t.tol);
  }
  return j;
}

std::size_t utf8_safe_cut(const std::string& s, std::size_t n) {
  n = std::min(n, s.size());
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0u) == 0x80u) --n;
  return n;
}

// Texts end where the template's next line starts (often a closing fence).
std::string chomp(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// The plan as the model should write it: one launch per line, keys in the
// order the format lists them (nlohmann orders object keys alphabetically).
std::string candidate_plan_json(const config::candidate& c) {
  const json full = c.to_json();
  std::string out = "{\n  \"launches\": [\n";
  const json& launches = full.at("launches");
  for (std::size_t i = 0; i < launches.size(); ++i) {
    const json& l = launches[i];
    out += "    {";
    bool first = true;
    for (const char* key : {"kernel", "grid", "block", "cluster", "shared_bytes", "args"}) {
      if (!l.contains(key)) continue;
      out += std::string(first ? "" : ", ") + "\"" + key + "\": " + l.at(key).dump();
      first = false;
    }
    out += std::string("}") + (i + 1 < launches.size() ? "," : "") + "\n";
  }
  out += "  ]";
  for (const char* key : {"parameters", "workspaces", "compile_options"}) {
    if (full.contains(key) && !full.at(key).empty())
      out += std::string(",\n  \"") + key + "\": " + full.at(key).dump();
  }
  out += "\n}";
  return out;
}

}  // namespace

std::string format_bytes(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t u = 0;
  while (bytes >= 1024.0 && u + 1 < std::size(units)) {
    bytes /= 1024.0;
    ++u;
  }
  return short_number(bytes) + " " + units[u];
}

std::string format_rate(double per_s, const std::string& unit) {
  static const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  std::size_t p = 0;
  while (per_s >= 1000.0 && p + 1 < std::size(prefixes)) {
    per_s /= 1000.0;
    ++p;
  }
  return short_number(per_s) + " " + prefixes[p] + unit;
}

gpu_facts gpu_facts_from_table(const json& table, const std::string& gpu) {
  const auto gpus = table.find("gpus");
  if (gpus == table.end() || !gpus->is_object()) {
    throw kopt::config_error("the GPU peak table has no \"gpus\" object");
  }
  for (const auto& [key, entry] : gpus->items()) {
    bool hit = key == gpu;
    std::string display = key;
    if (const auto m = entry.find("match"); m != entry.end() && m->is_array()) {
      for (const auto& s : *m) {
        if (!s.is_string()) continue;
        if (display == key) display = s.get<std::string>();
        if (gpu.find(s.get<std::string>()) != std::string::npos) hit = true;
      }
    }
    if (!hit) continue;
    try {
      gpu_facts f;
      f.name = gpu == key ? display : gpu;
      f.sm_count = entry.value("sm_count", 0);
      f.l2_bytes = entry.value("l2_bytes", std::int64_t{0});
      f.dram_bytes_per_s = entry.value("dram_bytes_per_s", 0.0);
      if (const auto fl = entry.find("flops_per_s"); fl != entry.end() && fl->is_object()) {
        for (const auto& [unit, v] : fl->items()) f.flops_per_s[unit] = v.get<double>();
      }
      return f;
    } catch (const json::exception& e) {
      throw kopt::config_error("GPU peak table entry \"" + key + "\" is malformed: " + e.what());
    }
  }
  std::vector<std::string> keys;
  for (const auto& [key, entry] : gpus->items()) keys.push_back(key);
  throw kopt::config_error("no entry for GPU \"" + gpu + "\" in the peak table (have: " +
                           join(keys, ", ") + ")");
}

std::string trim_to_budget(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t cut = utf8_safe_cut(text, max_bytes);
  // Prefer a whole last line unless that loses more than half the budget.
  if (const auto nl = text.rfind('\n', cut == 0 ? 0 : cut - 1);
      nl != std::string::npos && nl + 1 >= max_bytes / 2) {
    cut = nl + 1;
  }
  std::string out = text.substr(0, cut);
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "[... " + std::to_string(text.size() - cut) + " bytes trimmed]";
  return out;
}

json build_context(const prompt_inputs& in) {
  if (in.op == nullptr) throw kopt::error("prompts::build_context: no operator given");
  const config::operator_config& op = *in.op;

  // --- operator: semantics only ---------------------------------------------
  json axes = json::array();
  for (const auto& a : op.axes) {
    axes.push_back({{"name", a.name},
                    {"kind", a.is_const    ? "const"
                             : a.is_expr() ? "expr"
                                           : "var"},
                    {"value", a.is_const    ? std::to_string(a.value)
                              : a.is_expr() ? "= " + a.expression
                                            : std::string("per workload")},
                    {"description", a.description}});
  }
  json scalars = json::array();
  for (const auto& s : op.scalars) {
    const bool is_float = config::dtype_is_float(s.type);
    scalars.push_back({{"name", s.name},
                       {"dtype", std::string(config::dtype_name(s.type))},
                       {"value", is_float ? significant(s.value, 6)
                                          : std::to_string(static_cast<std::int64_t>(s.value))},
                       {"description", s.description}});
  }
  json inputs = json::array();
  for (const auto& t : op.inputs) inputs.push_back(tensor_json(t, op.tol));
  json outputs = json::array();
  for (const auto& t : op.outputs) outputs.push_back(tensor_json(t, op.tol));

  const auto unit_peak = in.gpu.flops_per_s.find(op.roof.flop_unit);
  const bool have_peaks =
      in.gpu.dram_bytes_per_s > 0 && unit_peak != in.gpu.flops_per_s.end() && unit_peak->second > 0;
  double total_weight = 0;
  for (const auto& w : op.workloads) total_weight += w.weight;

  json workloads = json::array();
  std::map<std::string, double> t_sol_us;
  for (const auto& w : op.workloads) {
    std::vector<std::string> axis_text;
    // In the order the config declares the axes, not alphabetical.
    for (const auto& a : op.axes) {
      if (const auto it = w.axes.find(a.name); it != w.axes.end())
        axis_text.push_back(a.name + "=" + std::to_string(it->second));
    }
    json wj{{"id", w.id},
            {"axes", join(axis_text, ", ")},
            // Significant digits: with many workloads most shares are < 0.005.
            {"weight", significant(total_weight > 0 ? w.weight / total_weight : 0.0, 3)},
            {"description", w.description},
            {"t_sol_us", "?"},
            {"bound", "?"}};
    if (have_peaks) {
      try {
        const double flops = static_cast<double>(config::roofline_flops(op, w));
        const double bytes = static_cast<double>(config::roofline_bytes(op, w));
        const double t_mem = bytes / in.gpu.dram_bytes_per_s * 1e6;
        const double t_cmp = flops / unit_peak->second * 1e6;
        const double t = std::max(t_mem, t_cmp);
        t_sol_us[w.id] = t;
        wj["t_sol_us"] = significant(t, 3);
        wj["bound"] = t_cmp > t_mem ? "compute" : "memory";
      } catch (const kopt::error&) {
        // A config that loaded evaluates its own workloads; keep "?" if not.
      }
    }
    workloads.push_back(std::move(wj));
  }

  json operator_j{{"name", op.name},
                  {"op_type", op.op_type},
                  {"description", op.description},
                  {"tags", join(op.tags, ", ")},
                  {"axes", axes},
                  {"constraints", op.constraints},
                  {"scalars", scalars},
                  {"inputs", inputs},
                  {"outputs", outputs},
                  {"accuracy", accuracy_text(op.tol)},
                  {"flops", op.roof.flops},
                  {"flop_unit", op.roof.flop_unit},
                  {"bytes", op.roof.bytes ? *op.roof.bytes
                                          : std::string("every input read once, every output "
                                                        "written once")},
                  {"workloads", workloads}};

  // --- GPU -------------------------------------------------------------------
  json peaks = json::array();
  for (const auto& [unit, v] : in.gpu.flops_per_s) {
    peaks.push_back({{"unit", unit}, {"value", format_rate(v, "FLOP/s")}});
  }
  json gpu{{"name", in.gpu.name.empty() ? std::string("unknown GPU") : in.gpu.name},
           {"arch", in.gpu.arch},
           {"sm_count", in.gpu.sm_count > 0 ? std::to_string(in.gpu.sm_count) : "?"},
           {"l2", in.gpu.l2_bytes > 0 ? format_bytes(static_cast<double>(in.gpu.l2_bytes)) : "?"},
           {"dram_bandwidth", in.gpu.dram_bytes_per_s > 0
                                  ? format_rate(in.gpu.dram_bytes_per_s, "B/s")
                                  : std::string("?")},
           {"op_peak", unit_peak != in.gpu.flops_per_s.end()
                           ? format_rate(unit_peak->second, "FLOP/s") + " (" + op.roof.flop_unit + ")"
                           : std::string("?")},
           {"peaks", peaks}};

  // --- parent ----------------------------------------------------------------
  json parent{{"present", in.parent.has_value()},
              {"label", in.parent_label},
              {"source", ""},
              {"plan", ""},
              {"parameters", json::array()}};
  if (in.parent) {
    parent["source"] = chomp(trim_to_budget(in.parent->source, in.limits.source_bytes));
    parent["plan"] = candidate_plan_json(*in.parent);
    for (const auto& p : in.parent->parameters) {
      std::vector<std::string> values;
      for (auto v : p.values) values.push_back(std::to_string(v));
      parent["parameters"].push_back(
          {{"name", p.name}, {"values", join(values, ", ")}, {"default", p.default_value}});
    }
  }

  // --- measurements ----------------------------------------------------------
  json rows = json::array();
  double score_num = 0, score_den = 0;
  for (const auto& m : in.measurements) {
    const config::workload* w = op.find_workload(m.workload);
    const double weight = w != nullptr && total_weight > 0 ? w->weight / total_weight : 0.0;
    json r{{"workload", m.workload},
           {"weight", significant(weight, 3)},
           {"status", m.status},
           {"median_us", m.median_us ? fixed(2, *m.median_us) : "-"},
           {"sol", m.sol_fraction ? fixed(3, *m.sol_fraction) : "-"},
           {"t_sol_us", "-"}};
    if (const auto it = t_sol_us.find(m.workload); it != t_sol_us.end())
      r["t_sol_us"] = significant(it->second, 3);
    rows.push_back(std::move(r));
    score_den += weight;
    if (m.status == "ok" && m.sol_fraction) score_num += weight * *m.sol_fraction;
  }
  json measurements{{"present", !rows.empty()},
                    {"note", in.measurements_note},
                    {"rows", rows},
                    {"score", score_den > 0 ? fixed(3, score_num / score_den) : "-"},
                    {"coverage", rows.size() == op.workloads.size()
                                     ? "all " + std::to_string(rows.size()) + " workloads"
                                     : "the " + std::to_string(rows.size()) + " of " +
                                           std::to_string(op.workloads.size()) +
                                           " workloads measured"}};

  json diagnosis = json::array();
  for (const auto& f : in.diagnosis) diagnosis.push_back({{"cls", f.cls}, {"evidence", f.evidence}});

  json history = json::array();
  const std::size_t first =
      in.history.size() > in.limits.history ? in.history.size() - in.limits.history : 0;
  for (std::size_t i = first; i < in.history.size(); ++i) {
    const attempt& a = in.history[i];
    history.push_back({{"id", a.id}, {"summary", a.summary}, {"outcome", a.outcome}});
  }

  json snippets = json::array();
  for (std::size_t i = 0; i < in.snippets.size() && i < in.limits.snippets; ++i) {
    const snippet& s = in.snippets[i];
    snippets.push_back({{"id", s.id},
                        {"title", s.title},
                        {"text", chomp(trim_to_budget(s.text, in.limits.snippet_bytes))}});
  }

  return json{{"operator", operator_j},
              {"gpu", gpu},
              {"parent", parent},
              {"measurements", measurements},
              {"diagnosis", diagnosis},
              {"history", history},
              {"snippets", snippets},
              {"feedback", chomp(trim_to_budget(in.feedback, in.limits.feedback_bytes))},
              {"compile_log", chomp(trim_to_budget(in.compile_log, in.limits.compile_log_bytes))},
              {"failure", chomp(trim_to_budget(in.failure, in.limits.failure_bytes))}};
}

}  // namespace kopt::prompts
