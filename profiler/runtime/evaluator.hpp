// The worker's evaluation of candidates against the reference, to the
// standard of docs/measurement.md and the defences of docs/integrity.md:
// seeded inputs, reference outputs computed once per workload and seed on
// their own buffers, NaN-poisoned outputs, guard canaries around every
// buffer, input hashes, tolerance checks on several seeds, CUPTI timing with
// an L2 flush, persisting-L2 reset, input rotation and fresh output values
// before every sample, a check of a randomly chosen timed sample, and a
// re-check on unseen inputs after timing.
//
// Outcomes are data (statuses in the emitted JSON). Two outcomes end the
// process on purpose: a kernel that hangs (the context cannot be recovered
// without killing it) and a sticky CUDA error (trap, illegal address). The
// evaluator then emits a "fatal" message naming the subject and workload and
// exits; the control plane records the outcome and starts a new worker.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "compile/compiler.hpp"
#include "runtime/device.hpp"

namespace kopt::harness {

using emit_fn = std::function<void(const nlohmann::json&)>;

// Process exit codes of kopt-worker after a fatal candidate outcome.
inline constexpr int exit_candidate_crashed = 3;
inline constexpr int exit_candidate_hang = 4;

class evaluator {
 public:
  // timing == false: a profiling worker (kopt-worker --profile-only) that
  // checks correctness and collects counters but never enables the CUPTI
  // Activity API; the control plane runs timing in another process.
  evaluator(device_info dev, const compile::compiler& comp, emit_fn emit, bool timing = true);
  ~evaluator();
  evaluator(const evaluator&) = delete;
  evaluator& operator=(const evaluator&) = delete;

  // Handles one "evaluate" request; emits compiled / workload_begin /
  // workload_result / done messages (or error). May terminate the process
  // after emitting "fatal" (see above).
  void evaluate(const nlohmann::json& request);

  // Measures copy bandwidth (bytes/s, read + write) with a large float4 copy.
  nlohmann::json calibrate();

  // The launch floor under the current clock (an empty kernel sampled as a
  // candidate is): {"clock", "median_ns", "kernel"}; a profile-only worker
  // answers {"skipped": why}. Measured once per clock and cached.
  nlohmann::json launch_floor();

  // Seeds that cache with a floor measured earlier on this device (the
  // worker's on-disk cache, as launch_floor wrote it): every later timing
  // on that clock reports exactly this value, so all workers of one device
  // and driver agree with each other and with their hellos. Returns false
  // (and changes nothing) for a value that is not a positive floor of a
  // known clock.
  bool use_launch_floor(const nlohmann::json& measured);

 private:
  struct impl;
  std::unique_ptr<impl> p_;
};

}  // namespace kopt::harness
