#include "runtime/device.hpp"

#include <cupti.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <array>
#include <filesystem>
#include <mutex>

#include "runtime/cuda_check.hpp"

namespace kopt::harness {
namespace {

// The few NVML entry points we use, resolved at run time: libnvidia-ml
// belongs to the driver, and the worker must at least start without one.
struct nvml_api {
  using device_t = void*;
  int (*init)() = nullptr;
  int (*by_pci)(const char*, device_t*) = nullptr;
  int (*clock)(device_t, int, unsigned*) = nullptr;
  int (*max_clock)(device_t, int, unsigned*) = nullptr;
  int (*default_app_clock)(device_t, int, unsigned*) = nullptr;
  int (*driver_version)(char*, unsigned) = nullptr;
  device_t dev = nullptr;
  bool ok = false;
};
constexpr int nvml_clock_sm = 1;
constexpr int nvml_clock_mem = 2;

nvml_api& nvml() {
  static nvml_api api;
  return api;
}

void nvml_open(const std::string& pci_bus_id) {
  auto& a = nvml();
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  a.init = reinterpret_cast<int (*)()>(dlsym(h, "nvmlInit_v2"));
  a.by_pci = reinterpret_cast<int (*)(const char*, nvml_api::device_t*)>(dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
  a.clock = reinterpret_cast<int (*)(nvml_api::device_t, int, unsigned*)>(dlsym(h, "nvmlDeviceGetClockInfo"));
  a.max_clock = reinterpret_cast<int (*)(nvml_api::device_t, int, unsigned*)>(dlsym(h, "nvmlDeviceGetMaxClockInfo"));
  a.default_app_clock =
      reinterpret_cast<int (*)(nvml_api::device_t, int, unsigned*)>(dlsym(h, "nvmlDeviceGetDefaultApplicationsClock"));
  a.driver_version = reinterpret_cast<int (*)(char*, unsigned)>(dlsym(h, "nvmlSystemGetDriverVersion"));
  if (!a.init || !a.by_pci || !a.clock || a.init() != 0) return;
  if (a.by_pci(pci_bus_id.c_str(), &a.dev) != 0) return;
  a.ok = true;
}

std::string uuid_string(const cudaUUID_t& u) {
  std::string s = "GPU-";
  static constexpr char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    const auto b = static_cast<unsigned char>(u.bytes[i]);
    s.push_back(hex[b >> 4]);
    s.push_back(hex[b & 0xF]);
    if (i == 3 || i == 5 || i == 7 || i == 9) s.push_back('-');
  }
  return s;
}

}  // namespace

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  cudaGetLastError();
  // cudart reports a missing driver as "insufficient driver version", which
  // misleads on a machine that has no NVIDIA driver (or GPU) at all.
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice) {
    void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (libcuda != nullptr) dlclose(libcuda);
    std::error_code ec;
    const bool proc = std::filesystem::exists("/proc/driver/nvidia/version", ec);
    if (libcuda == nullptr && !proc)
      return "no NVIDIA driver or GPU found (no libcuda.so.1, no /proc/driver/nvidia): kopt needs "
             "a machine with an NVIDIA GPU and its driver";
    if (e == cudaErrorNoDevice)
      return "no NVIDIA GPU found: the driver is installed but reports no device";
  }
  if (e != cudaSuccess) return fmt::format("no usable CUDA device: {} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
  if (n == 0) return "no CUDA device is visible (CUDA_VISIBLE_DEVICES?)";
  return "";
}

