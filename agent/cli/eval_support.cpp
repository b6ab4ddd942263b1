#include "cli/eval_support.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <sstream>

#include "cli/exit_codes.hpp"
#include "common/data_paths.hpp"
#include "common/error.hpp"
#include "common/subprocess.hpp"
#include "compile/compiler.hpp"
#include "core/kernel_params.hpp"
#include "core/plan.hpp"
#include "core/roofline.hpp"
#include "runner/sanitize.hpp"
#include "runner/worker_client.hpp"


namespace kopt::cli {

using json = nlohmann::json;

void add_eval_options(CLI::App& cmd, eval_options& o) {
  cmd.add_option("--gpu", o.gpu, "CUDA device ordinal for the worker")->capture_default_str();
  cmd.add_option("--worker", o.worker,
                 "kopt-worker executable (default: $KOPT_WORKER, then beside kopt)");
  cmd.add_option(
      "--launch-prefix", o.launch_prefix,
      "command that starts the worker, e.g. \"srun --gres=gpu:1 -N1\" (split on spaces, no shell)");
  cmd.add_option("--seeds", o.seeds, "input sets checked per workload")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd.add_option("--min-time", o.min_time_s,
                 "seconds of measuring per workload before the noise rule may stop")
      ->capture_default_str();
  cmd.add_option("--max-time", o.max_time_s, "hard limit of measuring per workload, seconds")
      ->capture_default_str();
  cmd.add_flag("--time-reference", o.time_reference, "also time the reference");
  cmd.add_option("--arch", o.arch, "architecture for compile checks when no GPU is present")
      ->capture_default_str();
  cmd.add_option("--peaks", o.peaks_file, "GPU peak table (default: configs/hardware/gpus.json)");
  cmd.add_option("--launch-timeout-ms", o.launch_timeout_ms, "a launch that runs longer is a hang")
      ->capture_default_str();
  cmd.add_option("--base-seed", o.base_seed, "base seed of the generated inputs")
      ->capture_default_str();
  cmd.add_option("--clock", o.clock,
                 "CUPTI record kind that times kernels: concurrent_kernel (block execution, as Nsight "
                 "Systems shows it) or kernel (serialized; includes the launch's front-end work, about 2 us "
                 "more per launch on an H200); docs/methodology.md")
      ->check(CLI::IsMember({"kernel", "concurrent_kernel"}))
      ->capture_default_str();
  cmd.add_flag(
      "--sanitize", o.sanitize,
      "after timing, run each subject that passed under compute-sanitizer (memcheck, racecheck, "
      "initcheck) on its smallest workload, in a throwaway worker; an error makes it "
      "rejected_integrity "
      "(skipped, with the reason, where compute-sanitizer is missing)");
}

std::optional<runner::subject_spec> load_candidate_subject(const std::string& file, const config::operator_config& op) {
  auto c = config::load_candidate_file(file, op);
  for (const auto& d : c.diagnostics) std::cerr << d.to_string() << '\n';
  if (!c.ok()) return std::nullopt;
  return runner::subject_spec{"candidate", store::candidate_origin::llm, c.cand->to_json(), {}, {}, {}, file};
}

std::vector<runner::subject_spec> config_subjects(const config::operator_config& op) {
  std::vector<runner::subject_spec> subjects;
  if (op.baseline)
    subjects.push_back({"baseline", store::candidate_origin::baseline, op.baseline->to_json(), {}, {}, {}, {}});
  if (op.seed) subjects.push_back({"seed", store::candidate_origin::seed, op.seed->to_json(), {}, {}, {}, {}});
  return subjects;
}

std::vector<std::string> resolve_workloads(const config::operator_config& op, const std::vector<std::string>& wanted,
                                           const std::string& config_file) {
  for (const auto& w : wanted)
    if (std::none_of(op.workloads.begin(), op.workloads.end(), [&](const auto& x) { return x.id == w; }))
      throw kopt::config_error(fmt::format("--workloads: no workload \"{}\" in {}", w, config_file));
  if (!wanted.empty()) return wanted;
  std::vector<std::string> all;
  for (const auto& w : op.workloads) all.push_back(w.id);
  return all;
}

namespace {

// The name NVRTC gives the program, which its log repeats on every line:
// the file the source came from (as the config names it) when there is
// one, else the config's file and the role, so that an error is found
// where it is, not in a "reference.cu" that exists nowhere.
std::string program_name(const config::operator_config& op, const std::string& role,
                         const std::string& source_file, const std::string& candidate_file) {
  if (!source_file.empty()) return source_file;
  if (!candidate_file.empty()) return candidate_file + " (" + role + ")";
  const std::string cfg = op.file.empty() ? std::string("<config>") : op.file.filename().string();
  return cfg + " (" + role + ")";
}

// The launch plan of a subject: the config's own candidates directly, any
// other one (an LLM answer, --candidate FILE) validated again from its JSON.
std::optional<config::candidate> subject_candidate(const config::operator_config& op,
                                                   const std::string& role, const json& cj) {
  if (role == "reference") return op.reference;
  if (role == "baseline" && op.baseline) return op.baseline;
  if (role == "seed" && op.seed) return op.seed;
  auto r = config::load_candidate_text(cj.dump(), role, ".", op);
  if (r.ok()) return r.cand;
  return std::nullopt;
}

// Static + dynamic shared memory of every launch on every workload against
// the architecture's opt-in limit; one line per distinct problem, naming
// the workloads it affects.
std::vector<std::string> shared_memory_problems(const config::operator_config& op,
                                                const config::candidate& c,
                                                const compile::result& r, const std::string& arch) {
  std::vector<std::string> out;
  const auto limit = harness::max_shared_optin_bytes(arch);
  if (!limit) return out;
  harness::device_limits lim;
  lim.max_shared_optin = *limit;
  std::map<std::string, std::int64_t> static_shared;
  for (const auto& [k, info] : r.kernels) static_shared[k] = info.shared_static_bytes;
  std::vector<std::pair<std::string, std::vector<std::string>>> seen;  // problem -> workloads
  for (const auto& w : op.workloads) {
    std::vector<std::string> ps;
    try {
      ps = harness::validate_plan(harness::resolve_plan(op, c, w, harness::default_parameters(c)),
                                  lim, static_shared);
    } catch (const kopt::error& e) {
      ps.push_back(e.what());
    }
    for (const auto& p : ps) {
      if (p.find("shared memory") == std::string::npos)
        continue;  // the rest: the worker's device limits
      auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& x) { return x.first == p; });
      if (it == seen.end())
        seen.push_back({p, {w.id}});
      else
        it->second.push_back(w.id);
    }
  }
  for (const auto& [p, ws] : seen)
    out.push_back(fmt::format("{} on {} (workload{} {})", p, arch, ws.size() == 1 ? "" : "s",
                              fmt::join(ws, ", ")));
  return out;
}

