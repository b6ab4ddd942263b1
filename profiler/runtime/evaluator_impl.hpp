// The evaluator's private parts, shared by the files it is split into
// (the way nvbench splits measure_cold, measure_cupti and l2flush): one
// request's subjects and settings, the buffers of one workload, and the
// evaluator::impl state with its steps, each defined in the file of its part:
//   evaluator.cpp      request, compile, load, the per-workload sequence
//   inputs.cpp         inputs and their generators, hashes, in-place restore
//   checks.cpp         launches, checked calls, guards, comparisons
//   timing.cpp         the timing loop, calibration
//   recheck.cpp        the re-check on unseen inputs after timing
//   integrity.cpp      per-call canaries, module-data hashes, timed-sample captures
//   counters_pass.cpp  the untimed hardware-counters pass
// Not installed; only the worker's runtime includes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "config/operator.hpp"
#include "core/plan.hpp"
#include "core/seeds.hpp"
#include "core/stats.hpp"
#include "runtime/activity.hpp"
#include "runtime/buffers.hpp"
#include "runtime/evaluator.hpp"
#include "runtime/kernels.hpp"
#include "runtime/range_profiler.hpp"

namespace kopt::harness {
namespace detail {

using clock_type = std::chrono::steady_clock;
using json = nlohmann::json;

inline std::uint64_t seed_for(std::uint64_t base, const std::string& workload, std::uint64_t k) {
  return input_set_seed(base, workload, k);
}

inline kernels::elem to_elem(config::dtype t) {
  return static_cast<kernels::elem>(static_cast<int>(t));
}

// A failure of one subject on one workload: recorded, not fatal.
struct subject_failure {
  std::string status;  // launch_error, incorrect, rejected_integrity, ...
  std::string message;
  json detail = json::object();
};

// The process must end (hang or sticky error); carries what to report.
struct fatal_outcome {
  std::string status;  // crashed, timeout
  std::string message;
};

struct subject {
  std::string role;
  config::candidate cand;
  name_values params;
  compile::result compiled;
  cudaLibrary_t lib = nullptr;
  std::map<std::string, cudaKernel_t> kernels;
  std::map<std::string, std::int64_t> static_shared;
  json attributes = json::object();
  std::string fail_status;  // set when the subject cannot run at all
  std::string fail_message;
  // The module's own global and constant data (cubin_facts::
  // module_data_symbols), hashed at load and again after calls: whatever
  // the section flags say, a module whose data changed is rejected.
  struct module_object {
    std::string name;
    void* ptr = nullptr;
    std::size_t bytes = 0;
    unsigned long long baseline = 0;
  };
  std::vector<module_object> module_data;
  std::vector<std::string> module_data_unresolved;  // symbols the runtime could not locate
  json integrity_record() const;                    // what the result records about these checks
  bool allow_clock_reads = false;
};

// A guard region's owner, for messages ("input x", "output out", ...).
struct guard_ref {
  std::string what;
  guarded* buf = nullptr;
};

struct settings {
  int seeds = 3;
  std::uint64_t base_seed = 20261130;
  stopping_rule rule;
  bool time_reference = false;
  bool recheck = true;
  // Compile the request's subjects even when their cubins are cached (the
  // built-in reference still comes from the cache): what a new candidate in
  // a running campaign costs, for throughput benchmarks.
  bool recompile = false;
  // Time the request's subjects interleaved sample by sample (A B B A for
  // two) in one loop, as the promotion comparison asks (docs/measurement.md).
  bool interleave = false;
  // Correctness checks only: no timing, no counters (compute-sanitizer runs).
  bool checks_only = false;
  activity_clock clock = activity_clock::concurrent_kernel;  // docs/methodology.md, "The clock"
  int launch_timeout_ms = 10000;
  double warmup_s = 0.025;
  double min_clock_fraction = 0.75;
  std::size_t batch = 8;
  // Counters pass after timing: empty = none; else the metric list to collect.
  std::vector<std::string> metrics;
  std::string counters_tier;  // "default" | "full" | "custom" (for the record)
};

// Buffers of one evaluation on one workload.
struct workload_state {
  std::vector<resolved_tensor> tensors;
  // per input set (seed index): input name -> buffer
  std::vector<std::map<std::string, guarded>> inputs;
  std::vector<std::map<std::string, guarded>> pristine;  // in-place inputs only
  std::vector<std::map<std::string, unsigned long long>> input_hash;
  std::map<std::string, guarded> outputs;      // candidate outputs
  std::map<std::string, guarded> ref_outputs;  // reference's own outputs
  // per seed: outputs (and in-place inputs' final states), in tensor order
  std::vector<std::shared_ptr<const std::vector<std::string>>> expected;
  std::vector<std::uint64_t> seeds;
  // The workload's own correctness bounds (SOL-ExecBench), which replace
  // the tensors' and the operator's when set.
  std::optional<config::tolerance> tol;
};

}  // namespace detail

struct evaluator::impl {
  using json = nlohmann::json;
  using clock_type = detail::clock_type;
  using subject = detail::subject;
  using settings = detail::settings;
  using workload_state = detail::workload_state;
  using guarded = detail::guarded;
  using host_blocks = detail::host_blocks;
  using host_pool = detail::host_pool;
  using guard_ref = detail::guard_ref;
  using subject_failure = detail::subject_failure;

