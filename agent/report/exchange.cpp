#include "report/exchange.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "config/expr.hpp"
#include "config/operator.hpp"

namespace kopt::report {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// The object at j[key], or an empty one: a reference that outlives the
// loop (items() of a temporary would dangle in a range-for).
const json& member(const json& j, const std::string& key) {
  static const json empty = json::object();
  if (!j.is_object()) return empty;
  auto it = j.find(key);
  return it == j.end() || !it->is_object() ? empty : *it;
}

void write_text(const fs::path& p, const std::string& text) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  if (ec) throw kopt::error("cannot create " + p.parent_path().string() + ": " + ec.message());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  if (!f) throw kopt::error("cannot write " + p.string());
  f << text;
  f.close();
  if (!f) throw kopt::error("error writing " + p.string());
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw kopt::config_error("cannot read " + p.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string num(const std::optional<double>& v) {
  if (!v) return "";
  std::ostringstream os;
  os.precision(10);
  os << *v;
  return os.str();
}

std::string num(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : "";
}

// A stable id from a name, so that re-exports agree: 122 bits of the
// name's SHA-256 in an RFC 9562 version 8 (custom) UUID. Not version 5,
// which is defined as SHA-1 over a namespace and the name.
std::string uuid_of(const std::string& name) {
  std::string h = sha256_hex(name);
  h[12] = '8';
  h[16] = "89ab"[static_cast<unsigned char>(h[16]) % 4];
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20, 12);
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string safe_name(std::string s) {
  for (auto& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  return s.empty() ? "unnamed" : s;
}

const std::string& strategy_of(const campaign_data& d, const candidate_view& v) {
  static const std::string none;
  if (!v.iteration) return none;
  const auto* iv = d.iteration(*v.iteration);
  return iv ? iv->sum->iteration.strategy : none;
}

}  // namespace

void write_jsonl(const campaign_data& d, std::ostream& out, bool with_source) {
  for (const auto& c : d.candidates) {
    const auto& v = d.views.at(c.id);
    json comps = json::array();
    for (const auto& k : d.compilations.at(c.id))
      comps.push_back({{"id", k.id},
                       {"status", k.status},
                       {"parameters", k.parameter_values},
                       {"registers", opt(k.registers)},
                       {"shared_bytes", opt(k.shared_bytes)},
                       {"spill_bytes", opt(k.spill_bytes)},
                       {"duration_ms", opt(k.duration_ms)}});
    json evals = json::array();
    for (const auto& e : d.evaluations.at(c.id))
      evals.push_back({{"id", e.id},
                       {"stage", e.stage},
                       {"workload", e.workload_key},
                       {"status", store::to_string(e.status)},
                       {"median_ns", opt(e.timing.median_ns)},
                       {"stdev_ns", opt(e.timing.stdev_ns)},
                       {"samples", opt(e.timing.samples)},
                       {"sol_fraction", opt(e.sol_fraction)},
                       {"max_abs_err", opt(e.max_abs_err)},
                       {"max_rel_err", opt(e.max_rel_err)},
                       {"counters", e.counters},
                       {"error", opt(e.error)}});
    json j = {{"campaign_id", d.campaign.id},
              {"candidate_id", c.id},
              {"parent_id", opt(c.parent_id)},
              {"origin", store::to_string(c.origin)},
              {"iteration", opt(v.iteration)},
              {"strategy", strategy_of(d, v)},
              {"outcome", to_string(v.result)},
              {"furthest_stage", v.furthest_stage},
              {"sol_fraction", opt(v.score)},
              {"screen_sol_fraction", opt(v.screen_score)},
              {"attainable_sol_fraction", opt(v.attainable_score)},
              {"time_ratio_vs_parent", opt(v.time_ratio_vs_parent)},
              {"on_best_path", v.on_best_path},
              {"is_best", d.campaign.best_candidate_id && *d.campaign.best_candidate_id == c.id},
              {"source_hash", c.source_hash},
              {"launch_plan", c.launch_plan},
              {"parameters", c.parameters},
              {"provider", opt(c.provider)},
              {"model", opt(c.model)},
              {"llm_call_id", opt(c.llm_call_id)},
              {"note", opt(c.note)},
              {"created_at", store::format_time(c.created_at)},
              {"compilations", comps},
              {"evaluations", evals}};
    if (with_source) j["source"] = c.source;
    out << j.dump() << '\n';
  }
}

void write_csv(const campaign_data& d, std::ostream& out) {
  out << "campaign_id,candidate_id,parent_id,origin,iteration,strategy,outcome,candidate_sol_"
         "fraction,"
         "on_best_path,stage,workload,weight,status,median_ns,min_ns,mean_ns,stdev_ns,samples,sol_"
         "fraction,"
         "max_abs_err,max_rel_err,registers,shared_bytes,spill_bytes,created_at,error\n";
  for (const auto& c : d.candidates) {
    const auto& v = d.views.at(c.id);
    std::map<row_id, const store::compilation_record*> comps;
    for (const auto& k : d.compilations.at(c.id)) comps[k.id] = &k;
    for (const auto& e : d.evaluations.at(c.id)) {
      const store::compilation_record* k = nullptr;
      if (e.compilation_id)
        if (auto it = comps.find(*e.compilation_id); it != comps.end()) k = it->second;
      const auto* w = d.workload(e.workload_key);
      const std::vector<std::string> f = {std::to_string(d.campaign.id),
                                          std::to_string(c.id),
                                          num(c.parent_id),
                                          std::string(store::to_string(c.origin)),
                                          num(v.iteration),
                                          strategy_of(d, v),
                                          std::string(to_string(v.result)),
                                          num(v.score),
                                          v.on_best_path ? "1" : "0",
                                          e.stage,
                                          e.workload_key,
                                          w ? num(std::optional<double>(w->weight)) : "",
                                          std::string(store::to_string(e.status)),
                                          num(e.timing.median_ns),
                                          num(e.timing.min_ns),
                                          num(e.timing.mean_ns),
                                          num(e.timing.stdev_ns),
                                          num(e.timing.samples),
                                          num(e.sol_fraction),
                                          num(e.max_abs_err),
                                          num(e.max_rel_err),
                                          k ? num(k->registers) : "",
                                          k ? num(k->shared_bytes) : "",
                                          k ? num(k->spill_bytes) : "",
                                          store::format_time(e.created_at),
                                          e.error.value_or("")};
      for (std::size_t i = 0; i < f.size(); ++i) out << (i ? "," : "") << csv_field(f[i]);
      out << '\n';
    }
  }
}

std::string flashinfer_status(store::eval_status s) {
  using store::eval_status;
  switch (s) {
    case eval_status::ok:
      return "PASSED";
    case eval_status::compile_error:
    case eval_status::compile_timeout:
    case eval_status::rejected_format:
      return "COMPILE_ERROR";
    case eval_status::incorrect:
      return "INCORRECT_NUMERICAL";
    case eval_status::timeout:
      return "TIMEOUT";
    case eval_status::crashed:
    case eval_status::launch_error:
    case eval_status::rejected_integrity:
    case eval_status::skipped:
    case eval_status::reference_failed:
      return "RUNTIME_ERROR";
  }
  return "RUNTIME_ERROR";
}

std::vector<std::string> write_flashinfer_trace(const campaign_data& d, const fs::path& dir,
                                                const flashinfer_export_options& o) {
  if (!d.op)
    throw not_found_error("campaign " + std::to_string(d.campaign.id) + " has no operator row");
  const json& cfg = d.op->config;
  const std::string def_name = safe_name(d.op->name);
  const std::string op_type = safe_name(d.op->op_type.empty() ? "kopt" : d.op->op_type);
  std::string author = o.author;
  if (author.empty())
    author =
        "kopt-" + d.campaign.provider + (d.campaign.model.empty() ? "" : "-" + d.campaign.model);
  author = safe_name(author);

  // Candidates to export: scored, best first; the campaign's best always first.
  std::vector<const candidate_view*> ranked;
  for (const auto& [id, v] : d.views)
    if (v.score) ranked.push_back(&v);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](const candidate_view* a, const candidate_view* b) {
                     const bool ab = d.campaign.best_candidate_id == a->rec->id,
                                bb = d.campaign.best_candidate_id == b->rec->id;
                     if (ab != bb) return ab;
                     return *a->score > *b->score;
                   });
  if (ranked.empty()) {
    // Correct everywhere but unscored means the evaluations carry no
    // speed-of-light fractions (no peak figures for the GPU), which is a
    // different fix from a campaign without a correct candidate.
    bool correct_but_unscored = false;
    for (const auto& [id, v] : d.views) {
      const auto m = v.best_measures();
      if (m.empty()) continue;
      bool all_ok = true, any_sol = false;
      for (const auto& [w, x] : m) {
        all_ok = all_ok && x.status == store::eval_status::ok;
        any_sol = any_sol || x.sol.has_value();
      }
      correct_but_unscored = correct_but_unscored || (all_ok && !any_sol);
    }
    if (correct_but_unscored)
      throw not_found_error(
          "campaign " + std::to_string(d.campaign.id) +
          " has correct candidates but none with a speed-of-light score (its evaluations "
          "carry no SOL fractions: kopt had no peak figures for the GPU; see `kopt doctor`): "
          "nothing to export");
    throw not_found_error("campaign " + std::to_string(d.campaign.id) +
                          " has no candidate that is correct on every workload: nothing to export");
  }
  if (ranked.size() > std::max<std::size_t>(o.top, 1))
    ranked.resize(std::max<std::size_t>(o.top, 1));

