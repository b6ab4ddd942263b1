#include "report/exchange.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/hash.hpp"
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

// A stable UUID-shaped id from a name (so that re-exports agree).
std::string uuid_of(const std::string& name) {
  std::string h = sha256_hex(name);
  h[12] = '5';
  h[16] = "89ab"[static_cast<unsigned char>(h[16]) % 4];
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20, 12);
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
  if (ranked.empty())
    throw not_found_error("campaign " + std::to_string(d.campaign.id) +
                          " has no candidate that is correct on every workload: nothing to export");
  if (ranked.size() > std::max<std::size_t>(o.top, 1))
    ranked.resize(std::max<std::size_t>(o.top, 1));

  std::vector<std::string> files;
  auto put = [&](const fs::path& rel, const std::string& text) {
    write_text(dir / rel, text);
    files.push_back(rel.generic_string());
  };

  // Definition. Shapes that are expressions (not a bare axis name) and
  // kopt's CUDA reference have no FlashInfer equivalent: kept as notes.
  json def = {{"name", def_name},
              {"op_type", op_type},
              {"description", cfg.value("description", "")},
              {"tags", cfg.value("tags", json::array())},
              {"axes", json::object()},
              {"inputs", json::object()},
              {"outputs", json::object()}};
  def["tags"].push_back("source:kopt");
  for (const auto& [k, a] : member(cfg, "axes").items()) {
    json ax = {{"type", a.value("type", "var")}};
    if (a.contains("value")) ax["value"] = a["value"];
    if (a.contains("description")) ax["description"] = a["description"];
    def["axes"][k] = ax;
  }
  for (const char* side : {"inputs", "outputs"})
    for (const auto& [k, t] : member(cfg, side).items()) {
      json shape = json::array();
      for (const auto& dim : t.value("shape", json::array()))
        shape.push_back(dim.is_string() ? dim : json(dim.dump()));
      def[side][k] = {{"shape", shape}, {"dtype", t.value("dtype", "")}};
      if (t.contains("description")) def[side][k]["description"] = t["description"];
    }
  for (const auto& [k, s] : member(cfg, "scalars").items())
    def["inputs"][k] = {{"shape", nullptr}, {"dtype", s.value("dtype", "float32")}};
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
  put(fs::path("definitions") / op_type / (def_name + ".json"), def.dump(2) + "\n");

  // Workloads (var axes and scalar overrides; inputs are random: kopt
  // generates them from seeds).
  std::map<std::string, json> wl_json;
  std::string wl_lines;
  const json scalars = cfg.value("scalars", json::object());
  for (const auto& w : d.workloads) {
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
    json wj = {{"uuid", uuid_of(def_name + "/" + w.key)}, {"axes", w.axes}, {"inputs", inputs}};
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
          {"target_hardware", hardware.empty() ? json::array() : json::array({hardware})},
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
      json ev = {{"status", status},
                 {"log", m.error.value_or("")},
                 {"environment", {{"hardware", hardware}, {"libs", libs}}},
                 {"timestamp", d.ended_ms ? store::format_time(*d.ended_ms) : std::string()}};
      ev["correctness"] = (status == "PASSED" || status == "INCORRECT_NUMERICAL")
                              ? json{{"max_relative_error", opt(m.max_rel_err)},
                                     {"max_absolute_error", opt(m.max_abs_err)}}
                              : json(nullptr);
      if (status == "PASSED" && m.median_ns) {
        const double ms = *m.median_ns / 1e6;
        auto r = ref_ms.find(k);
        ev["performance"] = {
            {"latency_ms", ms},
            {"reference_latency_ms", r == ref_ms.end() ? json(nullptr) : json(r->second)},
            {"speedup_factor", r == ref_ms.end() ? json(nullptr) : json(r->second / ms)}};
      } else {
        ev["performance"] = nullptr;
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

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
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
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    if (p.extension() == ".json") {
      json j;
      try {
        j = json::parse(read_text(p));
      } catch (const json::exception&) {
        continue;  // not every JSON file in a data set is a definition
      }
      if (looks_like_definition(j)) defs[j["name"].get<std::string>()] = {j, p};
    } else if (p.extension() == ".jsonl") {
      for (auto& line : read_jsonl(p, read_problems)) {
        if (!line.is_object() || !line.contains("workload") || !line["workload"].is_object())
          continue;
        const std::string def_name = line.value("definition", "");
        const std::string uuid = line["workload"].value("uuid", "");
        if (!uuid.empty() && !seen_uuid[def_name].insert(uuid).second) continue;
        workloads[def_name].push_back(line["workload"]);
      }
    }
  }
  if (defs.empty())
    throw config_error(
        "no FlashInfer-Trace definition (JSON with name, axes, inputs, outputs) under " +
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

    json cfg = {{"name", op_name},
                {"op_type", def.value("op_type", "")},
                {"description", def.value("description", "")},
                {"tags", def.value("tags", json::array())},
                {"axes", json::object()},
                {"inputs", json::object()},
                {"outputs", json::object()}};
    std::set<std::string> var_axes;
    for (const auto& [k, a] : member(def, "axes").items()) {
      const std::string type = a.value("type", "var");
      json ax = {{"type", type}};
      if (type == "const")
        ax["value"] = a.value("value", 1);
      else
        var_axes.insert(k);
      if (a.contains("description") && a["description"].is_string())
        ax["description"] = a["description"];
      if (!is_identifier(k)) {
        problem("axis '" + k + "' is not an identifier kopt accepts");
        blocked = true;
      }
      cfg["axes"][k] = ax;
    }
    if (def.contains("constraints") && !def["constraints"].empty()) {
      std::string cs;
      for (const auto& c : def["constraints"])
        cs += (cs.empty() ? "" : "; ") + (c.is_string() ? c.get<std::string>() : c.dump());
      note("constraints are not checked by kopt (kept in the description): " + cs);
      cfg["description"] = cfg["description"].get<std::string>() +
                           (cfg["description"].get<std::string>().empty() ? "" : " ") +
                           "Constraints: " + cs + ".";
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
          if (t.contains("description")) scalars[k]["description"] = t["description"];
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
                  ": kopt needs a generator (int_range, permutation or kernel) that yields valid "
                  "values; "
                  "FlashInfer's random data has no range to derive one from");
          blocked = true;
        }
        cfg[side][k] = tj;
      }
    }
    if (!scalars.empty()) cfg["scalars"] = scalars;

    // Workloads: distinct var-axis assignments; weight = how many FlashInfer
    // workloads share them (their frequency in the captured traffic).
    std::map<std::string, std::pair<json, double>> distinct;
    std::vector<std::string> order;
    bool saw_safetensors = false;
    std::size_t incomplete = 0;
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
        if (in.value("type", "") == "safetensors") saw_safetensors = true;
        if (in.value("type", "") == "scalar" && scalar_dtypes.count(k) && in.contains("value") &&
            in["value"].is_number())
          sc[k] = in["value"];
      }
      const std::string key = axes.dump() + sc.dump();
      auto [it, fresh] = distinct.try_emplace(key, json{{"axes", axes}, {"scalars", sc}}, 0.0);
      it->second.second += 1.0;
      if (fresh) order.push_back(key);
    }
    if (incomplete)
      note(std::to_string(incomplete) +
           " workload(s) lack a value for some var axis and were skipped");
    if (saw_safetensors)
      note(
          "safetensors inputs are not used: kopt generates inputs from seeds (say how in each "
          "input's generator)");
    if (order.size() > o.max_workloads) {
      std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
        return distinct[a].second > distinct[b].second;
      });
      note("kept the " + std::to_string(o.max_workloads) + " most frequent of " +
           std::to_string(order.size()) + " distinct workloads (--max-workloads)");
      order.resize(o.max_workloads);
    }
    json wl = json::array();
    for (const auto& key : order) {
      const auto& [w, count] = distinct[key];
      std::string id;
      for (const auto& [a, v] : w["axes"].items())
        id += (id.empty() ? "" : "_") + a + std::to_string(v.get<std::int64_t>());
      if (id.empty()) id = "w";
      id = safe_name(id) + "_" + std::to_string(wl.size());
      json wj = {{"id", id}, {"axes", w["axes"]}, {"weight", count}};
      if (!w["scalars"].empty()) wj["scalars"] = w["scalars"];
      wl.push_back(wj);
    }
    // A scalar's default value: the first workload's.
    for (const auto& [k, dt] : scalar_dtypes)
      if (!wl.empty() && wl[0].contains("scalars") && wl[0]["scalars"].contains(k))
        cfg["scalars"][k]["value"] = wl[0]["scalars"][k];
    if (var_axes.empty() && wl.empty())
      wl.push_back({{"id", "const"}, {"axes", json::object()}, {"weight", 1.0}});
    if (wl.empty()) {
      problem("no workload with a value for every var axis (workloads/**/" + name + ".jsonl)");
      blocked = true;
    }
    cfg["workloads"] = wl;
    r.workloads = wl.size();
    note(
        "FlashInfer has no workload weights: weight = number of FlashInfer workloads with the same "
        "axes");
    note(
        "no roofline counts in FlashInfer: flops \"0\" and kopt's default bytes rule; add "
        "`roofline` for "
        "compute-bound operators");

    // The reference.
    if (def.contains("reference") && def["reference"].is_string()) {
      const fs::path py = o.out_dir / (op_name + ".reference.py");
      write_text(py, def["reference"].get<std::string>());
      note("FlashInfer's PyTorch reference saved to " + py.string() + " (kopt cannot run it)");
    }
    bool have_ref = false;
    if (!o.reference_dir.empty()) {
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
