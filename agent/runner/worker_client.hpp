// The control plane's side of the worker protocol (docs/worker-protocol.md):
// starts kopt-worker through the configured launch prefix (nothing locally;
// `srun ...` on a Slurm cluster) with a scrubbed environment, performs the
// hello handshake, sends evaluation requests and turns the message stream
// into an evaluation_report. A worker that dies or goes silent is not an
// error of kopt: the subject that was running gets the outcome (crashed or
// timeout), the worker is restarted, and the rest of the request is sent
// again without that subject, so one bad kernel never loses the others'
// results. Every line is read and written through the typed protocol of
// profiler/protocol/protocol.hpp.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/subprocess.hpp"
#include "protocol/protocol.hpp"

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

// One subject on one workload: role, outcome and message typed, the
// measurements (timing, correctness, counters, ...) as the worker sent them.
using subject_result = protocol::result;

// The worker answered a request with `error`: the request was refused (a bad
// operator, an unknown metric: the caller's problem) or the worker failed on
// its own (code internal). Callers decide on code(), never on the text.
class request_rejected : public kopt::error {
 public:
  request_rejected(protocol::error_code code, const std::string& message)
      : kopt::error("the GPU worker rejected the request: " + message), code_(code) {}
  protocol::error_code code() const noexcept { return code_; }

 private:
  protocol::error_code code_;
};

struct evaluation_report {
  nlohmann::json device = nlohmann::json::object();
  nlohmann::json calibration = nlohmann::json();  // hello "calibration" (measured peaks)
  nlohmann::json launch_floor = nlohmann::json();  // hello "launch_floor" (default clock)
  std::map<std::string, protocol::compiled> compiled;  // role -> compiled message
  // workload -> role -> result
  std::map<std::string, std::map<std::string, subject_result>> results;
  std::vector<std::string> events;  // restarts and other happenings, in words
  int restarts = 0;
};

class worker_client {
 public:
  explicit worker_client(worker_options opts);
  ~worker_client();

  // Starts the worker (if needed) and returns its hello (device, measured
  // peaks under calibration); throws kopt::error with the worker's own
  // reason when it cannot start (e.g. no GPU: the message says so plainly)
  // or speaks another protocol version.
  const protocol::hello& start();

  // Sends an evaluate request (the id is filled in) and collects the
  // report, restarting the worker around fatal outcomes. Throws
  // request_rejected when the worker answers `error`.
  evaluation_report evaluate(protocol::evaluate_request request,
                             const std::function<void(const protocol::message&)>& on_message = {});
  // The same from a request written as JSON (tests, tools): read through
  // the protocol first, so a malformed one fails here with its reason.
  evaluation_report evaluate(const nlohmann::json& request,
                             const std::function<void(const protocol::message&)>& on_message = {});

  // A request with a single answer (calibrate, ping); returns that answer.
  protocol::message call(protocol::request request, std::chrono::seconds timeout);

  void stop();

 private:
  void spawn();
  // The next protocol message, or nullopt when the worker died or was
  // silent (`why` says which). Lines that are not protocol are skipped.
  std::optional<protocol::message> next_message(std::chrono::seconds timeout, std::string* why);
  void send(const protocol::request& r);
  worker_options opts_;
  std::unique_ptr<child_process> proc_;
  bool lost_from_outside_ = false;  // set by next_message when the worker died
  protocol::hello hello_;
  int next_id_ = 1;
};

// Hardware counters come from a second worker started with --profile-only,
// which never uses the CUPTI Activity API: in one process, a Range Profiler
// session followed by Activity timing lost kernel records on the H200
// (2026-12-01), so timing and profiling no longer share a process.
//
// Sends `request` to `timing` with the counters settings removed; when the
// request asked for counters (a tier other than none, or metrics), sends
// the subjects that passed somewhere to `profiler` (started on first use)
// and merges each workload's "counters" into the timing report. `profiler`
// may be null: the counters are then skipped with an event. An unknown
// metric name is the caller's error (request_rejected is rethrown); any
// other failure of the profiling run keeps the timing and says why.
evaluation_report evaluate_with_counters(
    worker_client& timing, worker_client* profiler, protocol::evaluate_request request,
    const std::function<void(const protocol::message&)>& on_message = {});
// The same from a request written as JSON (tests, tools), read through the
// protocol first.
evaluation_report evaluate_with_counters(
    worker_client& timing, worker_client* profiler, const nlohmann::json& request,
    const std::function<void(const protocol::message&)>& on_message = {});

// An evaluate request written as JSON (type and protocol are added) read
// through the protocol; throws kopt::error naming what does not follow it.
protocol::evaluate_request evaluate_request_from_json(const nlohmann::json& request);

// Options of the profiling worker that goes with `timing_opts`.
worker_options profiler_options(worker_options timing_opts);

}  // namespace kopt::runner