  std::vector<std::string> files;
  auto put = [&](const fs::path& rel, const std::string& text) {
    write_text(dir / rel, text);
    files.push_back(rel.generic_string());
  };

  // Definition. FlashInfer-Trace has var and const axes only: kopt's expr
  // axes, and shapes that are expressions, become var axes whose value each
  // workload states. The kopt extension carries the config itself (the
  // CUDA reference, roofline, tolerances, generators, weights), so that an
  // import of this export gives back the same config.
  std::optional<config::operator_config> op_cfg;
  {
    const auto lr = config::load_operator_text(cfg.dump(), def_name + ".json", ".");
    if (lr.ok()) op_cfg = *lr.op;
  }
  json def = {{"name", def_name},
              {"op_type", op_type},
              {"description", cfg.value("description", "")},
              {"tags", cfg.value("tags", json::array())},
              {"axes", json::object()},
              {"inputs", json::object()},
              {"outputs", json::object()}};
  if (std::find(def["tags"].begin(), def["tags"].end(), json("source:kopt")) == def["tags"].end())
    def["tags"].push_back("source:kopt");
  std::vector<std::string> derived;             // names of var axes that kopt computes
  std::map<std::string, std::string> dim_axis;  // shape expression -> its axis
  for (const auto& [k, a] : member(cfg, "axes").items()) {
    const std::string type = a.value("type", "var");
    json ax = {{"type", type == "expr" ? "var" : type}};
    if (a.contains("value")) ax["value"] = a["value"];
    std::string desc = a.value("description", "");
    if (type == "expr") {
      desc += (desc.empty() ? "" : " ") + std::string("(= ") + a.value("expression", "") + ")";
      derived.push_back(k);
    }
    if (!desc.empty()) ax["description"] = desc;
    def["axes"][k] = ax;
  }
  for (const char* side : {"inputs", "outputs"})
    for (const auto& [k, t] : member(cfg, side).items()) {
      json shape = json::array();
      for (const auto& dim : t.value("shape", json::array())) {
        const std::string text = dim.is_string() ? dim.get<std::string>() : dim.dump();
        if (is_identifier(text) && def["axes"].contains(text)) {
          shape.push_back(text);
          continue;
        }
        auto [it, fresh] = dim_axis.try_emplace(text, "");
        if (fresh) {
          it->second = "kopt_dim" + std::to_string(dim_axis.size() - 1);
          def["axes"][it->second] = {{"type", "var"}, {"description", "= " + text}};
          derived.push_back(it->second);
        }
        shape.push_back(it->second);
      }
      def[side][k] = {{"shape", shape}, {"dtype", t.value("dtype", "")}};
      if (t.contains("description") && !t["description"].get<std::string>().empty())
        def[side][k]["description"] = t["description"];
    }
  for (const auto& [k, s] : member(cfg, "scalars").items())
    def["inputs"][k] = {{"shape", nullptr}, {"dtype", s.value("dtype", "float32")}};
  if (cfg.contains("constraints")) def["constraints"] = cfg["constraints"];
  const std::string ref_src = cfg.contains("reference") ? cfg["reference"].value("source", "") : "";
  std::string ref_comment;
  {
    std::istringstream is(ref_src);
    std::string line;
    while (std::getline(is, line)) ref_comment += "# " + line + "\n";
  }
  def["reference"] =
      "# Exported from kopt: the reference of this operator is a CUDA kernel run by kopt's "
      "worker,\n"
      "# not PyTorch. It is reproduced below as comments; write a PyTorch `run` before using this\n"
      "# definition with flashinfer-bench.\n" +
      ref_comment +
      "def run(*args):\n    raise NotImplementedError('kopt reference is CUDA; see comments')\n";
  json ext_cfg = cfg;
  ext_cfg.erase("workloads");  // each workload line carries its own part
  def[kopt_extension] = {{"version", 1}, {"config", ext_cfg}};
  put(fs::path("definitions") / op_type / (def_name + ".json"), def.dump(2) + "\n");

