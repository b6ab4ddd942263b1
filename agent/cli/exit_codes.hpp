// Exit codes of every `kopt` command, documented in docs/cli.md. Scripts and
// CI depend on these numbers: add new codes, never renumber.
#pragma once

namespace kopt::cli {

inline constexpr int exit_ok = 0;           // success (validate: every file valid)
inline constexpr int exit_invalid = 1;      // invalid input: a config failed validation
inline constexpr int exit_usage = 2;        // bad command line (unknown option, missing argument)
inline constexpr int exit_not_found = 3;    // a campaign / candidate / database that does not exist
inline constexpr int exit_store = 4;        // the database could not be opened, read or written
inline constexpr int exit_no_gpu = 5;       // needs a GPU, or no worker is available
inline constexpr int exit_provider = 6;     // the LLM provider failed (network, HTTP, quota)
inline constexpr int exit_interrupted = 7;  // stopped by a signal before finishing
inline constexpr int exit_internal = 10;    // a bug: an unexpected exception

}  // namespace kopt::cli