compile_check check_one(
    const compile::compiler& comp, const config::operator_config& op, const std::string& role,
    const compile::request& rq,
    const std::function<std::vector<std::string>(const compile::result&)>& extra,
    const std::string& arch) {
  const auto r = comp.compile(rq);
  compile_check c;
  c.role = role;
  // The worker's own rule (clock reads refused unless the operator's
  // integrity.allow_clock_reads), so a compile check says what a run would.
  const auto integrity = compile::integrity_problems(r, op.integ.allow_clock_reads);
  c.status =
      r.ok() ? (integrity.empty() ? "ok" : "rejected_integrity") : compile::status_name(r.st);
  c.log = r.ok() && !integrity.empty() ? fmt::format("{}", fmt::join(integrity, "; ")) : r.log;
  if (c.status == "ok") {
    std::vector<std::string> problems;
    try {
      problems = extra(r);
    } catch (const kopt::error& e) {
      problems.push_back(std::string("cannot check the kernels' signatures: ") + e.what());
    }
    if (!problems.empty()) {
      c.status = "launch_error";
      c.log = fmt::format("{}", fmt::join(problems, "\n"));
    }
  }
  c.meta = r.to_json();
  c.meta["arch"] = arch;
  c.meta["parameters"] = rq.defines;
  c.meta["options"] = compile::effective_options(rq);
  c.meta["program"] = rq.name;
  return c;
}

}  // namespace