  // Workloads (var axes, derived axes' values and scalar overrides; inputs
  // are random: kopt generates them from seeds).
  std::map<std::string, json> wl_json;
  std::string wl_lines;
  const json scalars = cfg.value("scalars", json::object());
  // In the config's order (the store lists them by key), so that an
  // import gives the same workloads list back.
  std::vector<const store::workload_record*> in_order;
  for (const auto& cw : cfg.value("workloads", json::array()))
    if (const auto* w = d.workload(cw.value("id", ""))) in_order.push_back(w);
  for (const auto& w : d.workloads)
    if (std::find(in_order.begin(), in_order.end(), &w) == in_order.end()) in_order.push_back(&w);
  for (const auto* wp : in_order) {
    const auto& w = *wp;
    json inputs = json::object();
    for (const auto& [k, t] : member(cfg, "inputs").items()) inputs[k] = {{"type", "random"}};
    json wcfg;
    for (const auto& cw : cfg.value("workloads", json::array()))
      if (cw.value("id", "") == w.key) wcfg = cw;
    for (const auto& [k, s] : scalars.items()) {
      json value = s.value("value", json(0));
      if (wcfg.is_object() && wcfg.contains("scalars") && wcfg["scalars"].contains(k))
        value = wcfg["scalars"][k];
      inputs[k] = {{"type", "scalar"}, {"value", value}};
    }
    json axes = w.axes;
    if (op_cfg && !derived.empty()) {
      if (const auto* cw = op_cfg->find_workload(w.key)) {
        const auto names = config::workload_names(*op_cfg, *cw);
        for (const auto& a : derived) {
          if (auto it = names.find(a); it != names.end()) {
            axes[a] = it->second;
            continue;
          }
          for (const auto& [text, ax] : dim_axis)
            if (ax == a) {
              try {
                axes[a] = expr::evaluate(text, expr::map_resolver(names));
              } catch (const expr::expr_error&) {
              }
            }
        }
      }
    }
    json wj = {{"uuid", uuid_of(def_name + "/" + w.key)}, {"axes", axes}, {"inputs", inputs}};
    if (wcfg.is_object()) {
      json ext = wcfg;
      ext.erase("axes");
      wj[kopt_extension] = ext;
    }
    wl_json[w.key] = wj;
    wl_lines += json{{"definition", def_name},
                     {"workload", wj},
                     {"solution", nullptr},
                     {"evaluation", nullptr}}
                    .dump() +
                "\n";
  }
  put(fs::path("workloads") / op_type / (def_name + ".jsonl"), wl_lines);

  // Reference timings per workload, when the reference was measured.
  std::map<std::string, double> ref_ms;
  if (const auto* ref = d.by_origin(store::candidate_origin::reference))
    for (const auto& [k, m] : ref->best_measures())
      if (m.status == store::eval_status::ok && m.median_ns) ref_ms[k] = *m.median_ns / 1e6;

