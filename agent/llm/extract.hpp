// Turns an LLM's answer into a candidate: one fenced ```cuda block (device
// code) and one fenced ```json block (the launch plan: `launches`, optional
// `parameters`, `workspaces`, `compile_options`). Models wrap answers in
// reasoning, repeat code blocks while revising, mislabel languages and forget
// the plan; the extractor tolerates what has one sensible reading and records
// a note, and turns everything else into precise problems phrased for the LLM
// (they go back to it as feedback). Only structure is checked here; whether
// the plan fits the operator (tensor names, axes) is kopt::config's job
// (load_candidate_text). The answer is untrusted: sizes are bounded and the
// extractor never throws on any input (it is fuzzed, see tests/fuzz/).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kopt::llm {

struct extract_options {
  std::size_t max_answer_bytes = 4u << 20;
  std::size_t max_source_bytes = 1u << 20;
  std::size_t max_launches = 16;
};

struct extraction {
  // The candidate in kopt's format with `source` set; empty when problems.
  std::optional<nlohmann::json> candidate;
  // What makes the answer unusable, one sentence each, addressed to the LLM.
  std::vector<std::string> problems;
  // What was tolerated (several code blocks, a missing language tag...).
  std::vector<std::string> notes;

  bool ok() const noexcept { return candidate.has_value() && problems.empty(); }
  // The message that goes back to the LLM: the problems plus the expected format.
  std::string feedback() const;
};

extraction extract_candidate(std::string_view answer, const extract_options& opts = {});

// A fenced block of a Markdown answer, exposed for tests.
struct fenced_block {
  std::string info;  // language tag, lower-cased first word of the info string
  std::string content;
  bool closed = true;
  std::size_t line = 0;  // 1-based line of the opening fence
};
std::vector<fenced_block> fenced_blocks(std::string_view text);

// Names of the functions declared __global__ in device code.
std::vector<std::string> global_function_names(std::string_view source);

}  // namespace kopt::llm
