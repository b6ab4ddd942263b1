#include "cli/app.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

// Set by run() when the command line asks for --json: errors then also
// go to stdout as a JSON object, so that a script reading stdout sees them.
bool g_json_errors = false;

const char* status_name(int code) {
  switch (code) {
    case exit_invalid:
      return "invalid_input";
    case exit_usage:
      return "usage";
    case exit_not_found:
      return "not_found";
    case exit_store:
      return "store_error";
    case exit_no_gpu:
      return "no_gpu";
    case exit_provider:
      return "provider_error";
    case exit_interrupted:
      return "interrupted";
    case exit_internal:
      return "internal_error";
    default:
      return "error";
  }
}

int fail(int code, const std::string& message) {
  std::cerr << "kopt: " << message << '\n';
  if (g_json_errors)
    std::cout << nlohmann::json{{"error",
                                 {{"status", status_name(code)},
                                  {"message", message},
                                  {"exit_code", code}}}}
                     .dump(2)
              << '\n';
  return code;
}

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of neighbours (lsit -> list is one edit).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// "Did you mean" for a command word that is not a subcommand where one is
// required (kopt lsit, kopt kb serch); empty when nothing is close.
std::string suggest_command(CLI::App& app, int argc, char** argv) {
  CLI::App* cur = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string t = argv[i];
    if (t.rfind("-", 0) == 0) {
      if (t == "--db" || t == "--busy-timeout-ms") ++i;  // their value
      continue;
    }
    CLI::App* sub = nullptr;
    for (auto* c : cur->get_subcommands({}))
      if (c->check_name(t)) sub = c;
    if (sub) {
      cur = sub;
      continue;
    }
    if (cur->get_subcommands({}).empty()) return "";
    std::string best;
    std::size_t best_d = 3;
    for (auto* c : cur->get_subcommands({})) {
      const std::size_t d = edit_distance(t, c->get_name());
      if (d < best_d || (c->get_name().rfind(t, 0) == 0 && t.size() >= 2 && best_d > 1)) {
        best_d = c->get_name().rfind(t, 0) == 0 ? 1 : d;
        best = c->get_name();
      }
    }
    std::string path;
    for (CLI::App* p = cur; p != nullptr && p->get_parent() != nullptr; p = p->get_parent())
      path = p->get_name() + " " + path;
    if (best.empty()) return "'" + t + "' is not a kopt " + (path.empty() ? "" : path) + "command";
    return "'" + t + "' is not a kopt " + (path.empty() ? "" : path) +
           "command; did you mean 'kopt " + path + best + "'?";
  }
  return "";
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
  register_agent(app, ctx, *a.status);
  register_gc(app, ctx, *a.status);
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
  // Set after the subcommands exist: CLI11 copies a parent's footer into
  // subcommands made later, and each command has its own examples.
  app.footer(footer);
  return a;
}

int run(int argc, char** argv) {
  application a = build_app();
  CLI::App& app = *a.app;
  setup_logging();
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--json") g_json_errors = true;
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
    const std::string hint = suggest_command(app, argc, argv);
    std::string msg = hint.empty() ? std::string(e.what()) : hint;
    if (g_json_errors) {
      fail(exit_usage, msg);
    } else {
      std::cerr << "kopt: " << msg << '\n';
    }
    std::cerr << "Run 'kopt --help' for usage.\n";
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