std::vector<compile_check> compile_check_all(const config::operator_config& op,
                                             const std::vector<runner::subject_spec>& subjects,
                                             const eval_options& o) {
  struct item {
    std::string role;
    json cj;
    std::string file;  // a --candidate FILE
  };
  std::vector<item> all = {{"reference", op.reference.to_json(), {}}};
  for (const auto& s : subjects) {
    // `kopt eval --candidate FILE` keeps the file's name in the note.
    std::error_code ec;
    const bool from_file =
        s.role == "candidate" && s.note && std::filesystem::is_regular_file(*s.note, ec);
    all.push_back({s.role, s.candidate, from_file ? *s.note : std::string()});
  }
  const std::string worker = o.worker.empty() ? runner::default_worker_exe() : o.worker;
  const compile::compiler comp(worker, compile::default_cache_dir());
  std::vector<compile_check> out;
  for (const auto& [role, cj, file] : all) {
    const auto cand = subject_candidate(op, role, cj);
    compile::request rq;
    rq.source = cj.value("source", "");
    rq.arch = o.arch;
    const json params = cj.value("parameters", json::object());
    for (const auto& [k, v] : params.items())
      if (v.contains("default")) rq.defines[k] = v.at("default").get<std::int64_t>();
    rq.options = cj.value("compile_options", std::vector<std::string>{});
    rq.name = program_name(op, role, cand ? cand->source_file : std::string(), file);
    out.push_back(check_one(
        comp, op, role, rq,
        [&](const compile::result& r) {
          std::vector<std::string> problems;
          if (!cand) return problems;
          problems = harness::launch_signature_problems(cand->launches,
                                                        harness::kernel_parameters(r.cubin), role);
          for (auto& p : shared_memory_problems(op, *cand, r, o.arch))
            problems.push_back(role + ": " + p);
          return problems;
        },
        o.arch));
  }
  // Generator kernels run on the GPU before anything else: a mistake there
  // was found only on a GPU. Compiled as the worker compiles them (axis
  // values of the first workload when the source uses KOPT_AXIS_).
  for (const auto& t : op.inputs) {
    if (!t.gen || t.gen->k != config::generator::kind::kernel) continue;
    const std::string role = "generator:" + t.name;
    compile::request rq;
    rq.source = t.gen->kernel_source;
    rq.arch = o.arch;
    rq.name = (op.file.empty() ? std::string("<config>") : op.file.filename().string()) +
              " (generator of input " + t.name + ")";
    if (rq.source.find("KOPT_AXIS_") != std::string::npos && !op.workloads.empty())
      for (const auto& [n, v] : config::workload_names(op, op.workloads.front()))
        rq.defines["KOPT_AXIS_" + n] = v;
    const std::string kernel = t.gen->kernel_name;
    out.push_back(check_one(
        comp, op, role, rq,
        [&](const compile::result& r) {
          return harness::generator_signature_problems(kernel, harness::kernel_parameters(r.cubin),
                                                       role);
        },
        o.arch));
  }
  return out;
}

bool all_compiled(const std::vector<compile_check>& checks) {
  return std::all_of(checks.begin(), checks.end(),
                     [](const compile_check& c) { return c.status == "ok"; });
}

namespace {

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

}  // namespace

namespace {

// The smallest of `workloads` by roofline bytes (then FLOPs): where the
// sanitizer's slowdown costs least.
std::string smallest_workload(const config::operator_config& op,
                              const std::vector<std::string>& workloads) {
  std::string best;
  double best_size = 0;
  for (const auto& id : workloads) {
    const config::workload* w = op.find_workload(id);
    if (!w) continue;
    double size = 0;
    try {
      const auto c = harness::roofline_for(op, *w);
      size = c.bytes > 0 ? c.bytes : c.flops;
    } catch (const std::exception&) {
      size = 0;
    }
    if (best.empty() || size < best_size) {
      best = id;
      best_size = size;
    }
  }
  return best;
}

// --sanitize: each subject that passed everywhere, alone, under the tools.
void run_sanitizer(const config::operator_config& op,
                   const std::vector<runner::subject_spec>& subjects,
                   const std::vector<std::string>& workloads, const runner::worker_options& wo,
                   store::store* db, std::optional<std::int64_t> campaign_id, eval_outcome& out) {
  const std::string w = smallest_workload(op, workloads);
  for (const auto& s : subjects) {
    auto it = out.summaries.find(s.role);
    if (it == out.summaries.end() || it->second.overall_status != protocol::outcome::ok ||
        w.empty())
      continue;
    json sj = {{"role", s.role}, {"candidate", s.candidate}};
    if (!s.parameters.empty()) sj["parameters"] = s.parameters;
    const json req = {
        {"operator", op.snapshot()}, {"subjects", json::array({sj})}, {"workloads", {w}}};
    const auto rep = runner::sanitize(wo, req);
    json rj = rep.to_json();
    rj["workload"] = w;
    out.sanitize[s.role] = rj;
    if (rep.rejected()) {
      it->second.overall_status = protocol::outcome::rejected_integrity;
      out.exit_code = exit_invalid;
    }
    if (db && campaign_id) {
      store::event_record ev;
      ev.campaign_id = *campaign_id;
      ev.kind = "sanitize";
      ev.message = fmt::format("{} on {}: compute-sanitizer {}{}", s.role, w, rep.status,
                               rep.reason.empty() ? "" : ": " + rep.reason);
      db->add_event(ev);
    }
  }
}

}  // namespace

