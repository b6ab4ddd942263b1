#include "runtime/evaluator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "config/operator.hpp"
#include "core/cubin_inspect.hpp"
#include "core/kernel_params.hpp"
#include "counters/metrics.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/evaluator_impl.hpp"

namespace kopt::harness {

using namespace detail;

// Waits for the stream with a deadline; a kernel that runs past it is a
// hang: the context cannot be recovered, so it is a fatal outcome.
void evaluator::impl::wait(int timeout_ms, const std::string& what) {
  cudaEvent_t ev;
  KOPT_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  KOPT_CUDA(cudaEventRecord(ev, stream));
  const auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) {
      cudaEventDestroy(ev);
      if (is_sticky(e))
        die("crashed",
            fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
      throw_cuda(e, what.c_str(), __FILE__, __LINE__);
    }
    if (clock_type::now() > deadline)
      die("timeout", fmt::format("{}: did not finish within {} ms (hang)", what, timeout_ms));
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  KOPT_CUDA(cudaEventDestroy(ev));
}

void evaluator::impl::load(subject& s, const std::vector<config::launch>& launches) {
  if (!s.compiled.ok()) return;
  cudaError_t e = cudaLibraryLoadData(&s.lib, s.compiled.cubin.data(), nullptr, nullptr, 0, nullptr,
                                      nullptr, 0);
  if (e != cudaSuccess) {
    cudaGetLastError();
    s.fail_status = "launch_error";
    s.fail_message = fmt::format("the module could not be loaded: {}", cudaGetErrorString(e));
    return;
  }
  const auto facts = inspect_cubin(s.compiled.cubin);
  for (const auto& l : launches) {
    if (s.kernels.count(l.kernel)) continue;
    cudaKernel_t k = nullptr;
    e = cudaLibraryGetKernel(&k, s.lib, l.kernel.c_str());
    if (e != cudaSuccess) {
      cudaGetLastError();
      s.fail_status = "launch_error";
      s.fail_message = fmt::format(
          "kernel '{}' is not in the module (kernels there: {}); declare it extern \"C\" "
          "__global__",
          l.kernel, fmt::join(facts.kernels, ", "));
      return;
    }
    s.kernels[l.kernel] = k;
    cudaFuncAttributes a{};
    if (cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(k)) == cudaSuccess) {
      s.static_shared[l.kernel] = static_cast<std::int64_t>(a.sharedSizeBytes);
      s.attributes[l.kernel] = {{"registers", a.numRegs},
                                {"static_shared_bytes", a.sharedSizeBytes},
                                {"local_bytes", a.localSizeBytes},
                                {"const_bytes", a.constSizeBytes},
                                {"max_threads_per_block", a.maxThreadsPerBlock},
                                {"ptx_version", a.ptxVersion},
                                {"binary_version", a.binaryVersion}};
    }
    cudaGetLastError();
  }
}

