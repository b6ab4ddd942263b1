#include "runner/worker_client.hpp"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "common/error.hpp"

namespace kopt::runner {

using json = nlohmann::json;

std::string default_worker_exe() {
  if (const char* e = std::getenv("KOPT_WORKER"); e && *e) return e;
  return (std::filesystem::path(self_executable()).parent_path() / "kopt-worker").string();
}

bool stopped_from_outside(const exit_status& st, std::string_view err) {
  if (st.timed_out) return false;  // our own deadline: the running subject's
  auto external_signal = [](int s) { return s == SIGTERM || s == SIGINT || s == SIGHUP || s == SIGKILL; };
  if (!st.exited && external_signal(st.signal)) return true;
  if (st.exited && st.code > 128 && external_signal(st.code - 128)) return true;
  // Slurm 22.05: "slurmstepd: error: *** STEP 12.0 ON n1 CANCELLED AT ... ***",
  // "... DUE TO TIME LIMIT ***", "... DUE TO PREEMPTION ***",
  // "... DUE TO NODE FAILURE ***", "srun: Job step aborted: ...".
  for (std::string_view marker : {"CANCELLED AT", "DUE TO TIME LIMIT", "DUE TO PREEMPTION", "DUE TO NODE FAILURE",
                                  "Job step aborted", "JOB STEP TERMINATED"})
    if (err.find(marker) != std::string_view::npos) return true;
  return false;
}

worker_client::worker_client(worker_options opts) : opts_(std::move(opts)) {
  if (opts_.worker_exe.empty()) opts_.worker_exe = default_worker_exe();
}

worker_client::~worker_client() { stop(); }

void worker_client::stop() {
  if (!proc_) return;
  proc_->write_all(json(protocol::shutdown_request{}).dump() + "\n");
  proc_->close_stdin();
  proc_->wait(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  proc_.reset();
}

void worker_client::spawn() {
  std::vector<std::string> argv = opts_.launch_prefix;
  argv.push_back(opts_.worker_exe);
  argv.push_back("--gpu");
  argv.push_back(opts_.gpu_auto ? std::string("auto") : std::to_string(opts_.gpu));
  if (!opts_.cache_dir.empty()) {
    argv.push_back("--cache-dir");
    argv.push_back(opts_.cache_dir);
  }
  for (const auto& a : opts_.extra_args) argv.push_back(a);
  // The worker runs generated code: it never sees the daemon's secrets.
  proc_ = std::make_unique<child_process>(argv, scrubbed_environment());
}

void worker_client::send(const protocol::request& r) {
  if (!proc_->write_all(json(r).dump() + "\n"))
    throw kopt::error("the GPU worker closed its input");
}

std::optional<protocol::message> worker_client::next_message(std::chrono::seconds timeout,
                                                             std::string* why) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  lost_from_outside_ = false;
  for (;;) {
    auto line = proc_->read_line(deadline);
    if (!line) {
      if (proc_->timed_out()) {
        *why = fmt::format("the worker was silent for {} s and was killed", timeout.count());
        proc_->kill_group();
      } else {
        const auto st = proc_->wait(std::chrono::steady_clock::now() + std::chrono::seconds(10));
        std::string err = proc_->drain_stderr(4000);
        lost_from_outside_ = stopped_from_outside(st, err);
        *why = fmt::format("the worker {}{}{}", st.describe(), err.empty() ? "" : ": ", err);
      }
      return std::nullopt;
    }
    if (line->empty()) continue;
    json j;
    try {
      j = json::parse(*line);
    } catch (const json::exception&) {
      // Not protocol: something in the worker wrote to stdout. Skip it, but
      // keep the evidence.
      *why = "non-protocol output from the worker: " + line->substr(0, 200);
      continue;
    }
    try {
      return protocol::parse_message(j);
    } catch (const protocol::protocol_error& e) {
      // A worker of another version is refused at once; any other line
      // that does not follow the protocol is skipped like noise.
      if (e.code() == protocol::error_code::unsupported_protocol) throw kopt::error(e.what());
      *why = std::string("a worker line that does not follow the protocol (") + e.what() +
             "): " + line->substr(0, 200);
    }
  }
}

const protocol::hello& worker_client::start() {
  if (proc_ && proc_->running()) return hello_;
  spawn();
  std::string why;
  std::optional<protocol::message> m;
  try {
    m = next_message(opts_.hello_timeout, &why);
  } catch (const kopt::error& e) {
    proc_.reset();
    throw kopt::error(std::string("the GPU worker cannot be used: ") + e.what());
  }
  if (!m) {
    proc_.reset();
    throw kopt::error("the GPU worker did not start: " + why);
  }
  const auto* h = std::get_if<protocol::hello>(&*m);
  if (!h || !h->ok) {
    const std::string reason =
        h ? h->error : "its first message was " + json(*m).dump() + ", not hello";
    proc_.reset();
    throw kopt::error("the GPU worker cannot run here: " + reason);
  }
  hello_ = *h;
  return hello_;
}

protocol::message worker_client::call(protocol::request request, std::chrono::seconds timeout) {
  start();
  const std::string id = fmt::format("r{}", next_id_++);
  std::visit([&](auto& r) { r.id = id; }, request);
  send(request);
  for (;;) {
    std::string why;
    auto m = next_message(timeout, &why);
    if (!m) {
      proc_.reset();
      throw kopt::error(why);
    }
    if (protocol::answer_id(*m) == id) return *m;
  }
}

protocol::evaluate_request evaluate_request_from_json(const json& request) {
  json j = request;
  j["type"] = "evaluate";
  j["protocol"] = protocol::version;
  if (!j.contains("operator")) j["operator"] = json::object();
  try {
    return std::get<protocol::evaluate_request>(protocol::parse_request(j));
  } catch (const protocol::protocol_error& e) {
    throw kopt::error(std::string("evaluate: the request does not follow the worker protocol: ") +
                      e.what());
  }
}

evaluation_report worker_client::evaluate(
    const json& request, const std::function<void(const protocol::message&)>& on_message) {
  return evaluate(evaluate_request_from_json(request), on_message);
}

evaluation_report evaluate_with_counters(
    worker_client& timing, worker_client* profiler, const json& request,
    const std::function<void(const protocol::message&)>& on_message) {
  return evaluate_with_counters(timing, profiler, evaluate_request_from_json(request), on_message);
}

evaluation_report worker_client::evaluate(
    protocol::evaluate_request request,
    const std::function<void(const protocol::message&)>& on_message) {
  using protocol::outcome;
  evaluation_report rep;
  std::set<std::string> dropped_roles;      // subjects that crashed or hung
  std::set<std::string> finished_workloads;
  int clock_restarts = 0;
  int outside_restarts = 0;
  const std::vector<std::string> all_workloads = request.workloads;
  const std::vector<protocol::subject> all_subjects = request.subjects;
  // Explicit workload ids, so that a restart can resend exactly the rest.
  if (all_workloads.empty()) throw kopt::error("evaluate: the request must list its workloads");

  for (int attempt = 0;; ++attempt) {
    start();
    rep.device = hello_.device;
    rep.calibration = hello_.calibration;
    rep.launch_floor = hello_.launch_floor;
    protocol::evaluate_request req = request;
    const std::string id = fmt::format("e{}", next_id_++);
    req.id = id;
    req.subjects.clear();
    for (const auto& s : all_subjects)
      if (!dropped_roles.count(s.role)) req.subjects.push_back(s);
    if (!finished_workloads.empty()) {
      req.workloads.clear();
      for (const auto& w : all_workloads)
        if (!finished_workloads.count(w)) req.workloads.push_back(w);
    }
    if (!proc_->write_all(json(protocol::request(req)).dump() + "\n")) {
      // It exited between requests (an idle worker's job step cancelled or
      // timed out): a new worker gets the request.
      proc_.reset();
      rep.events.push_back("worker restarted: it had exited before the request was sent");
      if (++outside_restarts > opts_.max_restarts)
        throw kopt::error("the GPU worker closed its input");
      continue;
    }

    std::string current_workload;
    std::optional<protocol::fatal> fatal;
    bool done = false;
    bool lost_from_outside = false;
    std::string outside_why;  // how it was stopped, when lost_from_outside
    for (;;) {
      std::string why;
      auto m = next_message(opts_.silence_timeout, &why);
      if (!m) {
        if (!fatal && lost_from_outside_) {
          // Stopped from outside (Slurm, a signal): no outcome to charge.
          lost_from_outside = true;
          outside_why = why;
        } else if (!fatal) {
          // Died or went silent without a word: charged to the workload in
          // progress, with no subject to blame.
          fatal = protocol::fatal{
              id, why.find("silent") != std::string::npos ? outcome::timeout : outcome::crashed, "",
              current_workload, why};
        }
        break;
      }
      if (on_message) on_message(*m);
      if (const std::string mid = protocol::answer_id(*m); !mid.empty() && mid != id)
        continue;  // stale
      if (auto* c = std::get_if<protocol::compiled>(&*m)) {
        rep.compiled[c->role] = *c;
      } else if (auto* b = std::get_if<protocol::workload_begin>(&*m)) {
        current_workload = b->workload;
      } else if (auto* r = std::get_if<protocol::workload_result>(&*m)) {
        for (const auto& x : r->results) rep.results[r->workload][x.role] = x;
        finished_workloads.insert(r->workload);
        current_workload.clear();
      } else if (auto* f = std::get_if<protocol::fatal>(&*m)) {
        fatal = *f;
        if (!f->workload.empty()) current_workload = f->workload;
      } else if (auto* e = std::get_if<protocol::error>(&*m)) {
        throw request_rejected(e->code, e->message);
      } else if (std::holds_alternative<protocol::done>(*m)) {
        done = true;
        break;
      }
    }
    if (done) break;

    // The worker is gone. Attribute the outcome and go on without the
    // subject that caused it.
    proc_.reset();
    ++rep.restarts;
    if (lost_from_outside) {
      // Cancelled, preempted or out of time (a Slurm job step), or killed by
      // the system: nothing the candidate did. Same request, new worker.
      rep.events.push_back(fmt::format("worker restarted: it was stopped from outside on {} ({}); "
                                       "the unfinished workloads were run again in a new worker",
                                       current_workload.empty() ? "no workload" : current_workload,
                                       outside_why));
      if (++outside_restarts > opts_.max_restarts)
        throw kopt::error("the GPU worker was stopped from outside " + std::to_string(outside_restarts) +
                          " times in one request: " + outside_why);
      continue;
    }
    const std::string status(protocol::to_string(fatal->status));
    if (fatal->status == outcome::clock_lost) {
      // The worker's timing clock failed, not the candidate: measure the
      // unfinished workloads again, every subject included, in a new worker.
      rep.events.push_back(
          fmt::format("worker restarted: its CUPTI clock lost kernel records on {} ({}); "
                      "measured again in a fresh worker",
                      current_workload, fatal->message));
      if (++clock_restarts > 3)
        throw kopt::error("the GPU worker's clock failed repeatedly: " + fatal->message);
      continue;
    }
    if (fatal->role.empty() || fatal->role == "reference") {
      // Without a culprit (or with a broken reference) nothing more can be
      // measured reliably on this workload: record it for everyone.
      for (const auto& s : all_subjects)
        rep.results[current_workload][s.role] = {s.role, fatal->status, fatal->message,
                                                 json::object()};
      rep.results[current_workload]["reference"] = {"reference", fatal->status, fatal->message,
                                                    json::object()};
      finished_workloads.insert(current_workload);
    } else {
      dropped_roles.insert(fatal->role);
      // This workload and every later one: the subject is known to crash.
      for (const auto& w : all_workloads)
        if (!finished_workloads.count(w) || w == current_workload)
          rep.results[w][fatal->role] = {
              fatal->role, fatal->status,
              w == current_workload
                  ? fatal->message
                  : "not run: the candidate " + status + " on workload " + current_workload,
              json::object()};
    }
    rep.events.push_back(fmt::format("worker restarted after {} of {} on {}: {}", status,
                                     fatal->role.empty() ? "an unknown subject" : fatal->role,
                                     current_workload, fatal->message));
    if (attempt + 1 >= opts_.max_restarts) {
      rep.events.push_back("giving up after too many worker restarts");
      break;
    }
    bool left = false;
    for (const auto& s : all_subjects)
      if (!dropped_roles.count(s.role)) left = true;
    if (!left) break;
  }
  return rep;
}

worker_options profiler_options(worker_options o) {
  o.extra_args.push_back("--profile-only");
  return o;
}

evaluation_report evaluate_with_counters(
    worker_client& timing, worker_client* profiler, protocol::evaluate_request request,
    const std::function<void(const protocol::message&)>& on_message) {
  using protocol::outcome;
  const protocol::settings asked = request.settings;
  request.settings.counters = "none";
  request.settings.metrics.clear();
  evaluation_report rep = timing.evaluate(request, on_message);
  if (!asked.wants_counters()) return rep;
  if (!profiler) {
    rep.events.push_back("counters were asked for but no profiling worker is configured");
    return rep;
  }
  // Only subjects that passed on some workload are worth profiling.
  protocol::evaluate_request preq = request;
  preq.subjects.clear();
  for (const auto& s : request.subjects) {
    bool ok = false;
    for (const auto& [w, roles] : rep.results)
      if (auto it = roles.find(s.role); it != roles.end() && it->second.status == outcome::ok)
        ok = true;
    if (ok) preq.subjects.push_back(s);
  }
  if (preq.subjects.empty()) return rep;
  preq.settings.seeds = 1;
  preq.settings.recheck = false;
  preq.settings.time_reference = false;
  preq.settings.counters = asked.counters;
  preq.settings.metrics = asked.metrics;
  try {
    const evaluation_report prep = profiler->evaluate(preq);
    for (const auto& [w, roles] : prep.results)
      for (const auto& [role, r] : roles) {
        auto wit = rep.results.find(w);
        if (wit == rep.results.end()) continue;
        auto rit = wit->second.find(role);
        if (rit == wit->second.end() || rit->second.status != outcome::ok) continue;
        if (r.detail.contains("counters"))
          rit->second.detail["counters"] = r.detail.at("counters");
        else if (r.status != outcome::ok)
          rit->second.detail["counters"] = {
              {"error", fmt::format("the profiling run gave {}: {}", protocol::to_string(r.status),
                                    r.message)}};
      }
    for (const auto& e : prep.events) rep.events.push_back("profiling worker: " + e);
    // The profiling worker does not stay alive between requests: a process
    // that has used the CUPTI profiler is not left beside the timing worker.
    profiler->stop();
  } catch (const request_rejected& e) {
    profiler->stop();
    // A bad metric name is the caller's error; a profiler that cannot run
    // here leaves the timing results intact and says why the counters are
    // missing.
    if (e.code() == protocol::error_code::unknown_metric) throw;
    rep.events.push_back(std::string("counters failed: ") + e.what());
  } catch (const kopt::error& e) {
    profiler->stop();
    rep.events.push_back(std::string("counters failed: ") + e.what());
  }
  return rep;
}

}  // namespace kopt::runner
