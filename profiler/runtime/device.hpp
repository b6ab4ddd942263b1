// What the worker reports about its GPU at start (protocol "hello"), the
// device limits launch plans are checked against, and the SM clock read
// through NVML (loaded with dlopen, so nothing links the driver's libraries
// directly). Clocks matter because CUDA 13 cannot lock them: every timing
// sample records the SM clock it ran at.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/plan.hpp"

namespace kopt::harness {

struct device_info {
  int ordinal = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;
  int cc_major = 0, cc_minor = 0;
  std::string arch;  // NVRTC target, e.g. sm_90a
  int sm_count = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t persisting_l2_max = 0;
  std::int64_t global_memory_bytes = 0;
  int max_sm_clock_mhz = 0;      // NVML max, or cudaDevAttrClockRate
  int default_sm_clock_mhz = 0;  // NVML default applications clock when known
  int memory_clock_mhz = 0;
  int memory_bus_width = 0;
  std::string driver_version;    // e.g. 580.159.04 (NVML) or 13.0 (CUDA)
  int cuda_driver_api = 0;       // cudaDriverGetVersion
  int cuda_runtime = 0;          // cudaRuntimeGetVersion
  int cupti_api = 0;
  std::string nvrtc_version;
  device_limits limits;
  nlohmann::json to_json() const;
};

// Initialises the CUDA context on `ordinal`; throws with a clear message when
// there is no usable device or driver.
device_info query_device(int ordinal);

// Number of visible CUDA devices; 0 (never an exception) without a driver.
int device_count() noexcept;
// Why device_count() is 0, in words.
std::string no_device_reason();

// Current SM clock in MHz from NVML; nullopt when NVML is unavailable.
std::optional<int> current_sm_clock_mhz();

}  // namespace kopt::harness
