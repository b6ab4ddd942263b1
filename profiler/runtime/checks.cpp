// Checked calls: the launch of a plan, workspaces, the poisoned call with its
// guard and input-hash checks, downloads and the comparison with the reference.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/compare.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/evaluator_impl.hpp"

namespace kopt::harness {

using namespace detail;

// Queues the launches of a plan. Launch-time errors (bad configuration,
// too many resources) are subject failures; they do not poison the context.
void evaluator::impl::launch(subject& s, const resolved_plan& plan,
                             const std::map<std::string, void*>& ptrs) {
  for (const auto& l : plan.launches) {
    std::vector<std::array<unsigned char, 8>> storage(l.args.size());
    std::vector<void*> args(l.args.size());
    for (std::size_t i = 0; i < l.args.size(); ++i) {
      const auto& a = l.args[i];
      auto* slot = storage[i].data();
      switch (a.k) {
        case config::launch_arg::kind::tensor:
        case config::launch_arg::kind::workspace: {
          void* p = ptrs.at(a.name);
          std::memcpy(slot, &p, sizeof p);
          break;
        }
        case config::launch_arg::kind::integer:
        case config::launch_arg::kind::scalar:
          if (a.type == config::dtype::int32) {
            const auto v = static_cast<std::int32_t>(a.int_value);
            std::memcpy(slot, &v, 4);
          } else if (a.type == config::dtype::int64) {
            const std::int64_t v = a.int_value;
            std::memcpy(slot, &v, 8);
          } else if (a.type == config::dtype::float32) {
            const auto v = static_cast<float>(a.float_value);
            std::memcpy(slot, &v, 4);
          } else {
            const double v = a.float_value;
            std::memcpy(slot, &v, 8);
          }
          break;
      }
      args[i] = slot;
    }
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(static_cast<unsigned>(l.grid[0]), static_cast<unsigned>(l.grid[1]),
                       static_cast<unsigned>(l.grid[2]));
    cfg.blockDim = dim3(static_cast<unsigned>(l.block[0]), static_cast<unsigned>(l.block[1]),
                        static_cast<unsigned>(l.block[2]));
    cfg.dynamicSmemBytes = static_cast<std::size_t>(l.shared_bytes);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    if (l.cluster[0] > 0) {
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = static_cast<unsigned>(l.cluster[0]);
      attr[0].val.clusterDim.y = static_cast<unsigned>(std::max<std::int64_t>(l.cluster[1], 1));
      attr[0].val.clusterDim.z = static_cast<unsigned>(std::max<std::int64_t>(l.cluster[2], 1));
      cfg.attrs = attr;
      cfg.numAttrs = 1;
    }
    const void* fn = reinterpret_cast<const void*>(s.kernels.at(l.kernel));
    if (l.shared_bytes > 48 * 1024) {
      const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(l.shared_bytes));
      if (e != cudaSuccess) {
        cudaGetLastError();
        throw subject_failure{
            "launch_error",
            fmt::format("{}: cannot opt in to {} bytes of dynamic shared memory: {}", l.kernel,
                        l.shared_bytes, cudaGetErrorString(e))};
      }
    }
    const cudaError_t e = cudaLaunchKernelExC(&cfg, fn, args.data());
    if (e != cudaSuccess) {
      if (is_sticky(e)) die("crashed", fmt::format("{}: {}", l.kernel, cudaGetErrorString(e)));
      cudaGetLastError();
      throw subject_failure{"launch_error",
                            fmt::format("launching {}: {} ({})", l.kernel, cudaGetErrorString(e),
                                        cudaGetErrorName(e))};
    }
  }
}

std::map<std::string, void*> evaluator::impl::pointers(workload_state& st, std::size_t k,
                                                       bool reference,
                                                       std::map<std::string, guarded>& ws) {
  std::map<std::string, void*> p;
  for (auto& [name, b] : st.inputs[k]) p[name] = b.data();
  for (auto& [name, b] : reference ? st.ref_outputs : st.outputs) p[name] = b.data();
  for (auto& [name, b] : ws) p[name] = b.data();
  return p;
}

std::map<std::string, guarded> evaluator::impl::make_workspaces(const resolved_plan& plan) {
  std::map<std::string, guarded> ws;
  for (const auto& [name, bytes] : plan.workspace_bytes)
    ws.emplace(name, guarded(bytes, fresh(), stream));
  return ws;
}

