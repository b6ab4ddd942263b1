// Kernel signatures from a compiled cubin, and the launch plan checked
// against them before anything runs. A plan whose arguments do not match
// the kernel's parameters (one missing, an int64 where the kernel takes an
// int, n passed where a pointer is expected) makes the driver copy the
// wrong bytes into the parameter buffer: the kernel reads garbage or
// dereferences an integer as a pointer, and the worker crashes. The driver
// cannot tell; the cubin can. Every kernel has a `.nv.info.<name>` section
// of EIATTR records, and its EIATTR_KPARAM_INFO records give each
// parameter's ordinal, offset and size in the parameter buffer. Kernels
// are looked up by the name NVRTC lowered them to (kopt's kernels are
// extern "C", so that is the name in the plan).
//
// Needs no GPU: the compile check (`kopt eval` without a GPU, kb lint) and
// the worker (before loading the module) run the same check, for the
// reference, baseline, seed, generator kernels and every candidate.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/operator.hpp"

namespace kopt::harness {

struct kernel_param {
  std::uint32_t ordinal = 0;  // position in the signature (0-based)
  std::uint32_t offset = 0;   // byte offset in the parameter buffer
  std::uint32_t size = 0;     // bytes
};

struct kernel_signatures {
  // Parameters (sorted by ordinal) of every kernel with a .nv.info.<name>
  // section, by name.
  std::map<std::string, std::vector<kernel_param>> params;
  // Every function with code (.text.<name>): a kernel found here but not
  // in `params` exists, with a signature the cubin does not describe.
  std::set<std::string> functions;
};

// Throws kopt::error when the bytes are not a 64-bit little-endian ELF or a
// record runs past its section.
kernel_signatures kernel_parameters(std::string_view cubin);

// Bytes each launch-plan argument occupies in the parameter buffer:
// pointers (tensor, workspace) 8, integers and scalars their type's size.
std::uint32_t launch_arg_bytes(const config::launch_arg& a);

// Every mismatch between the plan's launches and the kernels' signatures
// in `sigs` (empty when all match): a kernel the module does not have
// (naming those it has), a different number of arguments, an argument
// whose size differs from its parameter's. `what` starts each message
// (e.g. "reference").
std::vector<std::string> launch_signature_problems(const std::vector<config::launch>& launches,
                                                   const kernel_signatures& sigs,
                                                   const std::string& what);

// Generator kernels (kind "kernel") are launched as
// kernel(T* data, long long n, unsigned long long seed): the same check
// for that signature.
std::vector<std::string> generator_signature_problems(const std::string& kernel,
                                                      const kernel_signatures& sigs,
                                                      const std::string& what);

// The largest shared memory per block (static + dynamic, with opt-in) of
// an architecture such as "sm_90a"; nullopt for one kopt does not know.
std::optional<std::int64_t> max_shared_optin_bytes(std::string_view arch);

}  // namespace kopt::harness
