// Inputs of a workload: seeded generation (built-in generators, permutations
// and operator-supplied generator kernels), content hashes of the inputs a
// candidate must not modify, and the restore of in-place inputs.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/hash.hpp"
#include "config/expr.hpp"
#include "config/permutation.hpp"
#include "core/kernel_params.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/evaluator_impl.hpp"

namespace kopt::harness {

using namespace detail;

std::vector<const resolved_tensor*> evaluator::impl::checked_tensors(const workload_state& st) {
  std::vector<const resolved_tensor*> out;
  for (const auto& t : st.tensors)
    if (t.is_output || t.in_place) out.push_back(&t);
  return out;
}

void evaluator::impl::run_generator_kernel(const config::generator& g, const name_values& names,
                                           const resolved_tensor& t, void* dst,
                                           std::uint64_t tseed) {
  compile::request rq;
  rq.source = g.kernel_source;
  rq.arch = dev.arch;
  rq.name = "generator_" + t.name + ".cu";
  if (g.kernel_source.find("KOPT_AXIS_") != std::string::npos)
    for (const auto& [n, v] : names) rq.defines["KOPT_AXIS_" + n] = v;
  std::string key = kopt::sha256_hex(rq.source) + "|" + g.kernel_name;
  for (const auto& [n, v] : rq.defines) key += fmt::format("|{}={}", n, v);
  auto it = generator_kernels.find(key);
  if (it == generator_kernels.end()) {
    const auto res = comp.compile(rq);
    if (!res.ok())
      throw kopt::error(
          fmt::format("input {}: the generator kernel does not compile:\n{}", t.name, res.log));
    if (const auto sig = generator_signature_problems(g.kernel_name, kernel_parameters(res.cubin),
                                                      "generator of input " + t.name);
        !sig.empty())
      throw kopt::error(fmt::format("{}", fmt::join(sig, "; ")));
    cudaLibrary_t lib = nullptr;
    cudaKernel_t fn = nullptr;
    KOPT_CUDA(
        cudaLibraryLoadData(&lib, res.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    if (cudaLibraryGetKernel(&fn, lib, g.kernel_name.c_str()) != cudaSuccess) {
      cudaGetLastError();
      cudaLibraryUnload(lib);
      throw kopt::error(fmt::format(
          "input {}: generator kernel '{}' is not in its module (declare it extern \"C\")", t.name,
          g.kernel_name));
    }
    it = generator_kernels.emplace(key, std::make_pair(lib, fn)).first;
  }
  void* data = dst;
  long long numel = t.elements;
  unsigned long long sd = tseed;
  void* args[] = {&data, &numel, &sd};
  const long long blocks = std::clamp<long long>((numel + 255) / 256, 1, 1LL << 30);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(256);
  cfg.stream = stream;
  KOPT_CUDA(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(it->second.second), args));
  wait(60000, "generator kernel " + g.kernel_name + " for input " + t.name);
}

void evaluator::impl::generate_inputs(const config::operator_config& op, const config::workload& w,
                                      workload_state& st, std::size_t k, std::uint64_t seed) {
  const auto names = config::workload_names(op, w);
  for (const auto& t : st.tensors) {
    if (t.is_output) continue;
    const config::tensor* spec = op.find_tensor(t.name);
    config::generator g;
    if (spec && spec->gen)
      g = *spec->gen;
    else if (!config::dtype_is_float(t.type)) {
      g.k = config::generator::kind::int_range;
      g.int_low = "0";
      g.int_high = "16";
    }
    const std::uint64_t tseed = tensor_seed(seed, t.name);
    if (g.k == config::generator::kind::kernel) {
      run_generator_kernel(g, names, t, st.inputs[k].at(t.name).data(), tseed);
      continue;
    }
    void* dst = st.inputs[k].at(t.name).data();
    if (g.k == config::generator::kind::permutation) {
      // Host-side Fisher-Yates: permutations are small (block tables).
      const std::int64_t n = g.int_high.empty()
                                 ? (t.shape.empty() ? t.elements : t.shape.back())
                                 : expr::evaluate(g.int_high, expr::map_resolver(names));
      const std::int64_t row = t.shape.empty() ? t.elements : t.shape.back();
      const std::vector<std::int64_t> vals =
          config::permutation_values(n, t.elements, row, g.disjoint_rows, tseed);
      std::string host(static_cast<std::size_t>(t.bytes), '\0');
      for (std::size_t i = 0; i < vals.size(); ++i) {
        if (t.type == config::dtype::int64)
          std::memcpy(host.data() + 8 * i, &vals[i], 8);
        else {
          const auto v = static_cast<std::int32_t>(vals[i]);
          std::memcpy(host.data() + 4 * i, &v, 4);
        }
      }
      KOPT_CUDA(cudaMemcpyAsync(dst, host.data(), host.size(), cudaMemcpyHostToDevice, stream));
      KOPT_CUDA(cudaStreamSynchronize(stream));
      continue;
    }
    kernels::gen_params p;
    p.seed = tseed;
    switch (g.k) {
      case config::generator::kind::normal:
        p.kind = kernels::gen::normal;
        p.a = g.mean;
        p.b = g.stddev;
        p.scale = g.scale;
        break;
      case config::generator::kind::uniform:
        p.kind = kernels::gen::uniform;
        p.a = g.low;
        p.b = g.high;
        p.scale = g.scale;
        break;
      case config::generator::kind::constant:
        p.kind = kernels::gen::constant;
        p.a = g.value;
        break;
      case config::generator::kind::int_range:
        p.kind = kernels::gen::int_range;
        p.ilo = expr::evaluate(g.int_low.empty() ? "0" : g.int_low, expr::map_resolver(names));
        p.ihi = expr::evaluate(g.int_high, expr::map_resolver(names));
        break;
      default:
        throw kopt::error(
            fmt::format("input {}: generator kind not supported by this worker", t.name));
    }
    KOPT_CUDA(kernels::fill_generated(dst, t.elements, to_elem(t.type), p, stream));
  }
}

// Hash of every non-in-place input of set k, into st.input_hash[k].
std::map<std::string, unsigned long long> evaluator::impl::hash_inputs(workload_state& st,
                                                                       std::size_t k) {
  std::vector<std::string> names;
  for (const auto& t : st.tensors)
    if (!t.is_output && !t.in_place) names.push_back(t.name);
  KOPT_CUDA(cudaMemsetAsync(scratch, 0, names.size() * sizeof(unsigned long long), stream));
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& b = st.inputs[k].at(names[i]);
    KOPT_CUDA(kernels::content_hash(b.data(), b.bytes(), scratch + i, stream));
  }
  std::vector<unsigned long long> h(names.size());
  if (!names.empty())
    KOPT_CUDA(cudaMemcpyAsync(h.data(), scratch, names.size() * sizeof(unsigned long long),
                              cudaMemcpyDeviceToHost, stream));
  wait(60000, "hashing inputs");
  std::map<std::string, unsigned long long> out;
  for (std::size_t i = 0; i < names.size(); ++i) out[names[i]] = h[i];
  return out;
}

void evaluator::impl::restore_in_place(workload_state& st, std::size_t k) {
  for (auto& [name, b] : st.pristine[k])
    KOPT_CUDA(cudaMemcpyAsync(st.inputs[k].at(name).data(), b.data(),
                              static_cast<std::size_t>(b.bytes()), cudaMemcpyDeviceToDevice,
                              stream));
}

}  // namespace kopt::harness
