// `kopt llm check`: the first thing a user runs after configuring a
// provider. It sends one tiny request through the same client as a campaign
// (retries, timeouts, redaction) and reports the endpoint, latency, usage and
// any configuration problem in plain words; it exits non-zero on failure.
// The lead's main() calls register_llm_cli; `recorder`, when given, returns
// where to record the check's call (the store), or null for nowhere.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "llm/recorder.hpp"

namespace kopt::llm {

// Exit codes of `kopt llm check`, those of every kopt command
// (agent/cli/exit_codes.hpp, docs/cli.md): 0 the provider answered; 6 the
// call failed (provider error); 1 the configuration is invalid (missing
// key, bad field).
inline constexpr int check_exit_ok = 0;
inline constexpr int check_exit_call_failed = 6;
inline constexpr int check_exit_config = 1;

// Adds the `llm` subcommand group with `check`. The callback throws
// CLI::RuntimeError(code) for a non-zero exit, which CLI11's app.exit() maps.
void register_llm_cli(CLI::App& app, std::function<call_recorder*()> recorder = {});

}  // namespace kopt::llm
