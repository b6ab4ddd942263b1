// One way to check CUDA runtime and CUPTI return codes (nvbench's pattern):
// a macro that throws cuda_failure with file:line and the API's own message.
// A sticky error (the context is unusable after it) is marked so the worker
// can report the candidate as crashed and exit instead of carrying on.
#pragma once

#include <cuda_runtime_api.h>
#include <cupti.h>

#include <string>

#include <fmt/format.h>

#include "common/error.hpp"

namespace kopt::harness {

class cuda_failure : public kopt::error {
 public:
  cuda_failure(std::string msg, cudaError_t code, bool sticky)
      : kopt::error(std::move(msg)), code_(code), sticky_(sticky) {}
  cudaError_t code() const noexcept { return code_; }
  bool sticky() const noexcept { return sticky_; }

 private:
  cudaError_t code_;
  bool sticky_;
};

// Errors after which the CUDA context cannot be used again.
inline bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* what, const char* file, int line) {
  throw cuda_failure(fmt::format("{}:{}: {} failed: {} ({})", file, line, what, cudaGetErrorString(e),
                                 cudaGetErrorName(e)),
                     e, is_sticky(e));
}

[[noreturn]] inline void throw_cupti(CUptiResult r, const char* what, const char* file, int line) {
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  throw kopt::error(fmt::format("{}:{}: {} failed: {}", file, line, what, msg ? msg : "unknown CUPTI error"));
}

}  // namespace kopt::harness

#define KOPT_CUDA(call)                                                           \
  do {                                                                            \
    const cudaError_t kopt_e_ = (call);                                           \
    if (kopt_e_ != cudaSuccess) ::kopt::harness::throw_cuda(kopt_e_, #call, __FILE__, __LINE__); \
  } while (0)

#define KOPT_CUPTI(call)                                                          \
  do {                                                                            \
    const CUptiResult kopt_r_ = (call);                                           \
    if (kopt_r_ != CUPTI_SUCCESS) ::kopt::harness::throw_cupti(kopt_r_, #call, __FILE__, __LINE__); \
  } while (0)

// For destructors: never throws.
#define KOPT_CUDA_NOTHROW(call) static_cast<void>(call)