eval_outcome run_evaluation(const config::operator_config& op,
                            const std::vector<runner::subject_spec>& subjects,
                            const std::vector<std::string>& workloads, const eval_options& o,
                            const context* ctx, const std::string& stage,
                            std::optional<std::int64_t> campaign_id,
                            std::optional<std::int64_t> iteration_id, progress_meter* progress) {
  eval_outcome out;
  runner::worker_options wo;
  wo.worker_exe = o.worker;
  wo.launch_prefix = split_words(o.launch_prefix);
  wo.gpu = o.gpu;
  if (wo.worker_exe.empty()) wo.worker_exe = runner::default_worker_exe();
  runner::worker_client client(wo);
  const auto start_t0 = std::chrono::steady_clock::now();
  if (progress) progress->note("starting the worker");
  try {
    client.start();
    out.worker_start_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_t0).count();
    out.gpu = true;
  } catch (const kopt::error& e) {
    out.no_gpu_reason = e.what();
  }

  // Store: the operator, and (unless the caller has one) a campaign that
  // holds this evaluation.
  std::optional<store::store> db;
  store::row_id operator_id = 0;
  // A campaign created here belongs to this evaluation, which must end it
  // (done or failed): nothing else will, and a `running` row would look like
  // work in progress forever. A caller's campaign is the caller's to end.
  const bool owns_campaign = ctx && !campaign_id;
  if (ctx) {
    db.emplace(ctx->open_writer());
    operator_id = store_operator(*db, op).operator_id;
    if (!campaign_id) {
      store::campaign_record c;
      c.operator_id = operator_id;
      c.state = store::campaign_state::running;
      c.provider = "eval";
      c.settings = {{"kind", "eval"}, {"seeds", o.seeds}, {"workloads", workloads}};
      campaign_id = db->create_campaign(c);
    }
    out.campaign_id = campaign_id;
  }

  if (!out.gpu) {
    if (progress) progress->note("no GPU: compile-checking for " + o.arch);
    out.compile_checks = compile_check_all(op, subjects, o);
    // Something that cannot compile (or whose plan cannot launch) is a
    // problem of the input, whatever the machine: exit 1, as kopt bench
    // does; 5 (no GPU) only when everything that can be checked is fine.
    out.exit_code = all_compiled(out.compile_checks) ? exit_no_gpu : exit_invalid;
    if (db) {
      // Keep what was learned: candidates and their compile checks.
      for (const auto& s : subjects) {
        const auto cid = db->add_candidate(runner::candidate_row(s, *campaign_id, iteration_id));
        out.candidate_ids[s.role] = cid;
        for (const auto& cc : out.compile_checks)
          if (cc.role == s.role) {
            store::compilation_record cr;
            cr.candidate_id = cid;
            cr.parameter_values = cc.meta.value("parameters", json::object());
            cr.arch = o.arch;
            cr.options = cc.meta.value("options", json::array());
            cr.status = cc.status == "ok"                   ? "ok"
                        : cc.status == "rejected_integrity" ? "rejected"
                        : cc.status == "timeout"            ? "timeout"
                        : cc.status == "crashed"            ? "crashed"
                                                            : "error";
            cr.log = cc.log;
            cr.duration_ms = cc.meta.value("duration_ms", 0.0);
            cr.compiler_version = "nvrtc " + cc.meta.value("nvrtc_version", "");
            if (!cc.meta.value("cubin_hash", "").empty())
              cr.cubin_hash = cc.meta.value("cubin_hash", "");
            db->add_compilation(cr);
          }
      }
      store::event_record ev;
      ev.campaign_id = *campaign_id;
      ev.kind = "needs_gpu";
      ev.message = "compile-checked only; correctness and timing need a GPU: " + out.no_gpu_reason;
      db->add_event(ev);
      if (owns_campaign)
        db->set_campaign_state(*campaign_id, store::campaign_state::failed,
                               "no GPU: " + out.no_gpu_reason);
    }
    return out;
  }

  try {
    protocol::evaluate_request req;
    req.operator_snapshot = op.snapshot();
    for (const auto& s : subjects) {
      protocol::subject ps{s.role, s.candidate, {}};
      if (s.parameters.is_object())
        ps.parameters = s.parameters.get<std::map<std::string, std::int64_t>>();
      req.subjects.push_back(std::move(ps));
    }
    req.workloads = workloads;
    req.settings.seeds = o.seeds;
    req.settings.base_seed = o.base_seed;
    req.settings.time_reference = o.time_reference;
    req.settings.launch_timeout_ms = o.launch_timeout_ms;
    req.settings.recompile = o.recompile;
    req.settings.clock = json(o.clock).get<protocol::clock_kind>();
    req.settings.timing.min_time_s = o.min_time_s;
    req.settings.timing.max_time_s = o.max_time_s;
    req.settings.counters = o.counters;
    req.settings.metrics = o.metrics;
    // Counters (kopt profile) come from a separate --profile-only worker.
    runner::worker_client profiler(runner::profiler_options(wo));
    std::optional<harness::gpu_peaks> peaks;  // looked up once the first report names the GPU
    std::vector<std::string> roles;
    for (const auto& s : subjects) roles.push_back(s.role);
    if (o.time_reference) roles.push_back("reference");
    using steady = std::chrono::steady_clock;
    for (int rep = 0; rep < std::max(1, o.repeat); ++rep) {
      eval_timing t;
      const auto t0 = steady::now();
      out.report =
          runner::evaluate_with_counters(client, &profiler, req, [progress, &o](const protocol::message& m) {
            if (const auto* r = std::get_if<protocol::workload_result>(&m)) {
              spdlog::info("workload {} done", r->workload);
              if (progress) progress->step("workload " + r->workload);
              if (o.on_workload_done) o.on_workload_done(r->workload);
            }
          });
      const auto t1 = steady::now();
      t.request_s = std::chrono::duration<double>(t1 - t0).count();
      for (const auto& [role, msg] : out.report.compiled) {
        if (role == "reference" || msg.compile.empty()) continue;
        const json& c = msg.compile;
        ++t.compiles;
        if (c.value("cached", false)) ++t.compiles_cached;
        t.compile_ms = std::max(t.compile_ms, c.value("duration_ms", 0.0));
      }
      if (rep == 0) {
        if (const auto pf = data::peaks_file(o.peaks_file); !pf.empty())
          peaks = harness::find_peaks(harness::load_peak_table(pf),
                                      out.report.device.value("name", ""));
        if (!peaks)
          spdlog::warn("no peak figures for GPU '{}': fractions of speed of light are not computed",
                       out.report.device.value("name", ""));
      }
      out.summaries.clear();
      for (const auto& r : roles)
        out.summaries[r] = runner::summarize(op, out.report, r, peaks, workloads);
      // With --repeat, a failure in any run fails the command, not only in the last.
      for (const auto& [r, sm] : out.summaries)
        if (sm.overall_status != protocol::outcome::ok) out.exit_code = exit_invalid;
      if (db) {
        out.candidate_ids = runner::record_report(*db, *campaign_id, iteration_id, operator_id,
                                                  subjects, out.report, out.summaries, stage);
        for (const auto& e : out.report.events) {
          store::event_record ev;
          ev.campaign_id = *campaign_id;
          ev.kind = "worker_restart";
          ev.message = e;
          db->add_event(ev);
        }
      }
      t.store_s = std::chrono::duration<double>(steady::now() - t1).count();
      out.timings.push_back(t);
      if (o.repeat > 1)
        spdlog::info(
            "run {}/{}: {:.3f} s from request to stored result ({} of {} compiles cached, longest "
            "{:.0f} ms)",
            rep + 1, o.repeat, t.total_s(), t.compiles_cached, t.compiles, t.compile_ms);
    }
    client.stop();
    profiler.stop();
    if (o.sanitize)
      run_sanitizer(op, subjects, workloads, wo, db ? &*db : nullptr, campaign_id, out);
  } catch (const std::exception& e) {
    // A request the worker refused, a worker that cannot be restarted, a
    // store error: the owned campaign ends failed with the reason.
    if (db && owns_campaign) {
      try {
        db->set_campaign_state(*campaign_id, store::campaign_state::failed,
                               std::string("evaluation failed: ") + e.what());
      } catch (const std::exception& e2) {
        spdlog::error("campaign {}: cannot record the failure: {}", *campaign_id, e2.what());
      }
    }
    throw;
  }
  if (db && owns_campaign)
    db->set_campaign_state(*campaign_id, store::campaign_state::done, "evaluated");
  return out;
}