device_info query_device(int ordinal) {
  device_info d;
  d.ordinal = ordinal;
  const int n = device_count();
  if (n == 0) throw kopt::error(no_device_reason());
  if (ordinal < 0 || ordinal >= n)
    throw kopt::error(fmt::format("GPU {} does not exist ({} visible)", ordinal, n));
  KOPT_CUDA(cudaSetDevice(ordinal));
  KOPT_CUDA(cudaFree(nullptr));  // create the primary context now, not in the first timed call
  cudaDeviceProp p{};
  KOPT_CUDA(cudaGetDeviceProperties(&p, ordinal));
  d.name = p.name;
  d.uuid = uuid_string(p.uuid);
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  // Hopper's arch-specific features (wgmma, setmaxnreg) need the "a" target.
  d.arch = fmt::format("sm_{}{}{}", p.major, p.minor, p.major == 9 && p.minor == 0 ? "a" : "");
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = p.l2CacheSize;
  d.persisting_l2_max = p.persistingL2CacheMaxSize;
  d.global_memory_bytes = static_cast<std::int64_t>(p.totalGlobalMem);
  d.memory_bus_width = p.memoryBusWidth;
  std::array<char, 32> bus{};
  KOPT_CUDA(cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), ordinal));
  d.pci_bus_id = bus.data();
  int clock_khz = 0, mem_khz = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, ordinal) == cudaSuccess)
    d.max_sm_clock_mhz = clock_khz / 1000;
  if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, ordinal) == cudaSuccess)
    d.memory_clock_mhz = mem_khz / 1000;
  cudaGetLastError();
  KOPT_CUDA(cudaDriverGetVersion(&d.cuda_driver_api));
  KOPT_CUDA(cudaRuntimeGetVersion(&d.cuda_runtime));
  uint32_t cupti = 0;
  if (cuptiGetVersion(&cupti) == CUPTI_SUCCESS) d.cupti_api = static_cast<int>(cupti);
  int nmaj = 0, nmin = 0;
  if (nvrtcVersion(&nmaj, &nmin) == NVRTC_SUCCESS) d.nvrtc_version = fmt::format("{}.{}", nmaj, nmin);

  d.limits.max_threads_per_block = p.maxThreadsPerBlock;
  d.limits.max_block = {p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2]};
  d.limits.max_grid = {p.maxGridSize[0], p.maxGridSize[1], p.maxGridSize[2]};
  d.limits.max_shared_optin = static_cast<std::int64_t>(p.sharedMemPerBlockOptin);
  d.limits.supports_clusters = p.major >= 9;

  static std::once_flag once;
  std::call_once(once, [&] { nvml_open(d.pci_bus_id); });
  auto& a = nvml();
  if (a.ok) {
    unsigned v = 0;
    if (a.max_clock && a.max_clock(a.dev, nvml_clock_sm, &v) == 0) d.max_sm_clock_mhz = static_cast<int>(v);
    if (a.default_app_clock && a.default_app_clock(a.dev, nvml_clock_sm, &v) == 0)
      d.default_sm_clock_mhz = static_cast<int>(v);
    if (a.max_clock && a.max_clock(a.dev, nvml_clock_mem, &v) == 0) d.memory_clock_mhz = static_cast<int>(v);
    std::array<char, 96> ver{};
    if (a.driver_version && a.driver_version(ver.data(), static_cast<unsigned>(ver.size())) == 0)
      d.driver_version = ver.data();
  }
  if (d.default_sm_clock_mhz == 0) d.default_sm_clock_mhz = d.max_sm_clock_mhz;
  if (d.driver_version.empty())
    d.driver_version = fmt::format("CUDA {}.{}", d.cuda_driver_api / 1000, (d.cuda_driver_api % 1000) / 10);
  return d;
}

std::optional<int> current_sm_clock_mhz() {
  auto& a = nvml();
  if (!a.ok) return std::nullopt;
  unsigned v = 0;
  if (a.clock(a.dev, nvml_clock_sm, &v) != 0) return std::nullopt;
  return static_cast<int>(v);
}

nlohmann::json device_info::to_json() const {
  return {{"ordinal", ordinal},
          {"name", name},
          {"uuid", uuid},
          {"pci_bus_id", pci_bus_id},
          {"compute_capability", fmt::format("{}.{}", cc_major, cc_minor)},
          {"arch", arch},
          {"sm_count", sm_count},
          {"l2_bytes", l2_bytes},
          {"persisting_l2_max_bytes", persisting_l2_max},
          {"global_memory_bytes", global_memory_bytes},
          {"max_sm_clock_mhz", max_sm_clock_mhz},
          {"default_sm_clock_mhz", default_sm_clock_mhz},
          {"memory_clock_mhz", memory_clock_mhz},
          {"memory_bus_width", memory_bus_width},
          {"driver_version", driver_version},
          {"cuda_driver_api", cuda_driver_api},
          {"cuda_runtime", cuda_runtime},
          {"cupti_api", cupti_api},
          {"nvrtc_version", nvrtc_version},
          {"limits", limits.to_json()}};
}

}  // namespace kopt::harness
