#include <limits>

#include "campaign/types.hpp"
#include "common/hash.hpp"
#include "store/store.hpp"

namespace kopt::campaign {

using json = nlohmann::json;

json workload_result::to_json(bool with_samples) const {
  json j = {{"status", status}, {"median_ns", median_ns}};
  if (!message.empty()) j["message"] = message;
  if (sol_fraction) j["sol_fraction"] = *sol_fraction;
  if (attainable_sol_fraction) j["attainable_sol_fraction"] = *attainable_sol_fraction;
  if (with_samples && !samples_ns.empty()) j["samples_ns"] = samples_ns;
  if (!diagnosis.is_null()) j["diagnosis"] = diagnosis;
  return j;
}

workload_result workload_result::from_json(const json& j) {
  workload_result r;
  r.status = j.value("status", "not_run");
  r.message = j.value("message", "");
  r.median_ns = j.value("median_ns", 0.0);
  if (j.contains("samples_ns")) r.samples_ns = j.at("samples_ns").get<std::vector<double>>();
  if (j.contains("sol_fraction") && j.at("sol_fraction").is_number())
    r.sol_fraction = j.at("sol_fraction").get<double>();
  if (j.contains("attainable_sol_fraction") && j.at("attainable_sol_fraction").is_number())
    r.attainable_sol_fraction = j.at("attainable_sol_fraction").get<double>();
  if (j.contains("diagnosis")) r.diagnosis = j.at("diagnosis");
  return r;
}

bool subject_result::all_ok(const std::vector<std::string>& wl) const {
  if (compile_status != "ok") return false;
  for (const auto& w : wl) {
    auto it = workloads.find(w);
    if (it == workloads.end() || !it->second.ok() || !(it->second.median_ns > 0)) return false;
  }
  return true;
}

json subject_result::to_json(bool with_samples) const {
  json w = json::object();
  for (const auto& [k, r] : workloads) w[k] = r.to_json(with_samples);
  return {{"compile_status", compile_status}, {"workloads", w}};
}

subject_result subject_result::from_json(const json& j) {
  subject_result s;
  s.compile_status = j.value("compile_status", "ok");
  const json workloads_j = j.value("workloads", json::object());
  for (const auto& [k, v] : workloads_j.items())
    s.workloads[k] = workload_result::from_json(v);
  return s;
}

std::string content_key(const json& candidate) { return sha256_hex(candidate.dump()); }

param_values default_point(const json& candidate) {
  param_values p;
  const json parameters_j = candidate.value("parameters", json::object());
  for (const auto& [k, v] : parameters_j.items())
    if (v.contains("default")) p[k] = v.at("default").get<std::int64_t>();
  return p;
}

json with_point(json candidate, const param_values& point) {
  if (!candidate.contains("parameters")) return candidate;
  for (const auto& [k, v] : point)
    if (candidate["parameters"].contains(k)) candidate["parameters"][k]["default"] = v;
  return candidate;
}

std::uint64_t space_size(const json& candidate) {
  std::uint64_t n = 1;
  constexpr auto cap = std::numeric_limits<std::uint64_t>::max() / 4096;
  const json parameters_j = candidate.value("parameters", json::object());
  for (const auto& [k, v] : parameters_j.items()) {
    const auto m = static_cast<std::uint64_t>(v.value("values", json::array()).size());
    n *= std::max<std::uint64_t>(m, 1);
    if (n > cap) return cap;
  }
  return n;
}

json candidate_json(const store::candidate_record& c) {
  json j = c.launch_plan.is_object() ? c.launch_plan : json::object();
  j["source"] = c.source;
  return j;
}

void record_basic(store::store& db, const eval_request& rq, const eval_batch& b) {
  std::map<std::string, store::row_id> wids;
  for (const auto& w : db.workloads_of(rq.operator_id)) wids[w.key] = w.id;
  for (const auto& s : rq.subjects) {
    auto it = b.by_role.find(s.role);
    if (it == b.by_role.end()) continue;
    const subject_result& r = it->second;
    store::compilation_record cr;
    cr.candidate_id = s.candidate_id;
    cr.parameter_values = json(s.parameters);
    cr.arch = b.device.value("arch", "");
    cr.options = s.candidate.value("compile_options", json::array());
    cr.status = r.compile_status == "ok" ? "ok" : "error";
    const auto comp = db.add_compilation(cr);
    for (const auto& [wkey, wr] : r.workloads) {
      auto wid = wids.find(wkey);
      if (wid == wids.end()) continue;
      store::evaluation_record e;
      e.candidate_id = s.candidate_id;
      e.compilation_id = comp;
      e.workload_id = wid->second;
      e.stage = rq.stage;
      e.status = store::parse_eval_status(wr.status).value_or(store::eval_status::skipped);
      if (!wr.message.empty()) e.error = wr.message;
      if (wr.median_ns > 0) {
        e.timing.median_ns = wr.median_ns;
        e.timing.samples = static_cast<std::int64_t>(wr.samples_ns.size());
        e.timing.detail = {{"samples_ns", wr.samples_ns}};
      }
      e.sol_fraction = wr.sol_fraction;
      e.device = b.device;
      e.seeds = {{"base_seed", rq.base_seed}};
      db.add_evaluation(e);
    }
  }
}

}  // namespace kopt::campaign
