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
  proc_->write_all(json{{"type", "shutdown"}}.dump() + "\n");
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

std::optional<json> worker_client::next_message(std::chrono::seconds timeout, std::string* why) {
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
    try {
      return json::parse(*line);
    } catch (const json::exception&) {
      // Not protocol: something in the worker wrote to stdout. Skip it, but
      // keep the evidence.
      *why = "non-protocol output from the worker: " + line->substr(0, 200);
    }
  }
}

const json& worker_client::start() {
  if (proc_ && proc_->running()) return hello_;
  spawn();
  std::string why;
  auto m = next_message(opts_.hello_timeout, &why);
  if (!m) {
    proc_.reset();
    throw kopt::error("the GPU worker did not start: " + why);
  }
  if (m->value("type", "") != "hello" || !m->value("ok", false)) {
    const std::string reason = m->value("error", m->dump());
    proc_.reset();
    throw kopt::error("the GPU worker cannot run here: " + reason);
  }
  if (m->value("protocol", 0) != 1) {
    proc_.reset();
    throw kopt::error(fmt::format("the GPU worker speaks protocol {}, kopt speaks 1", m->value("protocol", 0)));
  }
  hello_ = *m;
  return hello_;
}

json worker_client::call(json request, std::chrono::seconds timeout) {
  start();
  const std::string id = fmt::format("r{}", next_id_++);
  request["id"] = id;
  if (!proc_->write_all(request.dump() + "\n")) throw kopt::error("the GPU worker closed its input");
  for (;;) {
    std::string why;
    auto m = next_message(timeout, &why);
    if (!m) {
      proc_.reset();
      throw kopt::error(why);
    }
    if (m->value("id", "") == id) return *m;
  }
}

evaluation_report worker_client::evaluate(json request, const std::function<void(const json&)>& on_message) {
  evaluation_report rep;
  std::set<std::string> dropped_roles;      // subjects that crashed or hung
  std::set<std::string> finished_workloads;
  int clock_restarts = 0;
  int outside_restarts = 0;
  std::vector<std::string> all_workloads = request.value("workloads", std::vector<std::string>{});
  const json all_subjects = request.value("subjects", json::array());
  // Explicit workload ids, so that a restart can resend exactly the rest.
  if (all_workloads.empty()) throw kopt::error("evaluate: the request must list its workloads");

  for (int attempt = 0;; ++attempt) {
    start();
    rep.device = hello_.value("device", json::object());
    rep.calibration = hello_.value("calibration", json());
    json req = request;
    const std::string id = fmt::format("e{}", next_id_++);
    req["type"] = "evaluate";
    req["id"] = id;
    json subjects = json::array();
    for (const auto& s : all_subjects)
      if (!dropped_roles.count(s.value("role", ""))) subjects.push_back(s);
    req["subjects"] = subjects;
    if (!finished_workloads.empty()) {
      std::vector<std::string> rest;
      for (const auto& w : all_workloads)
        if (!finished_workloads.count(w)) rest.push_back(w);
      req["workloads"] = rest;
    }
    if (!proc_->write_all(req.dump() + "\n")) {
      // It exited between requests (an idle worker's job step cancelled or
      // timed out): a new worker gets the request.
      proc_.reset();
      rep.events.push_back("worker restarted: it had exited before the request was sent");
      if (++outside_restarts > opts_.max_restarts) throw kopt::error("the GPU worker closed its input");
      continue;
    }

    std::string current_workload;
    std::string fatal_status, fatal_role, fatal_message;
    bool done = false;
    bool lost_from_outside = false;
    for (;;) {
      std::string why;
      auto m = next_message(opts_.silence_timeout, &why);
      if (!m) {
        if (fatal_status.empty() && lost_from_outside_) {
          lost_from_outside = true;
          fatal_message = why;
        } else if (fatal_status.empty()) {
          fatal_status = "crashed";
          fatal_message = why;
          if (why.find("silent") != std::string::npos) fatal_status = "timeout";
        }
        break;
      }
      if (on_message) on_message(*m);
      const std::string type = m->value("type", "");
      if (m->contains("id") && m->value("id", "") != id) continue;  // stale
      if (type == "compiled") {
        rep.compiled[m->value("role", "")] = *m;
      } else if (type == "workload_begin") {
        current_workload = m->value("workload", "");
      } else if (type == "workload_result") {
        const std::string w = m->value("workload", "");
        for (const auto& r : m->value("results", json::array()))
          rep.results[w][r.value("role", "")] = {r.value("status", ""), r.value("message", ""), r};
        finished_workloads.insert(w);
        current_workload.clear();
      } else if (type == "fatal") {
        fatal_status = m->value("status", "crashed");
        fatal_role = m->value("role", "");
        fatal_message = m->value("message", "");
        current_workload = m->value("workload", current_workload);
      } else if (type == "error") {
        throw kopt::error("the GPU worker rejected the request: " + m->value("message", ""));
      } else if (type == "done") {
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
                                       fatal_message));
      if (++outside_restarts > opts_.max_restarts)
        throw kopt::error("the GPU worker was stopped from outside " + std::to_string(outside_restarts) +
                          " times in one request: " + fatal_message);
      continue;
    }
    if (fatal_status == "clock_lost") {
      // The worker's timing clock failed, not the candidate: measure the
      // unfinished workloads again, every subject included, in a new worker.
      rep.events.push_back(fmt::format("worker restarted: its CUPTI clock lost kernel records on {} ({}); "
                                       "measured again in a fresh worker", current_workload, fatal_message));
      if (++clock_restarts > 3) throw kopt::error("the GPU worker's clock failed repeatedly: " + fatal_message);
      continue;
    }
    if (fatal_role.empty() || fatal_role == "reference") {
      // Without a culprit (or with a broken reference) nothing more can be
      // measured reliably on this workload: record it for everyone.
      for (const auto& s : all_subjects)
        rep.results[current_workload][s.value("role", "")] = {fatal_status, fatal_message, json::object()};
      rep.results[current_workload]["reference"] = {fatal_status, fatal_message, json::object()};
      finished_workloads.insert(current_workload);
    } else {
      dropped_roles.insert(fatal_role);
      // This workload and every later one: the subject is known to crash.
      for (const auto& w : all_workloads)
        if (!finished_workloads.count(w) || w == current_workload)
          rep.results[w][fatal_role] = {fatal_status,
                                        w == current_workload ? fatal_message
                                                              : "not run: the candidate " + fatal_status +
                                                                    " on workload " + current_workload,
                                        json::object()};
    }
    rep.events.push_back(fmt::format("worker restarted after {} of {} on {}: {}", fatal_status,
                                     fatal_role.empty() ? "an unknown subject" : fatal_role, current_workload,
                                     fatal_message));
    if (attempt + 1 >= opts_.max_restarts) {
      rep.events.push_back("giving up after too many worker restarts");
      break;
    }
    bool left = false;
    for (const auto& s : all_subjects)
      if (!dropped_roles.count(s.value("role", ""))) left = true;
    if (!left) break;
  }
  return rep;
}

