// `kopt daemon --config FILE`: the long-running service (agent/daemon,
// docs/daemon.md), in the foreground as systemd runs it; and the queue
// controls `kopt pause|resume|cancel CAMPAIGN`, which work with or without a
// daemon running: a campaign no daemon step is running changes state at
// once, a running one gets a request the daemon applies at its next
// checkpoint.
#include "daemon/daemon.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/render.hpp"
#include "common/data_paths.hpp"
#include "common/error.hpp"
#include "daemon/config.hpp"
#include "daemon/queue.hpp"

namespace kopt::cli {

namespace {

struct daemon_opts {
  std::string config;
  bool check = false;
};

struct control_opts {
  std::int64_t id = 0;
  bool json = false;
};

void add_control(CLI::App& app, context& ctx, const char* name, const char* help,
                 const char* footer, daemon::control_result (*fn)(store::store&, store::row_id)) {
  auto o = std::make_shared<control_opts>();
  auto* cmd = app.add_subcommand(name, help);
  cmd->add_option("campaign", o->id, "campaign id (see kopt list)")
      ->required()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "print the result as JSON on stdout");
  cmd->footer(footer);
  cmd->callback([o, &ctx, fn] {
    store::store db = ctx.open_writer();
    const auto r = fn(db, o->id);
    if (o->json)
      print_json(r.to_json());
    else
      std::cout << r.message << '\n';
  });
}

}  // namespace

void register_daemon(CLI::App& app, context& ctx, exit_status& status) {
  auto o = std::make_shared<daemon_opts>();
  auto* cmd = app.add_subcommand(
      "daemon", "run the kopt service in the foreground (queue, spool, GPU workers, HTTP)");
  cmd->add_option("--config", o->config,
                  "daemon config (JSON; docs/daemon.md, configs/daemon.example.json)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_flag("--check", o->check,
                "validate the config, print it with defaults filled in, and exit");
  cmd->footer(R"(Runs until SIGTERM or SIGINT (finishes or checkpoints the current steps, exits 0).
SIGHUP reloads limits, providers and log settings from the same file.
Under systemd use Type=notify (the packaged kopt-daemon.service): READY=1 after the
store is migrated and a worker answered; watchdog pings from the scheduling loop.
The database is <state_dir>/kopt.db (the config's "database"); --db is not used.
Point the other commands at it: export KOPT_DB=<state_dir>/kopt.db.
Examples:
  kopt daemon --config /etc/kopt/daemon.json
  kopt daemon --config configs/daemon.example.json --check
Exit codes: 0 stopped cleanly, 1 invalid config or cannot start (lock held, port taken), 4 store error.)");
  cmd->callback([o, &ctx, &status] {
    auto cfg = daemon::load_config(o->config);
    if (!ctx.db_flag.empty())
      std::cerr << "kopt: --db is ignored by kopt daemon (the config's database is used)\n";
    for (const auto& w : daemon::config_warnings(cfg)) std::cerr << "kopt: WARNING: " << w << '\n';
    if (o->check) {
      // The data the daemon's campaigns will read, as common/data_paths
      // finds it for this binary (kopt doctor explains each choice).
      nlohmann::json j = cfg.to_json();
      const std::string peaks = data::peaks_file(cfg.worker.peaks_file);
      const auto prompts = data::find_dir(data::kind::prompts);
      const auto kb = data::find_dir(data::kind::techniques);
      j["data"] = {{"peaks_file", peaks.empty() ? nlohmann::json(nullptr) : nlohmann::json(peaks)},
                   {"prompts", prompts.empty() ? nlohmann::json(nullptr) : nlohmann::json(prompts.string())},
                   {"knowledge_base", kb.empty() ? nlohmann::json(nullptr) : nlohmann::json(kb.string())}};
      print_json(j);
      if (peaks.empty() || prompts.empty() || kb.empty())
        std::cerr << "kopt: warning: the daemon's data is incomplete (see \"data\"; kopt doctor says why)\n";
      return;
    }
    daemon::service svc(std::move(cfg));
    status.code = svc.run();
  });

  add_control(app, ctx, "pause", "pause a campaign (a running one at its next checkpoint)",
              "A queued campaign is paused at once; a running one gets a request the daemon "
              "applies at its\n"
              "next checkpoint (work in flight is redone on resume). Exit 1 for a finished "
              "campaign, 3 unknown id.\n"
              "Example: kopt pause 12",
              &daemon::pause_campaign);
  add_control(
      app, ctx, "resume", "resume a paused campaign (also one the daemon paused after failures)",
      "The campaign becomes runnable again (queued if it never started), with its failure count "
      "and\n"
      "backoff cleared; a pending pause request is withdrawn. Exit 1 for a finished campaign.\n"
      "Example: kopt resume 12",
      &daemon::resume_campaign);
  add_control(
      app, ctx, "cancel", "cancel a campaign for good (a running one at its next checkpoint)",
      "Queued and paused campaigns are cancelled at once; a running one at its next checkpoint.\n"
      "Cancelled is final: results so far stay in the store. Exit 1 for a done or failed "
      "campaign.\n"
      "Example: kopt cancel 12",
      &daemon::cancel_campaign);
}

}  // namespace kopt::cli
