// The untimed hardware-counters pass (CUPTI range profiler) after timing.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "counters/metrics.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/evaluator_impl.hpp"

namespace kopt::harness {

using namespace detail;

void evaluator::impl::ensure_profiler() {
  if (profiler) return;
  if (!profiler_error.empty()) throw kopt::error(profiler_error);
  try {
    profiler = std::make_unique<range_profiler>(dev.ordinal, counters::default_cache_dir());
  } catch (const kopt::error& e) {
    profiler_error = std::string("hardware counters unavailable: ") + e.what();
    throw kopt::error(profiler_error);
  }
}

// poisoned outputs, the plan run under the range profiler; afterwards the
// outputs are checked against the reference again, so a profiling mode
// that corrupted state would show.
json evaluator::impl::profile_subject(const config::operator_config& op, subject& s,
                                      const resolved_plan& plan, workload_state& st,
                                      const settings& cfg) {
  json out;
  try {
    ensure_profiler();
    auto ws = make_workspaces(plan);
    const bool kernel_replay = plan.launches.size() == 1;
    auto prepare = [&] {
      restore_in_place(st, 0);
      for (const auto& t : st.tensors)
        if (t.is_output)
          KOPT_CUDA(kernels::fill_output(st.outputs.at(t.name).data(), t.elements, to_elem(t.type),
                                         fresh(), stream));
      refill_workspaces(plan, ws);
      KOPT_CUDA(cudaCtxResetPersistingL2Cache());
      KOPT_CUDA(kernels::l2_flush(flush_buf, flush_bytes, 0u, stream));
      wait(60000, "counters pass preparation");
    };
    auto run = [&] {
      launch(s, plan, pointers(st, 0, false, ws));
      wait(cfg.launch_timeout_ms, s.role + " counters pass");
    };
    const auto res =
        profiler->profile(cfg.metrics, kernel_replay, plan.launches.size(), prepare, run);
    out = res.to_json();
    out["tier"] = cfg.counters_tier;
    out["chip"] = profiler->chip();
    // Outputs after the profiled run(s) must still match the reference.
    const host_blocks got = download_checked(st, 0, false, "counters pass download");
    bool ok = true;
    compare_all(op, st, data_of(got), data_of(*st.expected[0]), ok);
    out["outputs_verified"] = ok;
    restore_in_place(st, 0);
  } catch (const kopt::error& e) {
    out = {{"error", e.what()}};
  }
  return out;
}

}  // namespace kopt::harness