json eval_outcome::to_json() const {
  json j = {{"gpu", gpu}};
  if (!gpu) {
    j["needs_gpu"] = "correctness and timing need a GPU: " + no_gpu_reason;
    json cc = json::array();
    for (const auto& c : compile_checks)
      cc.push_back({{"role", c.role}, {"status", c.status}, {"compile", c.meta}});
    j["compile_checks"] = cc;
  } else {
    j["device"] = report.device;
    if (!report.launch_floor.is_null()) j["launch_floor"] = report.launch_floor;
    json s = json::object();
    for (const auto& [r, sum] : summaries) s[r] = sum.to_json();
    j["results"] = s;
    j["events"] = report.events;
    if (!sanitize.empty()) j["sanitize"] = sanitize;
    json tj = json::array();
    for (const auto& t : timings)
      tj.push_back({{"request_s", t.request_s}, {"store_s", t.store_s}, {"request_to_stored_s", t.total_s()},
                    {"compile_ms", t.compile_ms}, {"compiles", t.compiles}, {"compiles_cached", t.compiles_cached}});
    j["timing"] = {{"worker_start_s", worker_start_s}, {"runs", tj}};
  }
  if (campaign_id) j["campaign_id"] = *campaign_id;
  j["candidate_ids"] = candidate_ids;
  return j;
}