void evaluator::impl::evaluate(const json& req) {
  const std::string id = req.value("id", "");
  settings cfg;
  if (req.contains("settings")) {
    const auto& sj = req.at("settings");
    cfg.seeds = std::clamp(sj.value("seeds", cfg.seeds), 1, 16);
    cfg.base_seed = sj.value("base_seed", cfg.base_seed);
    cfg.time_reference = sj.value("time_reference", cfg.time_reference);
    cfg.recheck = sj.value("recheck", cfg.recheck);
    cfg.recompile = sj.value("recompile", cfg.recompile);
    cfg.interleave = sj.value("interleave", cfg.interleave);
    cfg.checks_only = sj.value("checks_only", cfg.checks_only);
    if (sj.contains("clock")) {
      const auto c = parse_clock(sj.value("clock", std::string()));
      if (!c) {
        emit({{"type", "error"},
              {"id", id},
              {"message", "settings.clock must be \"kernel\" or \"concurrent_kernel\", not " +
                              sj.at("clock").dump()}});
        return;
      }
      cfg.clock = *c;
    }
    cfg.launch_timeout_ms = sj.value("launch_timeout_ms", cfg.launch_timeout_ms);
    cfg.warmup_s = sj.value("warmup_s", cfg.warmup_s);
    if (sj.contains("timing")) cfg.rule = stopping_rule::from_json(sj.at("timing"));
    if (sj.contains("metrics") && sj.at("metrics").is_array() && !sj.at("metrics").empty()) {
      cfg.metrics = sj.at("metrics").get<std::vector<std::string>>();
      cfg.counters_tier = "custom";
    } else if (const std::string tier = sj.value("counters", std::string("none")); tier != "none") {
      try {
        cfg.metrics = counters::tier_metrics(counters::parse_tier(tier));
        cfg.counters_tier = tier;
      } catch (const kopt::error& e) {
        emit({{"type", "error"}, {"id", id}, {"message", e.what()}});
        return;
      }
    }
  }
  if (timing) {
    activity_timer::instance().set_clock(cfg.clock);
    measure_launch_floor();  // once per clock; reported with every timing
  }
  if (!cfg.metrics.empty()) {
    // Validate names against the chip before any GPU work: a typo in a
    // metric name is a request error, not a candidate outcome.
    try {
      ensure_profiler();
      profiler->catalog().describe(cfg.metrics);
    } catch (const counters::unknown_metric_error& e) {
      emit({{"type", "error"}, {"id", id}, {"code", "unknown_metric"}, {"message", e.what()}});
      return;
    } catch (const kopt::error& e) {
      emit(
          {{"type", "error"}, {"id", id}, {"code", "counters_unavailable"}, {"message", e.what()}});
      return;
    }
  }
  auto loaded = config::load_operator_text(req.at("operator").dump(), "<operator snapshot>", ".");
  if (!loaded.ok()) {
    std::string msg;
    for (const auto& d : loaded.diagnostics) msg += d.to_string() + "\n";
    emit({{"type", "error"},
          {"id", id},
          {"message", "operator snapshot does not validate:\n" + msg}});
    return;
  }
  const config::operator_config& op = *loaded.op;

  // Subjects: the reference always first; compile them all in parallel
  // (child processes) while nothing else needs the GPU yet.
  std::vector<subject> subjects;
  {
    subject r;
    r.role = "reference";
    r.cand = op.reference;
    r.params = default_parameters(r.cand);
    subjects.push_back(std::move(r));
  }
  for (const auto& sj : req.value("subjects", json::array())) {
    subject s;
    s.role = sj.value("role", "candidate");
    auto c = config::load_candidate_text(sj.at("candidate").dump(), "<candidate " + s.role + ">",
                                         ".", op);
    if (!c.ok()) {
      std::string msg;
      for (const auto& d : c.diagnostics) msg += d.to_string() + "\n";
      s.fail_status = "rejected_format";
      s.fail_message = msg;
    } else {
      s.cand = *c.cand;
      s.params = default_parameters(s.cand);
      const json params = sj.value("parameters", json::object());
      for (const auto& [k, v] : params.items()) s.params[k] = v.get<std::int64_t>();
    }
    subjects.push_back(std::move(s));
  }
  {
    std::vector<std::thread> th;
    for (auto& s : subjects) {
      if (!s.fail_status.empty()) continue;
      th.emplace_back([&s, &cfg, this] {
        compile::request rq;
        rq.use_cache = !(cfg.recompile && s.role != "reference");
        rq.source = s.cand.source;
        rq.arch = dev.arch;
        for (const auto& [k, v] : s.params) rq.defines[k] = v;
        rq.options = s.cand.compile_options;
        rq.name = s.role + ".cu";
        s.compiled = comp.compile(rq);
      });
    }
    for (auto& t : th) t.join();
  }
  for (auto& s : subjects) {
    if (s.fail_status.empty() && !s.compiled.ok()) {
      s.fail_status =
          s.compiled.st == compile::result::status::timeout ? "compile_timeout" : "compile_error";
      s.fail_message = s.compiled.log;
    } else if (const auto problems =
                   compile::integrity_problems(s.compiled, op.integ.allow_clock_reads);
               s.fail_status.empty() && !problems.empty()) {
      s.fail_status = "rejected_integrity";
      s.fail_message = fmt::format("{}", fmt::join(problems, "; "));
    } else if (s.fail_status.empty()) {
      // Arguments that do not match the kernel's parameters make the
      // driver pass garbage (or an integer as a pointer): refuse the plan
      // before the module is loaded (kernel_params.hpp).
      try {
        const auto sig =
            launch_signature_problems(s.cand.launches, kernel_parameters(s.compiled.cubin), s.role);
        if (!sig.empty()) {
          s.fail_status = "launch_error";
          s.fail_message = fmt::format("{}", fmt::join(sig, "; "));
        }
      } catch (const kopt::error& e) {
        s.fail_status = "launch_error";
        s.fail_message =
            std::string("cannot read the kernels' signatures from the cubin: ") + e.what();
      }
    }
    s.allow_clock_reads = op.integ.allow_clock_reads;
    if (s.fail_status.empty()) load(s, s.cand.launches);
    if (s.fail_status.empty()) resolve_module_data(s);
    json cj = s.compiled.to_json();
    cj["attributes"] = s.attributes;
    cj["arch"] = dev.arch;
    cj["parameters"] = s.params;
    cj["options"] = compile::effective_options(
        compile::request{s.cand.source, dev.arch, {}, s.cand.compile_options});
    emit({{"type", "compiled"},
          {"id", id},
          {"role", s.role},
          {"compile", cj},
          {"status", s.fail_status.empty() ? "ok" : s.fail_status},
          {"message", s.fail_message}});
  }
  subject& ref = subjects.front();

  std::vector<const config::workload*> wls;
  const auto wanted = req.value("workloads", std::vector<std::string>{});
  for (const auto& w : op.workloads)
    if (wanted.empty() || std::find(wanted.begin(), wanted.end(), w.id) != wanted.end())
      wls.push_back(&w);

  std::string& current_role = cur_role;
  std::string& current_workload = cur_workload;
  cur_id = id;
  current_role.clear();
  try {
    for (const auto* w : wls) {
      current_workload = w->id;
      emit({{"type", "workload_begin"}, {"id", id}, {"workload", w->id}});
      json results = json::array();
      evaluate_workload(op, *w, subjects, ref, cfg, results, current_role);
      emit({{"type", "workload_result"}, {"id", id}, {"workload", w->id}, {"results", results}});
    }
  } catch (const fatal_outcome& f) {
    emit({{"type", "fatal"},
          {"id", id},
          {"status", f.status},
          {"role", current_role},
          {"workload", current_workload},
          {"message", f.message}});
    std::cout.flush();
    std::_Exit(f.status == "timeout" ? exit_candidate_hang : exit_candidate_crashed);
  } catch (const cuda_failure& e) {
    if (e.sticky()) die("crashed", e.what());
    throw;
  }
  for (auto& s : subjects)
    if (s.lib) cudaLibraryUnload(s.lib);
  emit({{"type", "done"}, {"id", id}});
}

