// An evaluator without a GPU, for tests: each (subject, workload) has a true
// time (and status) given by a model function; samples are that time with
// Gaussian noise drawn from a generator seeded by (candidate content,
// stage, workload, input seed), so the same evaluation gives the same
// numbers in a resumed run as in an uninterrupted one. It records every
// call, and can simulate a kill in the middle of GPU work.
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <vector>

#include "campaign/types.hpp"

namespace kopt::campaign {

// Thrown by test hooks and fault injection to stand for a kill -9: nothing
// in the loop catches it, so the loop object is destroyed mid-iteration.
struct simulated_kill : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct fake_truth {
  std::string status = "ok";  // ok, incorrect, crashed, ...
  std::string compile_status = "ok";
  double time_ns = 1000;
  std::optional<double> sol_time_ns;  // speed-of-light time, for sol_fraction
  double noise_rsd = -1;              // < 0: the evaluator's default
};

class fake_evaluator final : public evaluator {
 public:
  using model = std::function<fake_truth(const eval_subject&, const std::string& workload)>;
  explicit fake_evaluator(model m, double noise_rsd = 0.01, std::size_t samples = 30)
      : model_(std::move(m)), noise_rsd_(noise_rsd), samples_(samples) {}

  eval_batch evaluate(const eval_request& rq) override;
  void record(store::store& db, const eval_request& rq, const eval_batch& b) override;

  struct call {
    std::string stage;
    std::vector<std::string> keys;  // subjects' content keys, in order
    std::vector<std::string> workloads;
    std::uint64_t base_seed = 0;
  };
  const std::vector<call>& calls() const noexcept { return calls_; }
  // Throw simulated_kill at the start of the n-th evaluate() (1-based,
  // counted over this object's life), or from record() (a kill after the
  // GPU work, before the result is stored).
  void kill_on_evaluate(std::size_t n) { kill_evaluate_ = n; }
  void kill_on_record(std::size_t n) { kill_record_ = n; }
  // Noise for one stage (e.g. only the head-to-head comparison is noisy).
  void set_stage_noise(const std::string& stage, double rsd) { stage_noise_[stage] = rsd; }

 private:
  model model_;
  double noise_rsd_;
  std::size_t samples_;
  std::vector<call> calls_;
  std::map<std::string, double> stage_noise_;
  std::size_t kill_evaluate_ = 0, kill_record_ = 0, evaluates_ = 0, records_ = 0;
};

}  // namespace kopt::campaign