void evaluator::impl::refill_workspaces(const resolved_plan& plan,
                                        std::map<std::string, guarded>& ws) {
  for (auto& [name, b] : ws) {
    if (plan.workspace_zero_init.at(name))
      KOPT_CUDA(cudaMemsetAsync(b.data(), 0, static_cast<std::size_t>(b.bytes()), stream));
    else
      KOPT_CUDA(kernels::fill_random_bytes(b.data(), b.bytes(), fresh(), stream));
  }
}

// Downloads the checked tensors (outputs and in-place inputs of set k).
host_blocks evaluator::impl::download_checked(const workload_state& st, std::size_t k,
                                              bool reference, const char* what) {
  const auto& outs = reference ? st.ref_outputs : st.outputs;
  host_blocks got;
  try {
    for (const auto* t : checked_tensors(st)) {
      auto host = downloads.acquire(static_cast<std::size_t>(t->bytes));
      const void* src = t->is_output ? outs.at(t->name).data() : st.inputs[k].at(t->name).data();
      got.push_back(std::move(host));
      KOPT_CUDA(cudaMemcpyAsync(got.back().data(), src, got.back().size(), cudaMemcpyDeviceToHost,
                                stream));
    }
    wait(60000, what);
  } catch (...) {
    for (auto& b : got) b.abandon();
    throw;
  }
  return got;
}

host_blocks evaluator::impl::checked_call(subject& s, const resolved_plan& plan, workload_state& st,
                                          std::size_t k, bool reference, int timeout_ms) {
  restore_in_place(st, k);
  auto& outs = reference ? st.ref_outputs : st.outputs;
  // The same fill as before a timed sample (kernels::fill_output): nothing
  // in the outputs tells a checked call from a timed one.
  for (const auto& t : st.tensors)
    if (t.is_output)
      KOPT_CUDA(kernels::fill_output(outs.at(t.name).data(), t.elements, to_elem(t.type), fresh(),
                                     stream));
  auto ws = make_workspaces(plan);
  refill_workspaces(plan, ws);
  // Guards of every buffer the call could reach, with fresh canaries.
  const auto guards = reachable(st, k, reference, ws);
  refresh_guards(guards);
  const auto ptrs = pointers(st, k, reference, ws);
  launch(s, plan, ptrs);
  wait(timeout_ms,
       fmt::format("{} ({})", s.role, plan.launches.empty() ? "" : plan.launches.front().kernel));

  verify_guards_on_host(guards);
  {
    // The reference first: it runs before the candidates on the same
    // inputs, so a reference that writes into a read-only input made the
    // next (correct) candidate look guilty of it. That is the config's
    // error, reported as such, and no candidate is judged on those inputs.
    const auto h = hash_inputs(st, k);
    for (const auto& [name, v] : h)
      if (v != st.input_hash[k].at(name)) {
        if (reference)
          throw subject_failure{
              "config_error",
              fmt::format("the reference modified input '{}', which the operator does not "
                          "declare in_place: the operator config is wrong (declare '{}' "
                          "in_place, or fix the reference), not the candidates",
                          name, name)};
        throw subject_failure{
            "rejected_integrity",
            fmt::format("modified input '{}', which the operator does not declare in_place", name)};
      }
  }
  verify_module_data(s, "during a checked call");
  host_blocks got = download_checked(st, k, reference, "download");
  // The reference's outputs are overwritten on the device as soon as they
  // are on the host: a candidate reading outside its buffers finds nothing.
  if (reference)
    for (const auto& t : st.tensors)
      if (t.is_output)
        KOPT_CUDA(kernels::fill_random_bytes(outs.at(t.name).data(), t.bytes, fresh(), stream));
  return got;
}

json evaluator::impl::compare_all(const config::operator_config& op, const workload_state& st,
                                  const std::vector<const char*>& got,
                                  const std::vector<const char*>& expected, bool& passed) {
  json per = json::object();
  passed = true;
  std::size_t i = 0;
  for (const auto& t : st.tensors) {
    if (!(t.is_output || t.in_place)) continue;
    const config::tensor* spec = op.find_tensor(t.name);
    const config::tolerance tol = st.tol ? *st.tol : spec && spec->tol ? *spec->tol : op.tol;
    const auto r = compare_outputs(got[i], expected[i], static_cast<std::size_t>(t.elements),
                                   t.type, t.shape, tol);
    per[t.name] = r.to_json();
    passed = passed && r.passed;
    ++i;
  }
  return per;
}

}  // namespace kopt::harness