  device_info dev;
  const compile::compiler& comp;
  emit_fn emit;
  cudaStream_t stream = nullptr;
  void* flush_buf = nullptr;
  std::int64_t flush_bytes = 0;
  unsigned long long* scratch = nullptr;  // device counters
  static constexpr int scratch_slots = 4096;
  std::mt19937_64 rng{std::random_device{}()};
  host_pool downloads;  // before anything that holds its blocks
  // What is running, for the fatal message if it dies.
  std::string cur_id, cur_role, cur_workload;

  // A hang or a sticky error ends the process right here, without
  // unwinding: destructors would call cudaFree, which waits for the hung
  // kernel forever (seen on the H200), and the context is unusable anyway.
  [[noreturn]] void die(const std::string& status, const std::string& message) {
    emit({{"type", "fatal"},
          {"id", cur_id},
          {"status", status},
          {"role", cur_role},
          {"workload", cur_workload},
          {"message", message}});
    std::cout.flush();
    std::_Exit(status == "timeout" ? exit_candidate_hang : exit_candidate_crashed);
  }
  std::uint64_t fresh() { return rng(); }

  // Reference outputs cached across requests: key = operator hash|workload|seed.
  // Shared, not copied, into each workload's state (a copy of a large
  // output cost tens of milliseconds per seed).
  std::map<std::string, std::shared_ptr<const std::vector<std::string>>> ref_cache;
  // Created on first use: CUPTI's profiler is initialized only when counters
  // are asked for, so plain evaluations never pay for it.
  std::unique_ptr<range_profiler> profiler;
  std::string profiler_error;
  std::size_t ref_cache_bytes = 0;

  bool timing = true;  // false: profiling worker, CUPTI Activity never enabled

  impl(device_info d, const compile::compiler& c, emit_fn e, bool with_timing)
      : dev(std::move(d)), comp(c), emit(std::move(e)), timing(with_timing) {
    KOPT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // A flush buffer of at least twice the L2, written before every sample.
    flush_bytes = std::max<std::int64_t>(2 * dev.l2_bytes, 64 << 20);
    KOPT_CUDA(cudaMalloc(&flush_buf, static_cast<std::size_t>(flush_bytes)));
    KOPT_CUDA(cudaMemset(flush_buf, 0, static_cast<std::size_t>(flush_bytes)));
    KOPT_CUDA(
        cudaMalloc(reinterpret_cast<void**>(&scratch), scratch_slots * sizeof(unsigned long long)));
    // Persisting L2 off for the whole process; reset again before samples.
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
    cudaGetLastError();
    if (timing) activity_timer::instance().enable();
  }
  ~impl() {
    if (scratch) KOPT_CUDA_NOTHROW(cudaFree(scratch));
    if (flush_buf) KOPT_CUDA_NOTHROW(cudaFree(flush_buf));
    if (stream) KOPT_CUDA_NOTHROW(cudaStreamDestroy(stream));
  }

  // evaluator.cpp
  // Waits for the stream with a deadline; a kernel that runs past it is a
  // hang: the context cannot be recovered, so it is a fatal outcome.
  void wait(int timeout_ms, const std::string& what);
  void load(subject& s, const std::vector<config::launch>& launches);
  void evaluate(const json& req);
  void evaluate_workload(const config::operator_config& op, const config::workload& w,
                         std::vector<subject>& subjects, subject& ref, const settings& cfg,
                         json& results, std::string& current_role);

