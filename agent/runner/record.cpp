#include "runner/record.hpp"

#include "common/hash.hpp"

namespace kopt::runner {

using json = nlohmann::json;

store::eval_status to_eval_status(protocol::outcome o) {
  using protocol::outcome;
  using store::eval_status;
  // Every outcome has its own store status (schema v3), except two that
  // mean "not measured": not_run (kopt's summaries) and clock_lost (the
  // worker's clock failed; the client measures again, so it is not stored
  // in practice).
  switch (o) {
    case outcome::ok:
      return eval_status::ok;
    case outcome::incorrect:
      return eval_status::incorrect;
    case outcome::compile_error:
      return eval_status::compile_error;
    case outcome::compile_timeout:
      return eval_status::compile_timeout;
    case outcome::rejected_format:
      return eval_status::rejected_format;
    case outcome::rejected_integrity:
      return eval_status::rejected_integrity;
    case outcome::launch_error:
      return eval_status::launch_error;
    case outcome::reference_failed:
      return eval_status::reference_failed;
    case outcome::crashed:
      return eval_status::crashed;
    case outcome::timeout:
      return eval_status::timeout;
    case outcome::clock_lost:
    case outcome::not_run:
      return eval_status::skipped;
  }
  return eval_status::skipped;
}

store::candidate_record candidate_row(const subject_spec& s, store::row_id campaign_id,
                                     std::optional<store::row_id> iteration_id) {
  store::candidate_record c;
  c.campaign_id = campaign_id;
  c.iteration_id = iteration_id;
  c.parent_id = s.parent_id;
  c.origin = s.origin;
  c.source = s.candidate.value("source", "");
  json plan = s.candidate;
  plan.erase("source");  // the source has its own column
  c.launch_plan = plan;
  c.parameters = s.candidate.value("parameters", json::object());
  c.note = s.note;
  return c;
}

std::map<std::string, store::row_id> record_report(
    store::store& db, store::row_id campaign_id, std::optional<store::row_id> iteration_id,
    store::row_id operator_id, const std::vector<subject_spec>& subjects, const evaluation_report& rep,
    const std::map<std::string, evaluation_summary>& summaries, const std::string& stage) {
  std::map<std::string, store::row_id> workload_ids;
  for (const auto& w : db.workloads_of(operator_id)) workload_ids[w.key] = w.id;
  std::map<std::string, store::row_id> ids;
  for (const auto& s : subjects) {
    store::row_id cid;
    if (s.candidate_id) {
      cid = *s.candidate_id;
    } else {
      cid = db.add_candidate(candidate_row(s, campaign_id, iteration_id));
    }
    ids[s.role] = cid;

    std::optional<store::row_id> comp_id;
    if (auto it = rep.compiled.find(s.role); it != rep.compiled.end()) {
      const protocol::compiled& m = it->second;
      const json& cj = m.compile;
      store::compilation_record cr;
      cr.candidate_id = cid;
      cr.parameter_values = cj.value("parameters", s.parameters);
      cr.arch = cj.value("arch", "");
      cr.options = cj.value("options", json::array());
      const std::string st = cj.value("status", "compile_error");
      cr.status = st == "ok"        ? (m.status == protocol::outcome::ok ? "ok" : "rejected")
                  : st == "timeout" ? "timeout"
                  : st == "crashed" ? "crashed"
                                    : "error";
      cr.log = cj.value("log", "");
      if (m.status != protocol::outcome::ok && !m.message.empty() && cr.log != m.message)
        cr.log += "\nkopt: " + m.message;
      std::int64_t regs = -1, smem = 0, spill = 0;
      const json kernels = cj.value("kernels", json::object());
      for (const auto& [k, v] : kernels.items()) {
        regs = std::max<std::int64_t>(regs, v.value("registers", -1));
        smem = std::max<std::int64_t>(smem, v.value("shared_static_bytes", 0));
        spill = std::max<std::int64_t>(spill, v.value("spill_store_bytes", 0) + v.value("spill_load_bytes", 0));
      }
      if (regs >= 0) cr.registers = regs;
      cr.shared_bytes = smem;
      cr.spill_bytes = spill;
      cr.duration_ms = cj.value("duration_ms", 0.0);
      if (!cj.value("cubin_hash", "").empty()) cr.cubin_hash = cj.value("cubin_hash", "");
      cr.compiler_version = "nvrtc " + cj.value("nvrtc_version", "");
      comp_id = db.add_compilation(cr);
    }

    auto sit = summaries.find(s.role);
    for (const auto& [wkey, roles] : rep.results) {
      auto rit = roles.find(s.role);
      if (rit == roles.end()) continue;
      auto wid = workload_ids.find(wkey);
      if (wid == workload_ids.end()) continue;
      const subject_result& r = rit->second;
      store::evaluation_record e;
      e.candidate_id = cid;
      e.compilation_id = comp_id;
      e.workload_id = wid->second;
      e.stage = stage;
      protocol::outcome status = r.status;
      std::string message = r.message;
      if (sit != summaries.end())
        for (const auto& row : sit->second.rows)
          if (row.workload == wkey) {
            status = row.status;
            message = row.message;
            if (row.sol_fraction) e.sol_fraction = *row.sol_fraction;
            // Counters and diagnosis together, so a reader of the store sees
            // the evidence beside the conclusion drawn from it.
            if (!row.counters.is_null() || !row.diagnosis.is_null()) {
              e.counters = json::object();
              if (!row.counters.is_null()) e.counters["counters"] = row.counters;
              if (!row.diagnosis.is_null()) e.counters["diagnosis"] = row.diagnosis;
              if (!row.sol_calibrated.empty()) e.counters["sol_calibrated"] = row.sol_calibrated;
            }
            if (row.max_abs_err > 0 || row.status == protocol::outcome::ok) {
              e.max_abs_err = row.max_abs_err;
              e.max_rel_err = row.max_rel_err;
            }
          }
      e.status = to_eval_status(status);
      // The store status is the outcome's own name except for the "not
      // measured" pair; the error then says which one it was.
      const std::string name(protocol::to_string(status));
      if (!message.empty())
        e.error = (name != store::to_string(e.status) ? name + ": " : std::string()) + message;
      e.correctness = {{"checks", r.detail.value("correctness", json::array())},
                       {"recheck", r.detail.value("recheck", json(nullptr))},
                       {"sample_check", r.detail.value("sample_check", json(nullptr))},
                       {"launches", r.detail.value("launches", json::array())}};
      double min_ratio = 1.0;
      for (const auto& c : r.detail.value("correctness", json::array())) {
        const json outputs = c.value("outputs", json::object());
        for (const auto& [n, o] : outputs.items()) min_ratio = std::min(min_ratio, o.value("matched_ratio", 1.0));
      }
      if (r.detail.contains("correctness")) e.matched_ratio = min_ratio;
      if (r.detail.contains("timing")) {
        const json& t = r.detail.at("timing");
        e.timing.median_ns = t.value("median_ns", 0.0);
        e.timing.min_ns = t.value("min_ns", 0.0);
        e.timing.mean_ns = t.value("mean_ns", 0.0);
        e.timing.stdev_ns = t.value("stdev_ns", 0.0);
        e.timing.q1_ns = t.value("q1_ns", 0.0);
        e.timing.q3_ns = t.value("q3_ns", 0.0);
        e.timing.samples = t.value("samples", std::int64_t{0});
        e.timing.stop_reason = t.value("stop_reason", "");
        e.timing.discarded = t.value("discarded_low_clock", std::int64_t{0});
        e.timing.detail = t;
      }
      e.device = rep.device;
      json seeds = json::array();
      for (const auto& c : r.detail.value("correctness", json::array())) seeds.push_back(c.value("seed", json(nullptr)));
      e.seeds = seeds;
      db.add_evaluation(e);
    }
  }
  return ids;
}

}  // namespace kopt::runner
