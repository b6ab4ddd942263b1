// What the command provider (command.cpp) reads from an agent CLI's stdout
// besides the answer: the usage and cost that `claude -p --output-format
// json` (one result object) and `codex exec --json` (JSON lines of events)
// print, so that token and cost budgets bind agent CLIs like HTTP APIs.
#pragma once

#include <string>
#include <string_view>

#include "llm/types.hpp"

namespace kopt::llm {

struct agent_cli_output {
  std::string format;   // "claude-json", "codex-jsonl"; empty: not an agent CLI's JSON
  std::string text;     // the answer
  usage tokens;         // reported = true when the CLI reported usage
  double cost_usd = 0;  // as the CLI reports it (Claude Code); 0 when it does not
  std::string stop_reason;
  std::string error;  // the CLI said the run failed
};

// Recognizes the two formats; anything else gives an empty `format` (the
// output is then taken as the plain answer).
agent_cli_output parse_agent_cli_output(std::string_view stdout_text);

}  // namespace kopt::llm
