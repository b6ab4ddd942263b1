// Shared by `kopt eval` and `kopt run`: run an evaluation through a worker,
// or, when no GPU is usable, compile-check what can be compiled and say what
// needed the GPU; summarize per role; store the result.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "campaign/session.hpp"
#include "cli/context.hpp"
#include "cli/progress.hpp"
#include "config/operator.hpp"
#include "runner/evaluation.hpp"
#include "runner/record.hpp"

namespace kopt::cli {

struct eval_options {
  int gpu = 0;
  std::string worker;         // kopt-worker path (default: beside kopt)
  std::string launch_prefix;  // e.g. "srun --gres=gpu:1 -N1" (split on spaces)
  int seeds = 3;
  double min_time_s = 0.1;
  double max_time_s = 1.0;
  bool time_reference = false;
  std::string arch = "sm_90a";  // for compile checks without a GPU
  std::string peaks_file;       // default: configs/hardware/gpus.json
  int launch_timeout_ms = 10000;
  std::uint64_t base_seed = 20261130;
  // Counters pass after timing: "none", "default" or "full"; or an explicit
  // metric list (wins over the tier).
  std::string counters = "none";
  std::vector<std::string> metrics;
  // Evaluate this many times over the same worker (a benchmark of the
  // steady state a campaign sees: worker started, reference outputs cached).
  int repeat = 1;
  // Compile the candidate again on every run, ignoring cached cubins.
  bool recompile = false;
  // CUPTI record kind that times kernels: "kernel" or "concurrent_kernel".
  std::string clock = "concurrent_kernel";
  // After timing, run each subject that passed under compute-sanitizer
  // (memcheck, racecheck, initcheck) on its smallest workload (docs/integrity.md).
  bool sanitize = false;
  // Called as each workload's result arrives (progress reports: kopt mcp).
  std::function<void(const std::string& workload)> on_workload_done;
};

void add_eval_options(CLI::App& cmd, eval_options& o);

// A candidate file checked against `op` as subject "candidate"; its
// diagnostics go to stderr; nullopt when it does not validate.
std::optional<runner::subject_spec> load_candidate_subject(const std::string& file, const config::operator_config& op);

// The config's own kernels as subjects: its baseline and seed, those it has.
std::vector<runner::subject_spec> config_subjects(const config::operator_config& op);

// `wanted` checked against the operator's workloads (kopt::config_error
// naming an unknown id and `config_file`), or every workload when empty.
std::vector<std::string> resolve_workloads(const config::operator_config& op, const std::vector<std::string>& wanted,
                                           const std::string& config_file);


// The campaign session's settings for `kopt run` (run.cpp): the
// --llm-config file's "llm" section (or the whole file), kopt's own
// knowledge base and templates, the peak table, the counters tier.
campaign::session_options run_session_options(const std::string& provider,
                                              const std::string& llm_config,
                                              const eval_options& run, const std::string& counters);

struct compile_check {
  std::string role;  // reference, baseline, seed, candidate, generator:<input>
  // ok, compile_error, timeout, crashed, rejected_integrity, launch_error
  // (the plan does not match the kernel's signature or exceeds the
  // architecture's shared memory)
  std::string status;
  std::string log;
  nlohmann::json meta;
};

// Wall time of one evaluation's phases, seconds.
struct eval_timing {
  double request_s = 0;  // request written to the worker -> its last result read
  double store_s = 0;    // summaries and the SQLite transaction
  // The subjects' compiles in that run: the longest, and how many came from
  // the cubin cache (with --recompile none should).
  double compile_ms = 0;
  int compiles_cached = 0, compiles = 0;
  double total_s() const { return request_s + store_s; }
};

struct eval_outcome {
  bool gpu = false;
  std::string no_gpu_reason;
  std::vector<compile_check> compile_checks;
  runner::evaluation_report report;
  std::map<std::string, runner::evaluation_summary> summaries;
  std::optional<std::int64_t> campaign_id;
  std::map<std::string, std::int64_t> candidate_ids;
  double worker_start_s = 0;          // spawn -> hello (device opened, calibrated)
  std::vector<eval_timing> timings;   // one per repeat
  std::map<std::string, nlohmann::json>
      sanitize;  // role -> runner::sanitize_report (with --sanitize)
  int exit_code = 0;
  nlohmann::json to_json() const;
  std::string render() const;
};

// ctx == nullptr: do not store. `stage` is recorded on every evaluation.
// `progress`, when given, gets a step per workload evaluated.
eval_outcome run_evaluation(const config::operator_config& op,
                            const std::vector<runner::subject_spec>& subjects,
                            const std::vector<std::string>& workloads, const eval_options& o,
                            const context* ctx, const std::string& stage,
                            std::optional<std::int64_t> campaign_id = std::nullopt,
                            std::optional<std::int64_t> iteration_id = std::nullopt,
                            progress_meter* progress = nullptr);

// Compile-only check of subjects (and the reference) for o.arch, through
// isolated `kopt-worker compile` children. Works without a GPU.
std::vector<compile_check> compile_check_all(const config::operator_config& op,
                                             const std::vector<runner::subject_spec>& subjects,
                                             const eval_options& o);

}  // namespace kopt::cli
