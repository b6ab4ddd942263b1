// The runtime defences of issue 17 that are not a single call's checks:
// canaries refreshed with a fresh seed before every call and verified on
// the host against its own copy; the module's own global and constant data
// hashed at load and after calls (whatever the cubin's section flags say, a
// __constant__ bank can be written through a generic pointer); and captures
// of timed samples (a device-to-device copy of their outputs, taken right
// after the sample, compared with the reference after the batch).
#include <fmt/format.h>

#include "core/cubin_inspect.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/evaluator_impl.hpp"

namespace kopt::harness {

using namespace detail;

json subject::integrity_record() const {
  json names = json::array();
  std::size_t bytes = 0;
  for (const auto& m : module_data) {
    names.push_back(m.name);
    bytes += m.bytes;
  }
  return {{"allow_clock_reads", allow_clock_reads},
          {"clock_reads", compiled.clock_reads},
          {"module_data",
           {{"objects", names}, {"bytes", bytes}, {"unresolved", module_data_unresolved}}}};
}

std::vector<guard_ref> evaluator::impl::reachable(workload_state& st, std::size_t k, bool reference,
                                                  std::map<std::string, guarded>& ws) {
  std::vector<guard_ref> all;
  for (auto& [n, b] : st.inputs[k]) all.push_back({"input " + n, &b});
  for (auto& [n, b] : reference ? st.ref_outputs : st.outputs) all.push_back({"output " + n, &b});
  for (auto& [n, b] : ws) all.push_back({"workspace " + n, &b});
  return all;
}

void evaluator::impl::refresh_guards(const std::vector<guard_ref>& all) {
  for (const auto& g : all) g.buf->refresh(fresh(), stream);
}

void evaluator::impl::verify_guards_on_host(const std::vector<guard_ref>& all) {
  host_blocks regions;
  try {
    for (const auto& g : all) {
      regions.push_back(downloads.acquire(static_cast<std::size_t>(guard_bytes)));
      KOPT_CUDA(cudaMemcpyAsync(regions.back().data(), g.buf->front(),
                                static_cast<std::size_t>(guard_bytes), cudaMemcpyDeviceToHost,
                                stream));
      regions.push_back(downloads.acquire(static_cast<std::size_t>(g.buf->back_bytes())));
      KOPT_CUDA(cudaMemcpyAsync(regions.back().data(), g.buf->back(),
                                static_cast<std::size_t>(g.buf->back_bytes()),
                                cudaMemcpyDeviceToHost, stream));
    }
    wait(60000, "guard download");
  } catch (...) {
    for (auto& b : regions) b.abandon();
    throw;
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto* front = reinterpret_cast<const unsigned char*>(regions[2 * i].data());
    const auto* back = reinterpret_cast<const unsigned char*>(regions[2 * i + 1].data());
    const std::uint64_t bad = all[i].buf->host_damage(front, guard_bytes) +
                              all[i].buf->host_damage(back, all[i].buf->back_bytes());
    if (bad != 0)
      throw subject_failure{"rejected_integrity",
                            fmt::format("wrote {} bytes outside its buffers (guard region of {} "
                                        "damaged)",
                                        bad, all[i].what)};
  }
}

void evaluator::impl::resolve_module_data(subject& s) {
  s.module_data.clear();
  s.module_data_unresolved.clear();
  for (const auto& name : inspect_cubin(s.compiled.cubin).module_data_symbols) {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    if (cudaLibraryGetGlobal(&ptr, &bytes, s.lib, name.c_str()) != cudaSuccess || ptr == nullptr ||
        bytes == 0) {
      cudaGetLastError();
      s.module_data_unresolved.push_back(name);
      continue;
    }
    s.module_data.push_back({name, ptr, bytes, 0});
  }
  if (s.module_data.empty()) return;
  if (s.module_data.size() > static_cast<std::size_t>(scratch_slots))
    s.module_data.resize(scratch_slots);
  std::vector<unsigned long long> h(s.module_data.size());
  KOPT_CUDA(cudaMemsetAsync(scratch, 0, h.size() * sizeof(unsigned long long), stream));
  queue_module_hash(s, scratch);
  KOPT_CUDA(cudaMemcpyAsync(h.data(), scratch, h.size() * sizeof(unsigned long long),
                            cudaMemcpyDeviceToHost, stream));
  wait(60000, "module data hash");
  for (std::size_t i = 0; i < h.size(); ++i) s.module_data[i].baseline = h[i];
}

void evaluator::impl::queue_module_hash(const subject& s, unsigned long long* slots) {
  for (std::size_t i = 0; i < s.module_data.size(); ++i)
    KOPT_CUDA(kernels::content_hash(s.module_data[i].ptr,
                                    static_cast<std::int64_t>(s.module_data[i].bytes), slots + i,
                                    stream));
}

void evaluator::impl::check_module_hashes(const subject& s, const unsigned long long* got,
                                          const char* when) {
  for (std::size_t i = 0; i < s.module_data.size(); ++i)
    if (got[i] != s.module_data[i].baseline)
      throw subject_failure{
          "rejected_integrity",
          fmt::format("the module's own data '{}' ({} bytes) changed {}: state kept in module "
                      "memory (a __constant__ or __device__ object written through a pointer) is "
                      "not allowed",
                      s.module_data[i].name, s.module_data[i].bytes, when)};
}

void evaluator::impl::verify_module_data(const subject& s, const char* when) {
  if (s.module_data.empty()) return;
  std::vector<unsigned long long> h(s.module_data.size());
  KOPT_CUDA(cudaMemsetAsync(scratch, 0, h.size() * sizeof(unsigned long long), stream));
  queue_module_hash(s, scratch);
  KOPT_CUDA(cudaMemcpyAsync(h.data(), scratch, h.size() * sizeof(unsigned long long),
                            cudaMemcpyDeviceToHost, stream));
  wait(60000, "module data hash");
  check_module_hashes(s, h.data(), when);
}

void evaluator::impl::queue_capture(const workload_state& st, std::size_t k,
                                    std::vector<guarded>& snap) {
  const auto tensors = checked_tensors(st);
  if (snap.size() != tensors.size()) {
    snap.clear();
    for (const auto* t : tensors) snap.emplace_back(t->bytes, fresh(), stream);
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto* t = tensors[i];
    const void* src =
        t->is_output ? st.outputs.at(t->name).data() : st.inputs[k].at(t->name).data();
    KOPT_CUDA(cudaMemcpyAsync(snap[i].data(), src, static_cast<std::size_t>(t->bytes),
                              cudaMemcpyDeviceToDevice, stream));
  }
}

host_blocks evaluator::impl::download_capture(const workload_state& st,
                                              const std::vector<guarded>& snap, const char* what) {
  const auto tensors = checked_tensors(st);
  host_blocks got;
  try {
    for (std::size_t i = 0; i < tensors.size() && i < snap.size(); ++i) {
      got.push_back(downloads.acquire(static_cast<std::size_t>(tensors[i]->bytes)));
      KOPT_CUDA(cudaMemcpyAsync(got.back().data(), snap[i].data(), got.back().size(),
                                cudaMemcpyDeviceToHost, stream));
    }
    wait(60000, what);
  } catch (...) {
    for (auto& b : got) b.abandon();
    throw;
  }
  return got;
}

}  // namespace kopt::harness