  std::string trace_lines;
  for (const auto* v : ranked) {
    const auto& c = *v->rec;
    const std::string sol_name = safe_name(def_name + "_kopt_c" + std::to_string(d.campaign.id) +
                                           "_k" + std::to_string(c.id));
    json device;
    for (const auto& e : d.evaluations.at(c.id))
      if (e.device.is_object() && !e.device.empty()) device = e.device;
    std::string hardware = device.is_object() ? device.value("name", "") : "";
    for (auto& ch : hardware)
      if (ch == ' ') ch = '_';
    std::string entry = "kernel";
    if (c.launch_plan.contains("launches") && !c.launch_plan["launches"].empty())
      entry = c.launch_plan["launches"][0].value("kernel", "kernel");
    json cand = c.launch_plan;
    cand["source_file"] = "kernel.cu";
    json params = json::object();
    for (const auto& k : d.compilations.at(c.id))
      if (k.status == "ok") params = k.parameter_values;
    json solution = {
        {"name", sol_name},
        {"definition", def_name},
        {"description", "kopt campaign " + std::to_string(d.campaign.id) + ", candidate " +
                            std::to_string(c.id) + " (" + std::string(store::to_string(c.origin)) +
                            "), " + pct(v->score) +
                            " of speed of light (weighted). Device code plus a kopt launch plan "
                            "(kopt_candidate.json); "
                            "no host launcher: run it with kopt or write a binding."},
        {"author", author},
        {"spec",
         {{"language", "cuda"},
          {"target_hardware", json::array({hardware.empty() ? std::string("cuda") : hardware})},
          {"entry_point", "kernel.cu::" + entry},
          {"destination_passing_style", true},
          {"dependencies", json::array()}}},
        {"sources",
         json::array({{{"path", "kernel.cu"}, {"content", c.source}},
                      {{"path", "kopt_candidate.json"}, {"content", cand.dump(2) + "\n"}},
                      {{"path", "kopt_parameters.json"}, {"content", params.dump(2) + "\n"}}})}};
    put(fs::path("solutions") / author / op_type / def_name / (sol_name + ".json"),
        solution.dump(2) + "\n");

    json libs = json::object();
    if (device.is_object())
      for (const char* k : {"driver_version", "cuda_runtime", "nvrtc_version", "cupti_api"})
        if (device.contains(k) && !device[k].is_null())
          libs[k] = device[k].is_string() ? device[k].get<std::string>() : device[k].dump();
    for (const auto& [k, m] : v->best_measures()) {
      if (!wl_json.count(k)) continue;
      const std::string status = flashinfer_status(m.status);
      // FlashInfer-Trace's Evaluation: hardware and timestamp are non-empty
      // strings; correctness only for PASSED and INCORRECT_NUMERICAL,
      // performance only for PASSED; their numbers are floats (a member
      // kopt did not measure is left out, never null).
      std::string when = d.ended_ms ? store::format_time(*d.ended_ms) : std::string();
      if (when.empty())
        for (const auto& e : d.evaluations.at(c.id))
          if (e.workload_key == k) when = store::format_time(e.created_at);
      json ev = {
          {"status", status},
          {"log", m.error.value_or("")},
          {"environment",
           {{"hardware", hardware.empty() ? std::string("unknown") : hardware}, {"libs", libs}}},
          {"timestamp", when.empty() ? std::string("unknown") : when}};
      if (status == "PASSED" || status == "INCORRECT_NUMERICAL") {
        json corr = json::object();
        if (m.max_rel_err) corr["max_relative_error"] = *m.max_rel_err;
        if (m.max_abs_err) corr["max_absolute_error"] = *m.max_abs_err;
        ev["correctness"] = corr;
      }
      if (status == "PASSED") {
        json perf = json::object();
        if (m.median_ns) perf["latency_ms"] = *m.median_ns / 1e6;
        if (auto r = ref_ms.find(k); r != ref_ms.end() && m.median_ns && *m.median_ns > 0) {
          perf["reference_latency_ms"] = r->second;
          perf["speedup_factor"] = r->second / (*m.median_ns / 1e6);
        }
        ev["performance"] = perf;
      }
      ev["kopt"] = {{"stage", m.stage},
                    {"latency_statistic", "median"},
                    {"sol_fraction", opt(m.sol)},
                    {"candidate_id", c.id},
                    {"campaign_id", d.campaign.id}};
      trace_lines += json{{"definition", def_name},
                          {"solution", sol_name},
                          {"workload", wl_json[k]},
                          {"evaluation", ev}}
                         .dump() +
                     "\n";
    }
  }
  put(fs::path("traces") / author / op_type / (def_name + ".jsonl"), trace_lines);
  return files;
}

// ---------------------------------------------------------------- import ---

json imported_definition::to_json() const {
  return {{"name", name},
          {"status", status},
          {"file", file.empty() ? json(nullptr) : json(file.string())},
          {"workloads", workloads},
          {"problems", problems},
          {"notes", notes}};
}

namespace {

bool looks_like_definition(const json& j) {
  return j.is_object() && j.contains("name") && j.contains("axes") && j.contains("inputs") &&
         j.contains("outputs");
}

const std::set<std::string>& kopt_dtypes() {
  static const std::set<std::string> s{"float64",       "float32",     "float16", "bfloat16",
                                       "float8_e4m3fn", "float8_e5m2", "int64",   "int32",
                                       "int16",         "int8",        "uint8",   "bool"};
  return s;
}

std::vector<json> read_jsonl(const fs::path& p, std::vector<std::string>& problems) {
  std::vector<json> out;
  std::istringstream is(read_text(p));
  std::string line;
  int n = 0;
  while (std::getline(is, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out.push_back(json::parse(line));
    } catch (const json::exception& e) {
      problems.push_back(p.string() + ":" + std::to_string(n) + ": not JSON: " + e.what());
    }
  }
  return out;
}

}  // namespace