void evaluator::impl::evaluate_workload(const config::operator_config& op,
                                        const config::workload& w, std::vector<subject>& subjects,
                                        subject& ref, const settings& cfg, json& results,
                                        std::string& current_role) {
  workload_state st;
  st.tol = w.tol;
  st.tensors = resolve_tensors(op, w);
  const std::size_t sets = static_cast<std::size_t>(cfg.seeds);
  st.inputs.resize(sets);
  st.pristine.resize(sets);
  st.input_hash.resize(sets);
  // Inputs, pristine copies of in-place inputs, hashes and the candidates'
  // output buffers (with fresh guard canaries). Called again after a
  // subject fails: a candidate rejected for writing into an input or past
  // its buffers must not leave that damage to the next subject (seen on
  // the H200 with the replay corpus: later candidates were blamed).
  auto prepare_state = [&] {
    st.inputs.clear();
    st.pristine.clear();
    st.input_hash.clear();
    st.inputs.resize(sets);
    st.pristine.resize(sets);
    st.input_hash.resize(sets);
    for (std::size_t k = 0; k < sets; ++k) {
      for (const auto& t : st.tensors)
        if (!t.is_output) st.inputs[k].emplace(t.name, guarded(t.bytes, fresh(), stream));
      generate_inputs(op, w, st, k, st.seeds[k]);
      for (const auto& t : st.tensors)
        if (t.in_place) {
          guarded copy(t.bytes, fresh(), stream);
          KOPT_CUDA(cudaMemcpyAsync(copy.data(), st.inputs[k].at(t.name).data(),
                                    static_cast<std::size_t>(t.bytes), cudaMemcpyDeviceToDevice,
                                    stream));
          st.pristine[k].emplace(t.name, std::move(copy));
        }
      st.input_hash[k] = hash_inputs(st, k);
    }
    st.outputs.clear();
    for (const auto& t : st.tensors)
      if (t.is_output) st.outputs.emplace(t.name, guarded(t.bytes, fresh(), stream));
  };
  // Wall time of each phase (seconds), reported with the timing so that
  // "where does an evaluation's time go" is answered from the store.
  auto since = [](clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
  };
  const auto t_prepare = clock_type::now();
  for (std::size_t k = 0; k < sets; ++k) st.seeds.push_back(seed_for(cfg.base_seed, w.id, k));
  prepare_state();
  for (const auto& t : st.tensors)
    if (t.is_output) st.ref_outputs.emplace(t.name, guarded(t.bytes, fresh(), stream));

  auto fail_all = [&](const std::string& status, const std::string& message) {
    for (const auto& s : subjects)
      results.push_back({{"role", s.role}, {"status", status}, {"message", message}});
  };
  // Reference outputs, once per workload and seed (cached across requests).
  current_role = "reference";
  if (!ref.fail_status.empty()) {
    fail_all("reference_failed",
             "the reference could not run: " + ref.fail_status + ": " + ref.fail_message);
    return;
  }
  resolved_plan ref_plan;
  try {
    ref_plan = resolve_plan(op, ref.cand, w, ref.params);
  } catch (const kopt::error& e) {
    fail_all("reference_failed", std::string("reference launch plan: ") + e.what());
    return;
  }
  const std::string op_hash = op.content_hash();
  const double prepare_s = since(t_prepare);
  const auto t_reference = clock_type::now();
  try {
    for (std::size_t k = 0; k < sets; ++k) {
      const std::string key = fmt::format("{}|{}|{}", op_hash, w.id, st.seeds[k]);
      if (auto it = ref_cache.find(key); it != ref_cache.end()) {
        st.expected.push_back(it->second);
        continue;
      }
      const host_blocks got = checked_call(ref, ref_plan, st, k, true, 600000);
      auto owned = std::make_shared<std::vector<std::string>>();
      std::size_t bytes = 0;
      for (const auto& g : got) {
        owned->emplace_back(g.data(), g.size());
        bytes += g.size();
      }
      if (ref_cache_bytes + bytes < (std::size_t{8} << 30)) {
        ref_cache[key] = owned;
        ref_cache_bytes += bytes;
      }
      st.expected.push_back(std::move(owned));
    }
  } catch (const subject_failure& f) {
    fail_all("reference_failed", "the reference failed: " + f.status + ": " + f.message);
    return;
  }

  const double reference_s = since(t_reference);

  // Each subject in three steps: plan and correctness on every seed before
  // any timing; timing (interleaved sample by sample when the request asks,
  // settings.interleave); then the re-check and the counters pass.
  struct pending {
    subject* s = nullptr;
    json r;
    resolved_plan plan;
    json phases;
    bool live = false;  // passed so far
  };
  std::vector<pending> work;
  auto fail = [&](pending& p, const subject_failure& f) {
    p.live = false;
    p.r["status"] = f.status;
    p.r["message"] = f.message;
    if (!f.status.empty() && f.status != "compile_error" && f.status != "compile_timeout" &&
        f.status != "rejected_format")
      prepare_state();
  };
  for (auto& s : subjects) {
    if (&s == &ref && !cfg.time_reference) continue;
    current_role = s.role;
    pending p;
    p.s = &s;
    p.r = {{"role", s.role}, {"integrity", s.integrity_record()}};
    try {
      if (!s.fail_status.empty()) throw subject_failure{s.fail_status, s.fail_message};
      try {
        p.plan = resolve_plan(op, s.cand, w, s.params);
      } catch (const kopt::error& e) {
        throw subject_failure{"launch_error", e.what()};
      }
      if (auto problems = validate_plan(p.plan, dev.limits, s.static_shared); !problems.empty())
        throw subject_failure{"launch_error", fmt::format("{}", fmt::join(problems, "; "))};
      json launches = json::array();
      for (const auto& l : p.plan.launches) {
        json lj = to_json(l);
        int blocks_per_sm = 0;
        // The occupancy of a kernel with more than 48 KiB of dynamic shared
        // memory is 0 until it has opted in (the launch does that later, and
        // reports a failure to opt in): without this every such kernel (the
        // wgmma attention and GEMM plans) had unknown occupancy and no waves.
        if (l.shared_bytes > 48 * 1024 &&
            cudaFuncSetAttribute(reinterpret_cast<const void*>(s.kernels.at(l.kernel)),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(l.shared_bytes)) != cudaSuccess)
          cudaGetLastError();
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &blocks_per_sm, reinterpret_cast<const void*>(s.kernels.at(l.kernel)),
                static_cast<int>(l.block[0] * l.block[1] * l.block[2]),
                static_cast<std::size_t>(l.shared_bytes)) == cudaSuccess)
          lj["occupancy_blocks_per_sm"] = blocks_per_sm;
        cudaGetLastError();
        launches.push_back(lj);
      }
      p.r["launches"] = launches;
      p.phases = {{"workload_prepare", prepare_s}, {"workload_reference", reference_s}};
      const auto t_phase = clock_type::now();
      json checks = json::array();
      for (std::size_t k = 0; k < sets; ++k) {
        const host_blocks got = checked_call(s, p.plan, st, k, &s == &ref, cfg.launch_timeout_ms);
        bool ok = true;
        json per = compare_all(op, st, data_of(got), data_of(*st.expected[k]), ok);
        checks.push_back({{"seed", st.seeds[k]}, {"passed", ok}, {"outputs", per}});
        if (!ok) {
          p.r["correctness"] = checks;
          throw subject_failure{
              "incorrect", fmt::format("output differs from the reference (seed {})", k), {}};
        }
      }
      p.r["correctness"] = checks;
      p.phases["checks"] = since(t_phase);
      p.live = true;
    } catch (const subject_failure& f) {
      fail(p, f);
    }
    work.push_back(std::move(p));
  }

  if (!timing || cfg.checks_only) {
    // Profiling worker (--profile-only): no clock in this process; checks
    // only (settings.checks_only, the compute-sanitizer run): nothing else.
    for (auto& p : work) {
      if (!p.live) continue;
      current_role = p.s->role;
      if (!cfg.checks_only) {
        json c = profile_subject(op, *p.s, p.plan, st, cfg);
        c["attributes"] = p.s->attributes;
        p.r["counters"] = std::move(c);
      }
      p.r["status"] = "ok";
    }
    for (auto& p : work) results.push_back(std::move(p.r));
    return;
  }

  std::vector<pending*> live;
  for (auto& p : work)
    if (p.live) live.push_back(&p);
  std::map<pending*, timing_out> timed;
  // (At most 16: the timing loop keeps one guard-damage counter per subject.)
  if (cfg.interleave && live.size() >= 2 && live.size() <= 16) {
    std::vector<subject*> subs;
    std::vector<const resolved_plan*> plans;
    for (auto* p : live) {
      subs.push_back(p->s);
      plans.push_back(&p->plan);
    }
    current_role = fmt::format("{} (interleaved)", live.front()->s->role);
    const auto t_phase = clock_type::now();
    try {
      auto tms = time_subjects(op, subs, plans, st, cfg);
      for (std::size_t j = 0; j < live.size(); ++j) timed[live[j]] = std::move(tms[j]);
      for (auto* p : live) p->phases["timing"] = since(t_phase);
    } catch (const subject_failure&) {
      // A failure during interleaved timing names no single subject for
      // sure: time each alone below, where it is attributed exactly.
      timed.clear();
      prepare_state();
    }
  }
  for (auto* p : live) {
    current_role = p->s->role;
    try {
      auto t_phase = clock_type::now();
      if (!timed.count(p)) {
        timed[p] = time_subject(op, *p->s, p->plan, st, cfg);
        p->phases["timing"] = since(t_phase);
      }
      auto& tm = timed.at(p);
      p->r["timing"] = tm.j;
      t_phase = clock_type::now();
      if (tm.sample_check_failed) {
        p->r["sample_check"] = tm.sample_check;
        throw subject_failure{
            "rejected_integrity",
            "the output of a timed sample differs from the reference (outputs are filled the "
            "same way before checked and timed calls): the kernel's result depends on whether "
            "it is being checked"};
      }
      // Re-check on inputs it has never seen: catches caching and replay.
      if (cfg.recheck) {
        bool ok = true;
        p->r["recheck"] = recheck(op, w, *p->s, ref, ref_plan, p->plan, st, cfg, current_role, ok);
        if (!ok)
          throw subject_failure{"rejected_integrity",
                                "correct during the checks but wrong on fresh inputs after "
                                "timing (caching or replay of results)"};
        p->phases["recheck"] = since(t_phase);
      }
      p->r["timing"]["phases_s"] = p->phases;
      if (!cfg.metrics.empty()) {
        current_role = p->s->role;
        json c = profile_subject(op, *p->s, p->plan, st, cfg);
        c["attributes"] = p->s->attributes;
        p->r["counters"] = std::move(c);
      }
      p->r["status"] = "ok";
    } catch (const subject_failure& f) {
      fail(*p, f);
    }
  }
  for (auto& p : work) results.push_back(std::move(p.r));
}

evaluator::evaluator(device_info dev, const compile::compiler& comp, emit_fn emit, bool timing)
    : p_(std::make_unique<impl>(std::move(dev), comp, std::move(emit), timing)) {}
evaluator::~evaluator() = default;
void evaluator::evaluate(const nlohmann::json& request) {
  p_->evaluate(request);
}
nlohmann::json evaluator::calibrate() {
  return p_->calibrate();
}
nlohmann::json evaluator::launch_floor() {
  return p_->launch_floor_json();
}

bool evaluator::use_launch_floor(const nlohmann::json& measured) {
  if (!measured.is_object() || !measured.contains("median_ns") ||
      !measured.at("median_ns").is_number())
    return false;
  const auto c = parse_clock(measured.value("clock", std::string()));
  const double ns = measured.at("median_ns").get<double>();
  if (!c || !(ns > 0) || !std::isfinite(ns)) return false;
  p_->launch_floor[*c] = ns;
  return true;
}

}  // namespace kopt::harness
