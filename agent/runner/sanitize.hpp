// compute-sanitizer on a finalist (issue 17, docs/integrity.md): the
// subject runs its correctness checks, once per tool (memcheck, racecheck,
// initcheck), in a throwaway profile-only worker started under
// compute-sanitizer, on a small workload with one input set. Any error the
// tool reports makes the subject rejected_integrity with the tool's own
// message; a machine without the tool records why it was skipped. Timing
// and counters never run under the sanitizer (CUPTI and the sanitizer do
// not share a process), so the timing worker is untouched.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runner/worker_client.hpp"

namespace kopt::runner {

struct sanitize_tool_result {
  std::string tool;     // memcheck, racecheck, initcheck
  std::string status;   // ok, errors, failed (the run itself did not complete)
  int errors = 0;       // as the tool's summary counts them
  std::string message;  // the tool's first reports, trimmed
  nlohmann::json to_json() const;
};

struct sanitize_report {
  std::string status = "skipped";  // ok, rejected_integrity, skipped, failed
  std::string reason;              // why skipped / failed, or the first error
  std::string sanitizer;           // path of compute-sanitizer used
  std::vector<sanitize_tool_result> tools;
  bool rejected() const noexcept { return status == "rejected_integrity"; }
  nlohmann::json to_json() const;
};

// $KOPT_COMPUTE_SANITIZER, else compute-sanitizer on PATH, else the CUDA
// toolkit's (/usr/local/cuda/bin, /usr/local/cuda/compute-sanitizer).
std::optional<std::string> find_compute_sanitizer();

// The number of errors in a compute-sanitizer log ("ERROR SUMMARY: N
// errors", racecheck's "RACECHECK SUMMARY: ... (N errors, ..."), and the
// first report lines. nullopt when the log has no summary at all.
struct sanitizer_log_summary {
  int errors = 0;
  std::string first_reports;
};
std::optional<sanitizer_log_summary> parse_sanitizer_log(const std::string& log);

// `request` is an evaluate request (operator snapshot, subjects, workloads);
// its settings are replaced by checks only with one input set. `base`
// gives the worker executable, GPU and cache; each tool gets its own worker.
sanitize_report sanitize(const worker_options& base, nlohmann::json request,
                         const std::vector<std::string>& tools = {"memcheck", "racecheck",
                                                                  "initcheck"});

}  // namespace kopt::runner
