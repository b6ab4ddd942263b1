// Support for GPU tests: start the real kopt-worker and skip (exit code 77,
// reported by CTest as "Skipped") with the worker's own reason when there is
// no GPU, unless KOPT_REQUIRE_GPU=1 says a GPU must be there (the GPU
// machine), in which case a missing device is a failure. This way a skip can
// never hide a test that should have run.
#pragma once

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "runner/worker_client.hpp"

namespace kopt::testing {

inline bool gpu_required() {
  const char* e = std::getenv("KOPT_REQUIRE_GPU");
  return e && std::string(e) == "1";
}

inline kopt::runner::worker_options worker_opts() {
  kopt::runner::worker_options o;
  // $KOPT_WORKER wins, so the same test binary runs from a copied build.
  const char* env = std::getenv("KOPT_WORKER");
  o.worker_exe = env && *env ? env : KOPT_WORKER_EXE;
  o.silence_timeout = std::chrono::seconds(120);
  return o;
}

// Returns a started worker, or exits the test program with 77 (skip).
inline std::unique_ptr<kopt::runner::worker_client> start_worker_or_skip() {
  auto w = std::make_unique<kopt::runner::worker_client>(worker_opts());
  try {
    w->start();
  } catch (const std::exception& e) {
    if (gpu_required()) {
      std::cerr << "GPU required (KOPT_REQUIRE_GPU=1) but the worker cannot run: " << e.what() << '\n';
      std::exit(1);
    }
    std::cout << "SKIPPED: no GPU here: " << e.what() << '\n';
    std::exit(77);
  }
  return w;
}

}  // namespace kopt::testing
