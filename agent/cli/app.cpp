#include "cli/app.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/exit_codes.hpp"
#include "common/error.hpp"
#include "llm/llm_cli.hpp"

#ifndef KOPT_VERSION
#define KOPT_VERSION "unknown"
#endif

namespace kopt::cli {

namespace {

constexpr const char* footer = R"(Examples:
  kopt validate configs/examples/*.json
  kopt submit configs/examples/rmsnorm.json --priority 5 --team inference
  kopt list --state running
  kopt status 3 --json
  kopt show campaign 3
  kopt show candidate 42
  kopt log 3
  kopt doctor            (what this kopt found, and what is wrong)

Database: --db PATH, else $KOPT_DB, else $XDG_STATE_HOME/kopt/kopt.db,
else ~/.local/state/kopt/kopt.db.
Exit codes: 0 ok, 1 invalid input, 2 usage, 3 not found, 4 store error,
5 needs a GPU / no worker, 6 provider error, 7 interrupted, 10 internal error.
See docs/cli.md.)";

void setup_logging() {
  // Logs go to stderr so that stdout carries only data (`--json` output).
  // Warnings and errors by default; -v raises the level while parsing.
  if (spdlog::get("kopt") == nullptr) {
    auto logger = spdlog::stderr_color_mt("kopt");
    logger->set_pattern("kopt: %^%l%$: %v");
    spdlog::set_default_logger(logger);
  }
  spdlog::set_level(spdlog::level::warn);
}

int fail(int code, const std::string& message) {
  std::cerr << "kopt: " << message << '\n';
  return code;
}

}  // namespace

application build_app() {
  application a;
  a.app = std::make_unique<CLI::App>("kopt: profile-guided GPU kernel optimization (control plane)",
                                     "kopt");
  a.ctx = std::make_unique<context>();
  a.status = std::make_unique<exit_status>();
  CLI::App& app = *a.app;
  context& ctx = *a.ctx;

  app.set_version_flag("--version", std::string("kopt ") + KOPT_VERSION);
  app.footer(footer);
  app.require_subcommand(1);
  // Global options are accepted after the subcommand too (kopt list --db x).
  app.fallthrough();
  app.add_option("--db", ctx.db_flag, "SQLite database (default: $KOPT_DB, then XDG state dir)")
      ->type_name("PATH");
  app.add_option("--busy-timeout-ms", ctx.busy_timeout_ms,
                 "how long to wait for another process's write lock")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag_function(
      "-v,--verbose",
      [&ctx](std::int64_t count) {
        ctx.verbosity = static_cast<int>(count);
        spdlog::set_level(count >= 2 ? spdlog::level::debug : spdlog::level::info);
      },
      "log more to stderr (-vv: debug)");

  register_validate(app, ctx, *a.status);
  register_submit(app, ctx, *a.status);
  register_inspect(app, ctx, *a.status);
  register_research(app, ctx, *a.status);
  register_prompt(app, ctx, *a.status);
  register_kb(app, ctx, *a.status);
  register_daemon(app, ctx, *a.status);
  register_doctor(app, ctx, *a.status);
  register_sbatch_worker(app, ctx, *a.status);
#ifdef KOPT_HAVE_WORKER
  register_eval(app, ctx, *a.status);
  register_bench(app, ctx, *a.status);
  register_run(app, ctx, *a.status);
  register_profile(app, ctx, *a.status);
#endif
  // `kopt llm check` talks to the provider only; it records nothing.
  kopt::llm::register_llm_cli(app);
  return a;
}

int run(int argc, char** argv) {
  application a = build_app();
  CLI::App& app = *a.app;
  setup_logging();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {
    // A command group's chosen exit code (e.g. `kopt llm check`).
    if (std::string(e.what()) != "Runtime error") std::cerr << "kopt: " << e.what() << '\n';
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    std::cerr << "kopt: " << e.what() << "\nRun 'kopt --help' for usage.\n";
    return exit_usage;
  } catch (const kopt::not_found_error& e) {
    return fail(exit_not_found, e.what());
  } catch (const kopt::store_error& e) {
    return fail(exit_store, e.what());
  } catch (const kopt::config_error& e) {
    return fail(exit_invalid, e.what());
  } catch (const kopt::error& e) {
    return fail(exit_invalid, e.what());
  } catch (const std::exception& e) {
    return fail(exit_internal, std::string("internal error: ") + e.what());
  }
  return a.status->code;
}

}  // namespace kopt::cli