  // inputs.cpp
  std::vector<const resolved_tensor*> checked_tensors(const workload_state& st);
  // Generator kernels (kind "kernel", docs/operator-config.md): compiled like
  // candidates (NVRTC child, cache), loaded once per source and axis values,
  // launched over the tensor. Axis values reach the code as
  // -DKOPT_AXIS_<name>=<value> when the source mentions KOPT_AXIS_, so a
  // generator that does not need them compiles once for all workloads.
  std::map<std::string, std::pair<cudaLibrary_t, cudaKernel_t>> generator_kernels;
  void run_generator_kernel(const config::generator& g, const name_values& names,
                            const resolved_tensor& t, void* dst, std::uint64_t tseed);
  void generate_inputs(const config::operator_config& op, const config::workload& w,
                       workload_state& st, std::size_t k, std::uint64_t seed);
  std::map<std::string, unsigned long long> hash_inputs(workload_state& st, std::size_t k);
  void restore_in_place(workload_state& st, std::size_t k);

  // checks.cpp
  void launch(subject& s, const resolved_plan& plan, const std::map<std::string, void*>& ptrs);
  std::map<std::string, void*> pointers(workload_state& st, std::size_t k, bool reference,
                                        std::map<std::string, guarded>& ws);
  std::map<std::string, guarded> make_workspaces(const resolved_plan& plan);
  void refill_workspaces(const resolved_plan& plan, std::map<std::string, guarded>& ws);
  host_blocks download_checked(const workload_state& st, std::size_t k, bool reference,
                               const char* what);
  // One checked call: poison, launch, wait, guards, input hashes, download.
  // Returns the checked tensors' contents (outputs + in-place inputs).
  host_blocks checked_call(subject& s, const resolved_plan& plan, workload_state& st, std::size_t k,
                           bool reference, int timeout_ms);
  json compare_all(const config::operator_config& op, const workload_state& st,
                   const std::vector<const char*>& got, const std::vector<const char*>& expected,
                   bool& passed);

  // integrity.cpp: per-call canaries, module data, captures of timed samples
  std::vector<guard_ref> reachable(workload_state& st, std::size_t k, bool reference,
                                   std::map<std::string, guarded>& ws);
  void refresh_guards(const std::vector<guard_ref>& all);
  // Downloads every guard region and compares it with the host's copy of
  // its canary; throws subject_failure (rejected_integrity) on damage.
  void verify_guards_on_host(const std::vector<guard_ref>& all);
  void resolve_module_data(subject& s);
  // Queues one content hash per module object into slots[0..n).
  void queue_module_hash(const subject& s, unsigned long long* slots);
  // Throws subject_failure (rejected_integrity) when any object changed.
  void verify_module_data(const subject& s, const char* when);
  void check_module_hashes(const subject& s, const unsigned long long* got, const char* when);
  // Copies (device to device) the checked tensors of set k into `snap`.
  void queue_capture(const workload_state& st, std::size_t k, std::vector<guarded>& snap);
  host_blocks download_capture(const workload_state& st, const std::vector<guarded>& snap,
                               const char* what);

  // timing.cpp
  struct timing_out {
    json j;
    bool sample_check_failed = false;
    json sample_check;
  };
  // Times several subjects interleaved sample by sample (A B B A ... for
  // two), on the same inputs in one process; one subject is plain timing.
  std::vector<timing_out> time_subjects(const config::operator_config& op,
                                        const std::vector<subject*>& subs,
                                        const std::vector<const resolved_plan*>& plans,
                                        workload_state& st, const settings& cfg);
  timing_out time_subject(const config::operator_config& op, subject& s, const resolved_plan& plan,
                          workload_state& st, const settings& cfg);
  json calibrate();
  // The per-launch floor: median CUPTI span of an empty kernel under the
  // current clock, sampled as time_subjects samples; cached per clock.
  std::map<activity_clock, double> launch_floor;
  double measure_launch_floor();
  json launch_floor_json();

  // recheck.cpp
  json recheck(const config::operator_config& op, const config::workload& w, subject& s,
               subject& ref, const resolved_plan& ref_plan, const resolved_plan& plan,
               workload_state& st, const settings& cfg, std::string& current_role, bool& passed);

  // counters_pass.cpp
  void ensure_profiler();
  json profile_subject(const config::operator_config& op, subject& s, const resolved_plan& plan,
                       workload_state& st, const settings& cfg);
};

}  // namespace kopt::harness