namespace {

// A workload line of either layout: FlashInfer-Trace wraps it
// ({"definition", "workload", ...}); SOL-ExecBench stores bare Workload
// objects ({"uuid", "axes", "inputs"[, "tolerance"]}).
bool is_bare_workload(const json& j) {
  return j.is_object() && j.contains("axes") && j["axes"].is_object() &&
         (j.contains("uuid") || j.contains("inputs")) && !j.contains("workload");
}

// Kinds whose FLOP count follows from the shapes alone, and kinds that are
// memory-bound by nature (SOL from bytes alone is right for them).
bool is_gemm_kind(const std::string& op_type) {
  return op_type == "gemm" || op_type == "matmul" || op_type == "linear";
}
bool is_memory_bound_kind(const std::string& t) {
  static const std::vector<std::string> kinds{
      "rmsnorm", "layernorm", "norm",   "softmax", "rope",      "elementwise", "add",
      "copy",    "transpose", "quant",  "cast",    "embedding", "sampling",    "activation",
      "reduce",  "concat",    "gather", "scatter", "topk"};
  for (const auto& k : kinds)
    if (t.find(k) != std::string::npos) return true;
  return false;
}

// 2 * (product of the output's dimensions) * (product of the contracted
// dimensions: those of the first input that the output does not have).
// Empty when the shapes are not those of one matrix product.
std::string gemm_flops(const json& def) {
  const json& ins = member(def, "inputs");
  const json& outs = member(def, "outputs");
  if (outs.size() != 1 || ins.size() < 2) return "";
  const json& out_shape = outs.begin()->value("shape", json());
  const json& a_shape = ins.begin()->value("shape", json());
  if (!out_shape.is_array() || !a_shape.is_array() || out_shape.empty()) return "";
  std::set<std::string> out_dims;
  std::string f = "2";
  for (const auto& d : out_shape) {
    if (!d.is_string()) return "";
    out_dims.insert(d.get<std::string>());
    f += " * " + d.get<std::string>();
  }
  bool contracted = false;
  for (const auto& d : a_shape) {
    if (!d.is_string()) return "";
    if (!out_dims.count(d.get<std::string>())) {
      f += " * " + d.get<std::string>();
      contracted = true;
    }
  }
  return contracted ? f : "";
}

// Workloads kept when there are more than `keep`: `keep` targets evenly
// spaced over the logarithm of the size range, each taking the nearest
// workload not yet taken. The smallest and largest are always kept, and
// sparse extremes (decode shapes, large prefill) survive while a dense
// middle is thinned, instead of the file's head being kept.
std::vector<std::size_t> stratified(const std::vector<double>& sizes, std::size_t keep) {
  const std::size_t n = sizes.size();
  if (keep >= n) {
    std::vector<std::size_t> all(n);
    for (std::size_t i = 0; i < n; ++i) all[i] = i;
    return all;
  }
  std::vector<double> lg(n);
  double lo = 0, hi = 0;
  for (std::size_t i = 0; i < n; ++i) {
    lg[i] = std::log(std::max(sizes[i], 1.0));
    lo = i == 0 ? lg[i] : std::min(lo, lg[i]);
    hi = i == 0 ? lg[i] : std::max(hi, lg[i]);
  }
  std::set<std::size_t> picked;
  for (std::size_t t = 0; t < keep; ++t) {
    const double target =
        keep == 1 ? lo : lo + (hi - lo) * static_cast<double>(t) / static_cast<double>(keep - 1);
    std::size_t best = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (picked.count(i)) continue;
      if (best == n || std::abs(lg[i] - target) < std::abs(lg[best] - target)) best = i;
    }
    if (best < n) picked.insert(best);
  }
  return {picked.begin(), picked.end()};  // file order
}

std::string axes_text(const json& axes) {
  std::string s;
  for (const auto& [a, v] : axes.items()) s += (s.empty() ? "" : ",") + a + "=" + v.dump();
  return s;
}

}  // namespace