std::string eval_outcome::render() const {
  std::string out;
  if (!gpu) {
    out += "Compile checks (" +
           (compile_checks.empty() ? std::string("none")
                                   : compile_checks.front().meta.value("arch", "")) +
           "):\n";
    for (const auto& c : compile_checks) {
      out += fmt::format("  {:<12} {}", c.role, c.status);
      if (c.status == "ok") {
        const json kernels = c.meta.value("kernels", json::object());
        for (const auto& [k, v] : kernels.items())
          out += fmt::format("  [{}: {} registers, {} B spills]", k, v.value("registers", -1),
                             v.value("spill_store_bytes", 0) + v.value("spill_load_bytes", 0));
      }
      out += "\n";
      if (c.status != "ok") out += "    " + c.log.substr(0, 2000) + "\n";
    }
    out += "\nNot done: correctness checks and timing need a GPU.\n  " + no_gpu_reason + "\n";
  } else {
    out +=
        fmt::format("GPU: {} (driver {}, {} SMs)\n", report.device.value("name", ""),
                    report.device.value("driver_version", ""), report.device.value("sm_count", 0));
    for (const auto& [r, s] : summaries) out += "\n" + runner::render_table(s);
    for (const auto& e : report.events) out += "event: " + e + "\n";
    for (const auto& [role, r] : sanitize)
      out += fmt::format("compute-sanitizer ({}, {}): {}{}\n", role, r.value("workload", ""),
                         r.value("status", ""),
                         r.value("reason", "").empty() ? "" : ": " + r.value("reason", ""));
    if (timings.size() > 1) {
      out += fmt::format("\nworker start: {:.3f} s\n", worker_start_s);
      for (std::size_t i = 0; i < timings.size(); ++i)
        out += fmt::format(
            "run {}: {:.3f} s from request to stored result (worker {:.3f} s, store {:.3f} s; compile {:.0f} ms, "
            "{} of {} cached)\n",
            i + 1, timings[i].total_s(), timings[i].request_s, timings[i].store_s, timings[i].compile_ms,
            timings[i].compiles_cached, timings[i].compiles);
    }
  }
  if (campaign_id) out += fmt::format("\nstored as campaign {}\n", *campaign_id);
  return out;
}

}  // namespace kopt::cli
