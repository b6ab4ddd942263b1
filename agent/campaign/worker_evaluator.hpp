// The real evaluator: one kopt-worker kept alive across requests (a worker
// start costs a CUDA context and the CUPTI set-up), requests in the worker
// protocol, results summarized by kopt::runner (fraction of speed of light,
// faster-than-light turned into an integrity rejection) and recorded with
// runner::record_report, which keeps everything the worker sent.
#pragma once

#include <string>
#include <vector>

#include <memory>
#include <optional>

#include "campaign/types.hpp"
#include "core/roofline.hpp"
#include "runner/worker_client.hpp"

namespace kopt::campaign {

struct worker_eval_options {
  runner::worker_options worker;
  int seeds = 3;
  double min_time_s = 0.1;
  double max_time_s = 1.0;
  int launch_timeout_ms = 10000;
  std::string peaks_file;  // GPU peak table; empty: no fractions of SOL
  // Hardware counters tier ("none", "default", "full") collected in the
  // stages listed (stage names of the store: screen, full, verify, compare).
  std::string counters = "default";
  std::vector<std::string> counter_stages = {"full", "verify"};
};

// Shared by worker_evaluator and the daemon's evaluator on a leased worker
// (agent/daemon/pool.cpp): the evaluate request for `rq`, the batch built
// from a worker's report (summaries with SOL and diagnosis kept for
// record), and the recording of such a batch.
protocol::evaluate_request worker_request(const config::operator_config& op, const eval_request& rq,
                                          const worker_eval_options& o);
eval_batch batch_from_report(const config::operator_config& op, const eval_request& rq, runner::evaluation_report rep,
                             const std::optional<harness::gpu_peaks>& peaks);
void record_worker_batch(store::store& db, const eval_request& rq, const eval_batch& b);

class worker_evaluator final : public evaluator {
 public:
  worker_evaluator(const config::operator_config& op, worker_eval_options o);
  ~worker_evaluator() override;
  // Starts the worker; throws kopt::error with its reason (no GPU, no worker).
  const nlohmann::json& start();
  eval_batch evaluate(const eval_request& rq) override;
  void record(store::store& db, const eval_request& rq, const eval_batch& b) override;
  nlohmann::json device() override { return start(); }
  void stop();

 private:
  const config::operator_config& op_;
  worker_eval_options o_;
  runner::worker_client client_;
  runner::worker_client profiler_;  // --profile-only worker for counters, started on first use
  nlohmann::json device_;
  std::optional<harness::gpu_peaks> peaks_;
  bool started_ = false;
};

}  // namespace kopt::campaign
