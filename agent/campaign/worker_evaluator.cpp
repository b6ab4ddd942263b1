#include "campaign/worker_evaluator.hpp"

#include <spdlog/spdlog.h>

#include "runner/evaluation.hpp"
#include "runner/record.hpp"

namespace kopt::campaign {

using json = nlohmann::json;

namespace {

struct report_detail {
  runner::evaluation_report report;
  std::map<std::string, runner::evaluation_summary> summaries;
};

}  // namespace

worker_evaluator::worker_evaluator(const config::operator_config& op, worker_eval_options o)
    : op_(op), o_(std::move(o)), client_(o_.worker), profiler_(runner::profiler_options(o_.worker)) {}

worker_evaluator::~worker_evaluator() {
  try {
    stop();
  } catch (const std::exception& e) {
    spdlog::warn("stopping the worker: {}", e.what());
  }
}

const json& worker_evaluator::start() {
  if (started_) return device_;
  // hello carries the device under "device" (and the calibration beside it).
  device_ = client_.start().device;
  started_ = true;
  if (!o_.peaks_file.empty())
    peaks_ = harness::find_peaks(harness::load_peak_table(o_.peaks_file), device_.value("name", ""));
  if (!peaks_)
    spdlog::warn("no peak figures for GPU '{}': fractions of speed of light are not computed",
                 device_.value("name", ""));
  return device_;
}

void worker_evaluator::stop() {
  if (started_) {
    client_.stop();
    profiler_.stop();
  }
  started_ = false;
}

protocol::evaluate_request worker_request(const config::operator_config& op, const eval_request& rq,
                                          const worker_eval_options& o) {
  protocol::evaluate_request req;
  req.operator_snapshot = op.snapshot();
  for (const auto& s : rq.subjects)
    req.subjects.push_back({s.role, s.candidate, {s.parameters.begin(), s.parameters.end()}});
  req.workloads = rq.workloads;
  req.settings.seeds = o.seeds;
  req.settings.base_seed = rq.base_seed;
  req.settings.time_reference = false;
  req.settings.launch_timeout_ms = o.launch_timeout_ms;
  req.settings.timing.min_time_s = o.min_time_s;
  req.settings.timing.max_time_s = o.max_time_s;
  // Counters for the promising candidates only (docs/campaign.md): the full
  // sweep and the winner's verification, never the cheap screening stage.
  if (!o.counters.empty() && o.counters != "none" &&
      std::find(o.counter_stages.begin(), o.counter_stages.end(), rq.stage) != o.counter_stages.end())
    req.settings.counters = o.counters;
  return req;
}

eval_batch batch_from_report(const config::operator_config& op, const eval_request& rq, runner::evaluation_report rep,
                             const std::optional<harness::gpu_peaks>& peaks) {
  auto d = std::make_shared<report_detail>();
  d->report = std::move(rep);
  eval_batch b;
  b.device = d->report.device;
  b.events = d->report.events;
  for (const auto& s : rq.subjects) {
    auto sum = runner::summarize(op, d->report, s.role, peaks);
    subject_result r;
    if (auto it = d->report.compiled.find(s.role); it != d->report.compiled.end())
      r.compile_status = protocol::to_string(it->second.status);
    for (const auto& row : sum.rows) {
      if (std::find(rq.workloads.begin(), rq.workloads.end(), row.workload) == rq.workloads.end())
        continue;
      workload_result w;
      w.status = protocol::to_string(row.status);
      w.message = row.message;
      w.median_ns = row.median_ns;
      w.sol_fraction = row.sol_fraction;
      w.diagnosis = row.diagnosis;
      if (row.detail.contains("timing"))
        w.samples_ns = row.detail.at("timing").value("samples_ns", std::vector<double>{});
      r.workloads[row.workload] = std::move(w);
    }
    b.by_role[s.role] = std::move(r);
    d->summaries[s.role] = std::move(sum);
  }
  b.detail = d;
  return b;
}

void record_worker_batch(store::store& db, const eval_request& rq, const eval_batch& b) {
  auto d = std::static_pointer_cast<report_detail>(b.detail);
  if (!d) {
    record_basic(db, rq, b);
    return;
  }
  std::vector<runner::subject_spec> specs;
  for (const auto& s : rq.subjects) {
    runner::subject_spec sp;
    sp.role = s.role;
    sp.candidate = s.candidate;
    sp.parameters = json(s.parameters);
    sp.candidate_id = s.candidate_id;
    specs.push_back(std::move(sp));
  }
  runner::record_report(db, rq.campaign_id, rq.iteration_id, rq.operator_id, specs, d->report,
                        d->summaries, rq.stage);
  for (const auto& e : d->report.events) {
    store::event_record ev;
    ev.campaign_id = rq.campaign_id;
    ev.kind = "worker_restart";
    ev.level = "warning";
    ev.message = e;
    db.add_event(ev);
  }
}

eval_batch worker_evaluator::evaluate(const eval_request& rq) {
  start();
  return batch_from_report(op_, rq, runner::evaluate_with_counters(client_, &profiler_, worker_request(op_, rq, o_)),
                           peaks_);
}

void worker_evaluator::record(store::store& db, const eval_request& rq, const eval_batch& b) {
  record_worker_batch(db, rq, b);
}

}  // namespace kopt::campaign