worker_options profiler_options(worker_options o) {
  o.extra_args.push_back("--profile-only");
  return o;
}

evaluation_report evaluate_with_counters(worker_client& timing, worker_client* profiler, json request,
                                         const std::function<void(const json&)>& on_message) {
  json settings = request.value("settings", json::object());
  const std::string tier = settings.value("counters", std::string("none"));
  const json metrics = settings.value("metrics", json::array());
  const bool want = tier != "none" || (metrics.is_array() && !metrics.empty());
  settings.erase("counters");
  settings.erase("metrics");
  request["settings"] = settings;
  evaluation_report rep = timing.evaluate(request, on_message);
  if (!want) return rep;
  if (!profiler) {
    rep.events.push_back("counters were asked for but no profiling worker is configured");
    return rep;
  }
  // Only subjects that passed on some workload are worth profiling.
  json subjects = json::array();
  for (const auto& s : request.value("subjects", json::array())) {
    const std::string role = s.value("role", "candidate");
    bool ok = false;
    for (const auto& [w, roles] : rep.results)
      if (auto it = roles.find(role); it != roles.end() && it->second.status == "ok") ok = true;
    if (ok) subjects.push_back(s);
  }
  if (subjects.empty()) return rep;
  json preq = request;
  preq["subjects"] = subjects;
  json ps = settings;
  ps["seeds"] = 1;
  ps["recheck"] = false;
  ps["time_reference"] = false;
  ps["counters"] = tier;
  if (metrics.is_array() && !metrics.empty()) ps["metrics"] = metrics;
  preq["settings"] = ps;
  try {
    const evaluation_report prep = profiler->evaluate(preq);
    for (const auto& [w, roles] : prep.results)
      for (const auto& [role, r] : roles) {
        auto wit = rep.results.find(w);
        if (wit == rep.results.end()) continue;
        auto rit = wit->second.find(role);
        if (rit == wit->second.end() || rit->second.status != "ok") continue;
        if (r.detail.contains("counters")) rit->second.detail["counters"] = r.detail.at("counters");
        else if (r.status != "ok")
          rit->second.detail["counters"] = {{"error", "the profiling run gave " + r.status + ": " + r.message}};
      }
    for (const auto& e : prep.events) rep.events.push_back("profiling worker: " + e);
    // The profiling worker does not stay alive between requests: a process
    // that has used the CUPTI profiler is not left beside the timing worker.
    profiler->stop();
  } catch (const kopt::error& e) {
    profiler->stop();
    // A bad metric name is the caller's error; anything else leaves the
    // timing results intact and says why the counters are missing.
    const std::string what = e.what();
    if (what.find("CUPTI does not know") != std::string::npos) throw;
    rep.events.push_back(std::string("counters failed: ") + what);
  }
  return rep;
}

}  // namespace kopt::runner
