#include "campaign/fake_evaluator.hpp"

#include <algorithm>
#include <random>

#include "campaign/dropout.hpp"

namespace kopt::campaign {

eval_batch fake_evaluator::evaluate(const eval_request& rq) {
  ++evaluates_;
  if (kill_evaluate_ && evaluates_ == kill_evaluate_)
    throw simulated_kill("simulated kill during evaluate #" + std::to_string(evaluates_));
  call c{rq.stage, {}, rq.workloads, rq.base_seed};
  eval_batch b;
  b.device = {{"name", "fake GPU"}, {"arch", "sm_90a"}};
  for (const auto& s : rq.subjects) {
    c.keys.push_back(s.key);
    subject_result r;
    for (const auto& w : rq.workloads) {
      const fake_truth t = model_(s, w);
      r.compile_status = t.compile_status;
      workload_result wr;
      if (t.compile_status != "ok") {
        wr.status = "compile_error";
        r.workloads[w] = wr;
        continue;
      }
      wr.status = t.status;
      if (t.status == "ok") {
        std::mt19937_64 rng(derive_seed(rq.base_seed, s.key + "|" + rq.stage + "|" + w));
        std::normal_distribution<double> n(0.0, 1.0);
        auto sn = stage_noise_.find(rq.stage);
        const double rsd = t.noise_rsd >= 0 ? t.noise_rsd : sn != stage_noise_.end() ? sn->second : noise_rsd_;
        for (std::size_t i = 0; i < samples_; ++i)
          wr.samples_ns.push_back(std::max(1.0, t.time_ns * (1.0 + rsd * n(rng))));
        std::vector<double> v = wr.samples_ns;
        std::sort(v.begin(), v.end());
        const std::size_t m = v.size() / 2;
        wr.median_ns = v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
        if (t.sol_time_ns) wr.sol_fraction = *t.sol_time_ns / wr.median_ns;
      } else {
        wr.message = "scripted " + t.status;
      }
      r.workloads[w] = wr;
    }
    b.by_role[s.role] = r;
  }
  calls_.push_back(std::move(c));
  return b;
}

void fake_evaluator::record(store::store& db, const eval_request& rq, const eval_batch& b) {
  ++records_;
  if (kill_record_ && records_ == kill_record_)
    throw simulated_kill("simulated kill while recording #" + std::to_string(records_));
  record_basic(db, rq, b);
}

}  // namespace kopt::campaign
