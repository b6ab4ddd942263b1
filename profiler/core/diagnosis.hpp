// Bottleneck diagnosis: from counters, function attributes, the launch
// configuration, timing and the roofline, a structured finding per candidate
// and workload. The classes are the knowledge base's bottleneck classes
// (knowledge_base/kb/document.cpp), so retrieval can key on them, and every
// finding carries the numbers that support it, so the prompt can quote
// evidence rather than adjectives.
//
// Plain C++ (no CUDA): CI tests it with synthetic inputs; the GPU tests check
// it on kernels whose behaviour is known (copy, FMA loop, one block).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kopt::harness {

struct diagnosis_input {
  // Timing (CUPTI activity median of the timed pass).
  double median_ns = 0;
  // The worker's measured launch floor (0: unknown); launch-bound is judged
  // against it (harness::is_launch_bound).
  double launch_floor_ns = 0;
  // Counters by metric name (any tier; missing ones are simply not used).
  std::map<std::string, double> metrics;
  // Roofline of the workload (config) and the device's peaks.
  double roofline_bytes = 0, roofline_flops = 0;
  double peak_bytes_per_s = 0, peak_flops_per_s = 0;  // for the workload's flop unit
  double sol_fraction = -1;                             // < 0: unknown
  // Device and launches.
  int sm_count = 0;
  int max_threads_per_sm = 2048;
  struct launch {
    std::string kernel;
    std::int64_t blocks = 0;           // grid size
    std::int64_t threads_per_block = 0;
    int blocks_per_sm = 0;             // occupancy API: max resident blocks per SM
    int registers = 0;
    std::int64_t local_bytes = 0;      // per thread (spills or local arrays)
    std::int64_t spill_bytes = 0;      // from ptxas
    std::vector<std::string> performance_advisories;  // ptxas "Potential Performance Loss" lines
  };
  std::vector<launch> launches;
};

struct finding {
  std::string cls;       // knowledge-base bottleneck class, e.g. memory-bound-far-from-peak
  double severity = 0;   // 0..1, how much time it plausibly costs
  std::string summary;   // one sentence with the numbers
  nlohmann::json evidence = nlohmann::json::object();
  nlohmann::json to_json() const;
};

struct diagnosis {
  std::string primary;            // the class of the most severe finding
  std::vector<finding> findings;  // most severe first
  nlohmann::json derived = nlohmann::json::object();  // achieved GB/s, GFLOP/s, occupancy ...
  nlohmann::json to_json() const;
  // Short text for prompts: one line per finding.
  std::string to_text() const;
};

diagnosis diagnose(const diagnosis_input& in);

}  // namespace kopt::harness