std::vector<imported_definition> import_flashinfer_trace(const fs::path& dir,
                                                         const import_options& o) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw config_error(dir.string() + " is not a directory");
  std::vector<std::string> read_problems;
  std::map<std::string, std::pair<json, fs::path>> defs;
  std::map<std::string, std::vector<json>> workloads;  // definition -> workload objects
  // A workload appears once in workloads/ and again in every trace of it:
  // the same uuid is the same workload.
  std::map<std::string, std::set<std::string>> seen_uuid;
  std::vector<fs::path> files;
  for (auto it =
           fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_regular_file()) files.push_back(it->path());
  }
  // Workload lists before traces: the first line of a workload (by uuid)
  // decides its place, and workloads/ keeps the definition's order.
  auto in_traces = [&](const fs::path& p) {
    for (const auto& part : fs::relative(p, dir, ec)) if (part == "traces") return true;
    return false;
  };
  std::sort(files.begin(), files.end(), [&](const fs::path& a, const fs::path& b) {
    const bool ta = in_traces(a), tb = in_traces(b);
    return ta != tb ? tb : a < b;
  });
  std::map<fs::path, std::vector<std::string>> defs_in_dir;  // directory -> definition names
  for (const auto& p : files) {
    if (p.extension() != ".json") continue;
    json j;
    try {
      j = json::parse(read_text(p));
    } catch (const json::exception&) {
      continue;  // not every JSON file in a data set is a definition
    }
    if (!looks_like_definition(j) || !j["name"].is_string()) continue;
    const std::string name = j["name"].get<std::string>();
    if (defs.count(name)) {
      read_problems.push_back("definition " + name + " appears again in " + p.string() +
                              " (kept the one in " + defs[name].second.string() + ")");
      continue;
    }
    defs[name] = {j, p};
    defs_in_dir[p.parent_path()].push_back(name);
  }
  auto add_workload = [&](const std::string& def_name, const json& w) {
    const std::string uuid = w.value("uuid", "");
    if (!uuid.empty() && !seen_uuid[def_name].insert(uuid).second) return;
    workloads[def_name].push_back(w);
  };
  for (const auto& p : files) {
    if (p.extension() != ".jsonl") continue;
    // Bare workloads belong to the definition named like the file
    // (workloads/<op_type>/<name>.jsonl) or, in SOL-ExecBench's layout, to
    // the one definition of the same directory (definition.json beside
    // workload.jsonl).
    std::string bare_owner;
    if (defs.count(p.stem().string()))
      bare_owner = p.stem().string();
    else if (auto it = defs_in_dir.find(p.parent_path());
             it != defs_in_dir.end() && it->second.size() == 1)
      bare_owner = it->second.front();
    std::size_t orphans = 0;
    for (auto& line : read_jsonl(p, read_problems)) {
      if (line.is_object() && line.contains("workload") && line["workload"].is_object()) {
        add_workload(line.value("definition", ""), line["workload"]);
      } else if (is_bare_workload(line)) {
        if (bare_owner.empty())
          ++orphans;
        else
          add_workload(bare_owner, line);
      }
    }
    if (orphans)
      read_problems.push_back(p.string() + ": " + std::to_string(orphans) +
                              " workload(s) not imported: no definition named " +
                              p.stem().string() + " and not exactly one definition beside it");
  }
  if (defs.empty())
    throw config_error(
        "no FlashInfer-Trace or SOL-ExecBench definition (JSON with name, axes, inputs, outputs) "
        "under " +
        dir.string());

  std::vector<imported_definition> out;
  for (const auto& [name, dp] : defs) {
    const json& def = dp.first;
    imported_definition r;
    r.name = name;
    const std::string op_name = safe_name(name);
    bool blocked = false;
    auto problem = [&](const std::string& s) { r.problems.push_back(s); };
    auto note = [&](const std::string& s) { r.notes.push_back(s); };
    json cfg;

    if (def.contains(kopt_extension) && def[kopt_extension].is_object() &&
        def[kopt_extension].contains("config") && def[kopt_extension]["config"].is_object()) {
      // Written by kopt: the extension carries the whole config (reference,
      // roofline, tolerances, generators, campaign); the workload lines
      // carry each workload's id, weight, scalars and tolerance.
      cfg = def[kopt_extension]["config"];
      json wl = json::array();
      std::set<std::string> var_axes;
      for (const auto& [k, a] : member(cfg, "axes").items())
        if (a.value("type", "var") == "var") var_axes.insert(k);
      std::size_t plain = 0;
      for (const auto& w : workloads[name]) {
        const json& ext = member(w, kopt_extension);
        if (ext.empty()) {
          ++plain;
          continue;
        }
        json axes = json::object();
        for (const auto& [a, v] : member(w, "axes").items())
          if (var_axes.count(a)) axes[a] = v;
        json wj = ext;
        wj["axes"] = axes;
        wl.push_back(wj);
      }
      if (plain)
        note(std::to_string(plain) +
             " workload(s) without kopt's extension were not imported (the config's own are)");
      if (!wl.empty()) cfg["workloads"] = wl;
      note("read kopt's extension (\"" + std::string(kopt_extension) +
           "\"): the config as exported, reference and weights included");
      r.workloads = cfg.value("workloads", json::array()).size();
    } else {
      cfg = {{"name", op_name},
             {"op_type", def.value("op_type", "")},
             {"description", def.value("description", json("")).is_string()
                                 ? def.value("description", "")
                                 : std::string()},
             {"tags", def.value("tags", json::array())},
             {"axes", json::object()},
             {"inputs", json::object()},
             {"outputs", json::object()}};
      std::vector<std::string> var_axes;  // definition order
      std::vector<std::string> axis_names;
      for (const auto& [k, a] : member(def, "axes").items()) {
        const std::string type = a.value("type", "var");
        json ax = {{"type", type}};
        axis_names.push_back(k);
        if (type == "const") {
          ax["value"] = a.value("value", 1);
        } else if (type == "expr") {
          const std::string e = a.value("expression", "");
          ax["expression"] = e;
          try {
            (void)expr::expression::parse(e);
          } catch (const expr::expr_error& x) {
            problem("expr axis '" + k + "' (\"" + e +
                    "\") is not an expression kopt evaluates: " + x.what());
            blocked = true;
          }
        } else if (type == "var") {
          var_axes.push_back(k);
        } else {
          problem("axis '" + k + "' has type '" + type + "' (kopt has var, const and expr)");
          blocked = true;
        }
        if (a.contains("description") && a["description"].is_string())
          ax["description"] = a["description"];
        if (!is_identifier(k)) {
          problem("axis '" + k + "' is not an identifier kopt accepts");
          blocked = true;
        }
        cfg["axes"][k] = ax;
      }
      json scalars = json::object();
      std::map<std::string, std::string> scalar_dtypes;
      for (const char* side : {"inputs", "outputs"}) {
        for (const auto& [k, t] : member(def, side).items()) {
          const std::string dtype = t.value("dtype", "");
          if (t.contains("shape") && t["shape"].is_null()) {
            if (std::string(side) == "outputs") {
              problem("output '" + k + "' is a scalar: kopt outputs are tensors (use shape [])");
              blocked = true;
              continue;
            }
            static const std::set<std::string> scalar_ok{"float32", "float64", "int32", "int64"};
            std::string kd = dtype;
            if (!scalar_ok.count(dtype)) {
              if (dtype == "float16" || dtype == "bfloat16") {
                kd = "float32";
                note("scalar '" + k + "' is " + dtype +
                     " in FlashInfer; kopt passes scalars as float32");
              } else {
                problem("scalar input '" + k + "' has dtype " + dtype +
                        ", which kopt scalars do not support");
                blocked = true;
                continue;
              }
            }
            scalar_dtypes[k] = kd;
            scalars[k] = {{"dtype", kd}, {"value", kd.rfind("int", 0) == 0 ? json(0) : json(0.0)}};
            if (t.contains("description") && t["description"].is_string())
              scalars[k]["description"] = t["description"];
            continue;
          }
          if (!kopt_dtypes().count(dtype)) {
            problem(std::string(side) + " '" + k + "' has dtype " + dtype +
                    ", which kopt does not support");
            blocked = true;
            continue;
          }
          json tj = {{"shape", t.value("shape", json::array())}, {"dtype", dtype}};
          if (t.contains("description") && t["description"].is_string())
            tj["description"] = t["description"];
          if (std::string(side) == "inputs" &&
              (dtype.rfind("int", 0) == 0 || dtype == "uint8" || dtype == "bool")) {
            problem("input '" + k + "' is " + dtype +
                    ": kopt needs a generator (int_range, permutation or kernel) that yields "
                    "valid values; random data has no range to derive one from");
            blocked = true;
          }
          cfg[side][k] = tj;
        }
      }
      if (!scalars.empty()) cfg["scalars"] = scalars;

      // Constraints kopt can check go to `constraints`; the others (e.g.
      // ones that read tensor contents) stay in the description.
      if (def.contains("constraints") && def["constraints"].is_array()) {
        std::vector<std::string> known = axis_names;
        for (const auto& [k, dt] : scalar_dtypes)
          if (dt.rfind("int", 0) == 0) known.push_back(k);
        json checked = json::array();
        std::string unchecked;
        for (const auto& c : def["constraints"]) {
          const std::string text = c.is_string() ? c.get<std::string>() : c.dump();
          std::string why;
          try {
            const auto cond = expr::condition::parse(text);
            for (const auto& n : cond.names())
              if (std::find(known.begin(), known.end(), n) == known.end())
                why = "'" + n + "' is not an axis or integer scalar";
          } catch (const expr::expr_error& x) {
            why = x.what();
          }
          if (why.empty()) {
            checked.push_back(text);
          } else {
            unchecked += (unchecked.empty() ? "" : "; ") + text;
            note("constraint \"" + text + "\" is not one kopt can check (" + why +
                 "): kept in the description");
          }
        }
        if (!checked.empty()) cfg["constraints"] = checked;
        if (!unchecked.empty())
          cfg["description"] = cfg["description"].get<std::string>() +
                               (cfg["description"].get<std::string>().empty() ? "" : " ") +
                               "Constraints: " + unchecked + ".";
      }

      // Workloads: distinct var-axis assignments (with their scalars and
      // tolerance); weight = how many source workloads share them (their
      // frequency in captured traffic; 1 each in a curated set).
      struct distinct_wl {
        json axes, scalars, tol;
        double count = 0;
      };
      std::map<std::string, std::size_t> index;
      std::vector<distinct_wl> distinct;
      bool saw_safetensors = false, saw_custom = false;
      std::size_t incomplete = 0;
      std::set<std::string> tol_unsupported;
      for (const auto& w : workloads[name]) {
        json axes = json::object();
        bool ok = true;
        for (const auto& a : var_axes) {
          if (!w.contains("axes") || !w["axes"].contains(a) || !w["axes"][a].is_number_integer() ||
              w["axes"][a].get<std::int64_t>() < 1) {
            ok = false;
            break;
          }
          axes[a] = w["axes"][a];
        }
        if (!ok) {
          ++incomplete;
          continue;
        }
        json sc = json::object();
        for (const auto& [k, in] : member(w, "inputs").items()) {
          const std::string type = in.value("type", "");
          if (type == "safetensors") saw_safetensors = true;
          if (type == "custom") saw_custom = true;
          if (type == "scalar" && scalar_dtypes.count(k) && in.contains("value") &&
              in["value"].is_number())
            sc[k] = in["value"];
        }
        // SOL-ExecBench's per-workload bounds, in kopt's names.
        json tol;
        for (const auto& [k, v] : member(w, "tolerance").items()) {
          if (k == "max_atol" && v.is_number())
            tol["atol"] = v;
          else if (k == "max_rtol" && v.is_number())
            tol["rtol"] = v;
          else if (k == "required_matched_ratio" && v.is_number())
            tol["matched_ratio"] = v;
          else if (!v.is_null() && !(v.is_boolean() && !v.get<bool>()))
            tol_unsupported.insert(k);
        }
        const std::string key = axes.dump() + sc.dump() + tol.dump();
        auto [it, fresh] = index.try_emplace(key, distinct.size());
        if (fresh) distinct.push_back({axes, sc, tol, 0.0});
        distinct[it->second].count += 1.0;
      }
      if (incomplete)
        note(std::to_string(incomplete) +
             " workload(s) lack a value for some var axis and were skipped");
      if (saw_safetensors)
        note(
            "safetensors inputs are not used: kopt generates inputs from seeds (say how in each "
            "input's generator)");
      if (saw_custom)
        note(
            "\"custom\" inputs come from the definition's Python entry point, which kopt cannot "
            "run: give those inputs a generator");
      if (!tol_unsupported.empty()) {
        std::string t;
        for (const auto& k : tol_unsupported) t += (t.empty() ? "" : ", ") + k;
        note("tolerance field(s) " + t +
             " have no kopt equivalent and are not enforced (atol, rtol, matched_ratio are)");
      }
      std::vector<std::size_t> keep(distinct.size());
      for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = i;
      if (!o.all_workloads && distinct.size() > o.max_workloads) {
        std::vector<double> sizes;
        for (const auto& d : distinct) {
          double size = 1;
          for (const auto& [a, v] : d.axes.items()) size *= v.get<double>();
          sizes.push_back(size);
        }
        keep = stratified(sizes, o.max_workloads);
        std::set<std::size_t> kept(keep.begin(), keep.end());
        std::string dropped;
        for (std::size_t i = 0; i < distinct.size(); ++i)
          if (!kept.count(i)) dropped += (dropped.empty() ? "" : " ") + axes_text(distinct[i].axes);
        note("kept " + std::to_string(keep.size()) + " of " + std::to_string(distinct.size()) +
             " distinct workloads, spread evenly over the logarithm of their size (product of "
             "the var axes; the smallest and largest kept); --all keeps every one, --max-workloads N sets the "
             "number. Dropped: " +
             dropped);
      }
      json wl = json::array();
      for (std::size_t i : keep) {
        const auto& d = distinct[i];
        std::string id;
        for (const auto& [a, v] : d.axes.items())
          id += (id.empty() ? "" : "_") + a + std::to_string(v.get<std::int64_t>());
        if (id.empty()) id = "w";
        id = safe_name(id) + "_" + std::to_string(wl.size());
        json wj = {{"id", id}, {"axes", d.axes}, {"weight", d.count}};
        if (!d.scalars.empty()) wj["scalars"] = d.scalars;
        if (!d.tol.is_null()) wj["tolerance"] = d.tol;
        wl.push_back(wj);
      }
      // A scalar's default value: the first workload's.
      for (const auto& [k, dt] : scalar_dtypes)
        if (!wl.empty() && wl[0].contains("scalars") && wl[0]["scalars"].contains(k))
          cfg["scalars"][k]["value"] = wl[0]["scalars"][k];
      if (var_axes.empty() && wl.empty())
        wl.push_back({{"id", "const"}, {"axes", json::object()}, {"weight", 1.0}});
      if (wl.empty()) {
        problem(
            "no workload with a value for every var axis (a workload.jsonl beside the "
            "definition, or workloads/**/" +
            name + ".jsonl)");
        blocked = true;
      }
      cfg["workloads"] = wl;
      r.workloads = wl.size();
      if (distinct.size() > 1 && std::all_of(distinct.begin(), distinct.end(),
                                             [](const distinct_wl& d) { return d.count == 1.0; }))
        note(
            "every workload has weight 1: the source gives no frequencies (set `weight` to "
            "the traffic share of each shape)");

      // The roofline: FLOPs derived where the kind fixes them; otherwise an
      // explicit choice, never a silent zero.
      const std::string op_type = cfg["op_type"].get<std::string>();
      if (is_gemm_kind(op_type)) {
        const std::string f = gemm_flops(def);
        if (!f.empty()) {
          cfg["roofline"] = {{"flops", f}, {"flop_unit", "fp32"}};
          const std::string dt = member(def, "inputs").begin()->value("dtype", "");
          if (dt == "float16" || dt == "bfloat16") cfg["roofline"]["flop_unit"] = "fp16_tensor";
          note("roofline flops derived for " + op_type + ": " + f + " (flop_unit " +
               cfg["roofline"]["flop_unit"].get<std::string>() + "; check it)");
        } else {
          problem("op_type " + op_type +
                  " but the shapes are not one matrix product: set roofline.flops");
          blocked = true;
        }
      } else if (is_memory_bound_kind(op_type)) {
        cfg["roofline"] = {{"flops", "0"}};
        note("op_type " + op_type +
             " is memory-bound: roofline flops \"0\", speed of light from bytes moved");
      } else {
        problem("roofline.flops unknown for op_type \"" + op_type +
                "\": kopt derives it for gemm and takes 0 for memory-bound kinds; set "
                "`roofline` (flops, flop_unit) by hand");
        blocked = true;
      }

      // The reference.
      if (def.contains("reference") && def["reference"].is_string()) {
        const fs::path py = o.out_dir / (op_name + ".reference.py");
        write_text(py, def["reference"].get<std::string>());
        note("the PyTorch reference saved to " + py.string() + " (kopt cannot run it)");
      }
      cfg["campaign"] = {{"provider", o.provider}, {"budget", {{"iterations", 20}}}};
      if (!o.model.empty()) cfg["campaign"]["model"] = o.model;
    }

    bool have_ref = cfg.contains("reference") && cfg["reference"].is_object();
    if (!have_ref && !o.reference_dir.empty()) {
      const fs::path rp = o.reference_dir / (name + ".json");
      if (fs::exists(rp, ec)) {
        try {
          json ref = json::parse(read_text(rp));
          // A relative source_file is relative to the reference file: inline it.
          if (ref.contains("source_file") && ref["source_file"].is_string()) {
            fs::path sf = ref["source_file"].get<std::string>();
            if (sf.is_relative()) sf = rp.parent_path() / sf;
            ref["source"] = read_text(sf);
            ref.erase("source_file");
          }
          cfg["reference"] = ref;
          have_ref = true;
        } catch (const std::exception& e) {
          problem("reference " + rp.string() + ": " + e.what());
        }
      }
    }
    if (!have_ref) {
      problem(
          "no reference in kopt's candidate format (CUDA device code and launch plan): put one "
          "at " +
          (o.reference_dir.empty() ? std::string("<--reference-dir>/")
                                   : o.reference_dir.string() + "/") +
          name + ".json");
      blocked = true;
    }

    if (!blocked) {
      const auto lr = config::load_operator_text(cfg.dump(), op_name + ".json", o.out_dir);
      for (const auto& dg : lr.diagnostics)
        (dg.level == config::diagnostic::severity::error ? r.problems : r.notes)
            .push_back(dg.to_string());
      if (!lr.ok()) blocked = true;
    }
    r.status = blocked ? "draft" : "imported";
    r.file = o.out_dir / (op_name + (blocked ? ".draft.json" : ".json"));
    write_text(r.file, cfg.dump(2) + "\n");
    out.push_back(std::move(r));
  }
  for (auto& r : out)
    for (const auto& p : read_problems) r.notes.push_back(p);
  return out;
}

}  // namespace kopt::report
