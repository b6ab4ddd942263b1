// The re-check after timing: the subject and the reference run once more on
// inputs neither has seen (a fresh seed), so a kernel that cached or replayed
// results during the checks is caught. Seed 0's inputs are restored after it
// for the next subject.
#include <fmt/format.h>

#include "runtime/cuda_check.hpp"
#include "runtime/evaluator_impl.hpp"

namespace kopt::harness {

using namespace detail;

json evaluator::impl::recheck(const config::operator_config& op, const config::workload& w,
                              subject& s, subject& ref, const resolved_plan& ref_plan,
                              const resolved_plan& plan, workload_state& st, const settings& cfg,
                              std::string& current_role, bool& passed) {
  const std::uint64_t unseen = seed_for(cfg.base_seed ^ fresh(), w.id, 1000);
  generate_inputs(op, w, st, 0, unseen);
  for (auto& [name, b] : st.pristine[0])
    KOPT_CUDA(cudaMemcpyAsync(b.data(), st.inputs[0].at(name).data(),
                              static_cast<std::size_t>(b.bytes()), cudaMemcpyDeviceToDevice,
                              stream));
  st.input_hash[0] = hash_inputs(st, 0);
  current_role = "reference";
  const host_blocks expected = checked_call(ref, ref_plan, st, 0, true, 600000);
  current_role = s.role;
  const host_blocks got = checked_call(s, plan, st, 0, &s == &ref, cfg.launch_timeout_ms);
  json per = compare_all(op, st, data_of(got), data_of(expected), passed);
  // Restore seed 0's inputs for the next subject.
  generate_inputs(op, w, st, 0, st.seeds[0]);
  for (auto& [name, b] : st.pristine[0])
    KOPT_CUDA(cudaMemcpyAsync(b.data(), st.inputs[0].at(name).data(),
                              static_cast<std::size_t>(b.bytes()), cudaMemcpyDeviceToDevice,
                              stream));
  st.input_hash[0] = hash_inputs(st, 0);
  return {{"passed", passed}, {"outputs", per}};
}

}  // namespace kopt::harness
