// GPUs as leased resources: one slot per configured GPU, each with one
// kopt-worker started through the configured launch prefix (nothing
// locally, `srun ...` on a Slurm cluster) and kept alive across requests
// and campaigns. A campaign step holds a slot only while it evaluates, so
// campaigns interleave on the workers and a step's LLM phase never keeps a
// GPU idle. When several steps wait, the slot goes to the team that has had
// the least GPU time, then the highest priority, then the first to ask.
// A worker that cannot start or keeps crashing puts its slot in backoff
// (exponential, bounded) while the other slots go on.
//
// The evaluators here implement campaign::evaluator on top of the pool:
// pool_worker_evaluator (the real worker protocol, as
// campaign::worker_evaluator but on a leased worker) and pool_fake_evaluator
// (test only: campaign::fake_evaluator's deterministic model after an
// optional delay, no GPU).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "campaign/fake_evaluator.hpp"
#include "campaign/types.hpp"
#include "campaign/worker_evaluator.hpp"
#include "common/error.hpp"
#include "config/operator.hpp"
#include "core/roofline.hpp"
#include "daemon/config.hpp"
#include "runner/worker_client.hpp"

namespace kopt::daemon {

// Thrown into a campaign step when the daemon stops: the step ends at once
// and the campaign resumes from its last checkpoint at the next start.
struct step_interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The worker failed in a way that says nothing about the candidates (it did
// not start, or crashed again and again without a culprit): the step fails
// and is retried after a backoff, instead of recording "crashed" results.
struct worker_failure : kopt::error {
  using kopt::error::error;
};

struct slot_stats {
  int gpu = 0;
  std::string state;  // down, starting, ready, busy, backoff
  double busy_s = 0;
  std::int64_t evaluations = 0;
  std::int64_t worker_starts = 0;
  std::int64_t worker_failures = 0;
  std::int64_t worker_restarts = 0;  // inside requests (a candidate crashed the worker)
  std::string last_error;
  std::optional<std::string> campaign;  // who holds it
  nlohmann::json device = nlohmann::json::object();
  nlohmann::json to_json() const;
};

// The GPU peak table the daemon uses: worker.peaks_file, else kopt's own.
std::string peaks_file_for(const daemon_config& cfg);

class gpu_pool {
 public:
  gpu_pool(const daemon_config& cfg, const std::atomic<bool>& stopping);
  ~gpu_pool();
  gpu_pool(const gpu_pool&) = delete;
  gpu_pool& operator=(const gpu_pool&) = delete;

  // Starts workers that are down or whose backoff has passed (each start on
  // its own thread: a hello can take minutes). Called by the scheduling loop.
  void maintain();
  // At least one worker has completed its handshake.
  bool any_ready() const;
  // Why no worker is ready (the last start error), for /health.
  std::string not_ready_reason() const;
  // The device of the first ready slot, {} when none is ready yet.
  nlohmann::json any_device() const;
  std::vector<slot_stats> stats() const;
  std::map<std::string, double> team_gpu_seconds() const;
  void set_backoff(double initial_s, double max_s);

  struct slot;
  class lease {
   public:
    lease(gpu_pool& p, slot& s, std::string team)
        : pool_(&p), slot_(&s), team_(std::move(team)), start_(std::chrono::steady_clock::now()) {}
    lease(lease&& o) noexcept
        : pool_(o.pool_), slot_(o.slot_), team_(std::move(o.team_)), start_(o.start_) {
      o.pool_ = nullptr;
    }
    lease(const lease&) = delete;
    ~lease();
    int gpu() const;
    runner::worker_client* client() const;
    // The slot's --profile-only worker (counters), beside its timing worker.
    runner::worker_client* profiler() const;
    // How the slot starts its workers (executable, launch prefix, GPU): a
    // throwaway worker for compute-sanitizer is started the same way.
    const runner::worker_options& worker_options() const;
    const std::optional<harness::gpu_peaks>& peaks() const;
    const nlohmann::json& device() const;
    void count_restarts(int n);
    // The worker misbehaved: stop it and back the slot off.
    void fail(const std::string& why);

   private:
    gpu_pool* pool_;
    slot* slot_;
    std::string team_;
    std::chrono::steady_clock::time_point start_;
  };

  struct who {
    std::string campaign;  // label for stats
    std::string team;
    std::int64_t priority = 0;
  };
  // Blocks until a ready slot is free and this caller is first in line;
  // throws step_interrupted when the daemon stops while waiting.
  lease acquire(const who& w);
  // Stops every worker (shutdown).
  void stop_all();

 private:
  void release(slot& s, const std::string& team, double seconds);
  void start_slot(slot& s);

  const daemon_config& cfg_;
  const std::atomic<bool>& stopping_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<slot>> slots_;
  std::map<std::string, double> team_s_;
  struct waiter {
    std::uint64_t seq;
    std::string team;
    std::int64_t priority;
  };
  std::vector<waiter> waiters_;
  std::uint64_t next_seq_ = 0;
  double backoff_initial_s_ = 1, backoff_max_s_ = 300;
  std::string last_error_;
};

// --- evaluators on the pool ------------------------------------------------------

class pool_worker_evaluator final : public campaign::evaluator {
 public:
  pool_worker_evaluator(gpu_pool& pool, gpu_pool::who w, const config::operator_config& op,
                        const worker_settings& ws, std::string counters)
      : pool_(pool), who_(std::move(w)), op_(op), ws_(ws), counters_(std::move(counters)) {}
  campaign::eval_batch evaluate(const campaign::eval_request& rq) override;
  void record(store::store& db, const campaign::eval_request& rq,
              const campaign::eval_batch& b) override;
  nlohmann::json device() override { return pool_.any_device(); }
  // compute-sanitizer on a finalist (docs/integrity.md, class 4), as `kopt
  // run` does it: on a leased GPU, in throwaway --profile-only workers
  // started through the slot's launch prefix under the tool, never in the
  // daemon's process; skipped with the reason where the tool is missing.
  nlohmann::json sanitize(const campaign::eval_request& rq) override;

 private:
  campaign::worker_eval_options options() const;
  gpu_pool& pool_;
  gpu_pool::who who_;
  const config::operator_config& op_;
  const worker_settings& ws_;
  std::string counters_;
};

// The fake model: every (candidate content, workload) has a fixed true time
// derived from a hash, scaled by a "// speed X" marker in the source when
// present; "// broken" in a source makes it incorrect. Fractions of speed
// of light stay below 0.7, so campaigns end by budget or exhaustion.
campaign::fake_evaluator::model fake_model();

class pool_fake_evaluator final : public campaign::evaluator {
 public:
  pool_fake_evaluator(gpu_pool& pool, gpu_pool::who w, const fake_settings& fs,
                      const std::atomic<bool>& stopping)
      : pool_(pool),
        who_(std::move(w)),
        fs_(fs),
        stopping_(stopping),
        fake_(fake_model(), fs.noise_rsd) {}
  campaign::eval_batch evaluate(const campaign::eval_request& rq) override;
  void record(store::store& db, const campaign::eval_request& rq,
              const campaign::eval_batch& b) override;
  nlohmann::json device() override { return pool_.any_device(); }

 private:
  gpu_pool& pool_;
  gpu_pool::who who_;
  fake_settings fs_;
  const std::atomic<bool>& stopping_;
  campaign::fake_evaluator fake_;
};

}  // namespace kopt::daemon
