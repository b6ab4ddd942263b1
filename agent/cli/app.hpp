// The `kopt` command line as a library: build_app() assembles every command
// group onto one CLI::App, run() parses, executes and maps errors to the
// exit codes of exit_codes.hpp. main.cpp only calls run(); tests and later
// subsystems can build the same app.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.hpp"
#include "cli/context.hpp"

namespace kopt::cli {

struct application {
  std::unique_ptr<CLI::App> app;
  std::unique_ptr<context> ctx;
  std::unique_ptr<exit_status> status;
};

application build_app();
int run(int argc, char** argv);

}  // namespace kopt::cli
