// Getting campaign data out of kopt and operator definitions in:
//
// * JSON lines: one line per candidate (iteration, strategy, outcome, score,
//   compile results and every evaluation; the source with with_source).
// * CSV: one row per evaluation with its candidate's context, for pandas,
//   R or a spreadsheet.
// * FlashInfer-Trace: the operator as a `definition`, its workloads, the best
//   candidates as `solution`s and their measurements as `trace`s, in the
//   directory layout of the flashinfer-trace data set
//   (definitions/<op_type>/<name>.json, workloads/<op_type>/<name>.jsonl,
//   solutions/<author>/<op_type>/<name>/<solution>.json,
//   traces/<author>/<op_type>/<name>.jsonl).
// * Import of FlashInfer-Trace definitions and workloads as kopt operator
//   configs. FlashInfer references are PyTorch, which kopt cannot run, so a
//   config is complete only when a reference in kopt's candidate format is
//   supplied; everything that does not map is reported per definition.
//
// docs/researchers.md lists field by field what maps and what does not.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/data.hpp"

namespace kopt::report {

void write_jsonl(const campaign_data& d, std::ostream& out, bool with_source);
void write_csv(const campaign_data& d, std::ostream& out);

struct flashinfer_export_options {
  std::size_t top = 1;  // how many candidates, best first (by score)
  std::string author;   // default: "kopt-<provider>[-<model>]"
};
// Writes under `dir`; returns the files written (relative to dir). Throws
// kopt::not_found_error when no candidate has a score (nothing correct on
// every workload) and kopt::error when a file cannot be written.
std::vector<std::string> write_flashinfer_trace(const campaign_data& d,
                                                const std::filesystem::path& dir,
                                                const flashinfer_export_options& o = {});

// The FlashInfer-Trace status of a kopt evaluation status.
std::string flashinfer_status(store::eval_status s);

// The member that carries kopt's own fields in exported definitions and
// workloads (the config, each workload's id, weight, scalars, tolerance).
// FlashInfer-Trace's models ignore unknown members, and an import that finds
// it restores the config exactly.
inline constexpr const char* kopt_extension = "kopt";

struct import_options {
  std::filesystem::path out_dir = ".";
  // <definition name>.json in kopt's candidate format, used as the reference.
  std::filesystem::path reference_dir;
  // Distinct axis assignments kept per definition, spread over the size
  // range; all_workloads keeps every one.
  std::size_t max_workloads = 32;
  bool all_workloads = false;
  // The campaign section of an imported config (so that it can run).
  std::string provider = "anthropic";
  std::string model;
};

struct imported_definition {
  std::string name;
  std::string status;          // imported (valid config), draft (written, needs work), skipped
  std::filesystem::path file;  // the config (or draft) written, if any
  std::size_t workloads = 0;
  std::vector<std::string> problems;  // why it is a draft or skipped
  std::vector<std::string> notes;     // what was dropped or approximated
  nlohmann::json to_json() const;
};

// Reads every definition under `dir` (definitions/**.json, or *.json with
// axes/inputs/outputs anywhere under dir) and the workloads of each:
// FlashInfer-Trace lines naming it (workloads/**/<name>.jsonl, traces/**),
// and bare Workload objects (SOL-ExecBench) in <name>.jsonl or in a .jsonl
// beside its definition (definition.json + workload.jsonl). Throws
// kopt::config_error when dir has no definition.
std::vector<imported_definition> import_flashinfer_trace(const std::filesystem::path& dir,
                                                         const import_options& o);

}  // namespace kopt::report
