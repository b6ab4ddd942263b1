// Assembles the JSON context that the prompt templates render, from plain
// structs: the operator (kopt::config::operator_config), the target GPU's
// facts, the parent candidate, its measurements and diagnosis, a digest of
// earlier attempts, retrieved technique snippets, and for the fix templates
// the compile log or the first failing elements. The builder is the one
// place that decides what the model may see: it states the operator's
// semantics and tolerances loosely and never copies evaluator internals
// (input seeds, generator distributions, tolerance slack, campaign budget,
// dropout settings) into the context, so a template cannot leak them even
// by mistake. Long texts are trimmed to byte budgets here, with a note that
// says how much was cut. The variables it produces are listed in
// docs/prompts.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/operator.hpp"

namespace kopt::prompts {

// The target GPU, from configs/hardware/gpus.json (peaks are datasheet
// figures) plus the architecture kernels are compiled for.
struct gpu_facts {
  std::string name;  // e.g. "NVIDIA H200" or the table key "H200"
  std::string arch = "sm_90a";
  int sm_count = 0;
  std::int64_t l2_bytes = 0;  // 0 = unknown
  double dram_bytes_per_s = 0;
  std::map<std::string, double> flops_per_s;  // by unit: fp32, bf16_tensor, ...
};

// The entry of a peak table (configs/hardware/gpus.json) whose key equals
// `gpu` or whose `match` strings occur in it. Throws kopt::config_error when
// none does or the entry is malformed.
gpu_facts gpu_facts_from_table(const nlohmann::json& table, const std::string& gpu);

// One workload's measurement of the parent.
struct workload_measurement {
  std::string workload;  // workload id of the operator config
  std::string status = "ok";  // ok, wrong, compile_error, timeout, crashed, ...
  std::optional<double> median_us;
  std::optional<double> sol_fraction;  // T_SOL / median, 0..1
  // max(T_SOL, measured launch floor) / median: what a launch allows at all.
  std::optional<double> attainable_fraction;
};

// One finding of the diagnosis: a class (memory_bound_uncoalesced,
// low_occupancy, register_spills, ...) and the numbers that support it.
struct finding {
  std::string cls;
  std::string evidence;
};

// One earlier attempt, digested: what was tried and what came of it.
struct attempt {
  std::string id;       // stable label (e.g. "c42"); becomes the optional ID history:ID
  std::string summary;  // what was tried
  std::string outcome;  // e.g. "correct, 0.61 of SOL (+8 %)" or "wrong result on t3_h1001"
};

// A retrieved knowledge-base passage.
struct snippet {
  std::string id;  // becomes the optional ID snippet:ID
  std::string title;
  std::string text;
};

struct budgets {
  std::size_t source_bytes = 48 * 1024;       // parent source
  std::size_t compile_log_bytes = 4 * 1024;   // fix_compile
  std::size_t failure_bytes = 3 * 1024;       // fix_wrong
  std::size_t feedback_bytes = 4 * 1024;      // revise
  std::size_t snippet_bytes = 1500;           // each snippet
  std::size_t snippets = 6;                   // how many snippets at most
  std::size_t history = 12;                   // how many attempts at most (newest kept)
};

struct prompt_inputs {
  const config::operator_config* op = nullptr;  // required
  gpu_facts gpu;
  // The parent: the candidate the model improves on (the seed, the
  // reference, or the best so far). Absent: write from scratch.
  std::optional<config::candidate> parent;
  std::string parent_label;  // "seed", "reference", "candidate 42", ...
  // Measurements of the parent, in workload order; empty with
  // measurements_note saying why (e.g. "none stored yet").
  std::vector<workload_measurement> measurements;
  std::string measurements_note;
  std::vector<finding> diagnosis;
  std::vector<attempt> history;  // oldest first
  std::vector<snippet> snippets;  // best first
  std::string feedback;           // revise: what to change (reviewer or extractor feedback)
  std::string compile_log;        // fix_compile
  std::string failure;            // fix_wrong: first failing elements, error statistics
  budgets limits;
};

// Cuts `text` to at most `max_bytes` at a line boundary where possible (and
// never inside a UTF-8 sequence), appending "[... N bytes trimmed]".
std::string trim_to_budget(const std::string& text, std::size_t max_bytes);

// The context for every template (see docs/prompts.md for its variables).
// Throws kopt::error when inputs.op is null.
nlohmann::json build_context(const prompt_inputs& inputs);

// Human-friendly numbers for prompts: "4.8 TB/s", "989.5 TFLOP/s", "60 MiB".
std::string format_bytes(double bytes);
std::string format_rate(double per_s, const std::string& unit);

}  // namespace kopt::prompts
