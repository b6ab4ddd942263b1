// The control plane's side of the worker protocol (docs/worker-protocol.md):
// starts kopt-worker through the configured launch prefix (nothing locally;
// `srun ...` on a Slurm cluster) with a scrubbed environment, performs the
// hello handshake, sends evaluation requests and turns the message stream
// into an evaluation_report. A worker that dies or goes silent is not an
// error of kopt: the subject that was running gets the outcome (crashed or
// timeout), the worker is restarted, and the rest of the request is sent
// again without that subject, so one bad kernel never loses the others'
// results.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/subprocess.hpp"

namespace kopt::runner {

struct worker_options {
  std::string worker_exe;                 // default: kopt-worker next to kopt
  std::vector<std::string> launch_prefix; // e.g. {"srun", "--gres=gpu:1", "-N1"}
  std::vector<std::string> extra_args;    // after the worker's own options, e.g. {"--profile-only"}
  int gpu = 0;
  // Pass `--gpu auto` instead of the index: the worker takes the GPU its
  // resource manager gave it (Slurm: CUDA_VISIBLE_DEVICES/SLURM_STEP_GPUS).
  bool gpu_auto = false;
  std::string cache_dir;
  std::chrono::seconds hello_timeout{180};
  // Longest silence tolerated while a request runs (the worker reports its
  // own hangs; this is the backstop for a worker that is itself stuck).
  std::chrono::seconds silence_timeout{600};
  int max_restarts = 8;
};

// Default worker executable: $KOPT_WORKER, else kopt-worker beside kopt.
std::string default_worker_exe();

// True when a worker that died without a `fatal` message was stopped from
// outside rather than by what it ran: killed by SIGTERM, SIGINT, SIGHUP or
// SIGKILL (directly, or as a shell's 128+N exit code), or its Slurm job step
// was cancelled, preempted, timed out or lost its node (srun's and
// slurmstepd's messages on stderr). Such a loss restarts the worker and runs
// the unfinished part of the request again; no candidate is blamed.
bool stopped_from_outside(const exit_status& st, std::string_view stderr_tail);

struct subject_result {
  std::string status;   // ok, incorrect, compile_error, crashed, timeout, ...
  std::string message;
  nlohmann::json detail = nlohmann::json::object();  // as emitted by the worker
};

struct evaluation_report {
  nlohmann::json device = nlohmann::json::object();
  nlohmann::json calibration = nlohmann::json();  // hello "calibration" (measured peaks)
  std::map<std::string, nlohmann::json> compiled;  // role -> compiled message
  // workload -> role -> result
  std::map<std::string, std::map<std::string, subject_result>> results;
  std::vector<std::string> events;  // restarts and other happenings, in words
  int restarts = 0;
};

class worker_client {
 public:
  explicit worker_client(worker_options opts);
  ~worker_client();

  // Starts the worker (if needed) and returns its whole hello message (device
  // under "device", measured peaks under "calibration"); throws
  // kopt::error with the worker's own reason when it cannot start (e.g. no
  // GPU: the message says so plainly).
  const nlohmann::json& start();

  // Sends an evaluate request (see protocol docs; "id" is filled in) and
  // collects the report, restarting the worker around fatal outcomes.
  evaluation_report evaluate(nlohmann::json request,
                             const std::function<void(const nlohmann::json&)>& on_message = {});

  // Any request with a single answer (calibrate, ping).
  nlohmann::json call(nlohmann::json request, std::chrono::seconds timeout);

  void stop();

 private:
  void spawn();
  std::optional<nlohmann::json> next_message(std::chrono::seconds timeout, std::string* why);
  worker_options opts_;
  std::unique_ptr<child_process> proc_;
  bool lost_from_outside_ = false;  // set by next_message when the worker died
  nlohmann::json hello_;
  int next_id_ = 1;
};

// Hardware counters come from a second worker started with --profile-only,
// which never uses the CUPTI Activity API: in one process, a Range Profiler
// session followed by Activity timing lost kernel records on the H200
// (2026-12-01), so timing and profiling no longer share a process.
//
// Sends `request` to `timing` with the counters settings removed; when the
// request asked for counters ("counters" other than "none", or "metrics"),
// sends the subjects that passed somewhere to `profiler` (started on first
// use) and merges each workload's "counters" into the timing report.
// `profiler` may be null: the counters are then skipped with an event.
evaluation_report evaluate_with_counters(worker_client& timing, worker_client* profiler, nlohmann::json request,
                                         const std::function<void(const nlohmann::json&)>& on_message = {});

// Options of the profiling worker that goes with `timing_opts`.
worker_options profiler_options(worker_options timing_opts);

}  // namespace kopt::runner
