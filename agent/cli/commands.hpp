// Command groups of the `kopt` executable. Each group adds its subcommands
// to the top-level CLI::App and keeps its options in state owned by the
// callbacks. A callback runs after parsing, reads the shared context (global
// options), writes data to stdout and messages to stderr, and either returns
// normally (exit 0), sets ctx_exit (another documented code, see
// exit_codes.hpp), or throws: kopt::config_error -> 1, kopt::not_found_error
// -> 3, kopt::store_error -> 4, other kopt::error -> 1, CLI::RuntimeError(n)
// -> n. run() in app.cpp does that mapping.
//
// To add a group (llm, kb, eval, run, daemon): write
// `void register_<group>(CLI::App& app, context& ctx)` in its own file (in its
// subsystem's library or here), declare it, and call it from build_app() in
// app.cpp; nothing else changes. Prefer `--json` on every read command and
// the exit codes of exit_codes.hpp.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/context.hpp"

namespace kopt::cli {

// Set by a callback for a non-zero exit that is not an error (validate
// finding an invalid file); run() returns it.
struct exit_status {
  int code = 0;
};

void register_validate(CLI::App& app, context& ctx, exit_status& status);  // validate
void register_submit(CLI::App& app, context& ctx, exit_status& status);    // submit
void register_inspect(CLI::App& app, context& ctx, exit_status& status);   // list status show log
void register_research(CLI::App& app, context& ctx,
                       exit_status& status);  // diff lineage export import report trace
void register_kb(CLI::App& app, context& ctx, exit_status& status);  // kb search show lint
void register_prompt(CLI::App& app, context& ctx, exit_status& status);  // prompt render
void register_daemon(CLI::App& app, context& ctx, exit_status& status);  // daemon pause resume cancel
void register_doctor(CLI::App& app, context& ctx, exit_status& status);  // doctor
void register_sbatch_worker(CLI::App& app, context& ctx, exit_status& status);  // sbatch-worker (Slurm)
void register_run(CLI::App& app, context& ctx, exit_status& status);  // run (needs the worker build)
void register_profile(CLI::App& app, context& ctx, exit_status& status);  // profile (worker build)
void register_eval(CLI::App& app, context& ctx,
                   exit_status& status);  // eval (needs the worker build)
void register_bench(CLI::App& app, context& ctx,
                    exit_status& status);  // bench (needs the worker build)
void register_agent(CLI::App& app, context& ctx, exit_status& status);  // mcp propose (mcp.cpp)
void register_gc(CLI::App& app, context& ctx, exit_status& status);     // gc (retention)

}  // namespace kopt::cli
