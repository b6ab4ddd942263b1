// Compile-checking the Example of a technique document (worker builds only:
// it needs kopt::compile, hence NVRTC). The ```cuda block is compiled
// exactly as a candidate would be: for the given architecture (sm_90a by
// default), each tunable parameter passed as -DNAME=<default>, with the
// plan's compile_options; the kernels named by the launch plan must appear
// in the compiled module. An example that no longer compiles would teach the
// LLM broken code, so `kopt kb lint --compile` and CI run this on every
// document.
#pragma once

#include <string>
#include <vector>

#include "compile/compiler.hpp"
#include "kb/document.hpp"

namespace kopt::kb {

struct compile_outcome {
  std::string id;
  bool compiled = false;               // NVRTC produced a module
  bool ok = false;                     // compiled, every launched kernel in it, integrity clean
  // compile::status_name, "rejected_integrity" (compiled, but kopt would
  // refuse it as a candidate), "missing_kernel", or "no_example"
  std::string status;
  std::vector<std::string> problems;   // why it failed, one line each
  std::string log;                     // NVRTC log
  compile::result result;
};

// Builds the request for a document's example (defaults as -D defines).
compile::request example_request(const document& d, const std::string& arch = "sm_90a");

// `comp` null: NVRTC in this process (tests); otherwise the isolated,
// cached compiler of the worker.
compile_outcome compile_example(const document& d, const std::string& arch,
                                const compile::compiler* comp);

}  // namespace kopt::kb
