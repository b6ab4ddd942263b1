// `kopt submit FILE`: validate an operator config, keep its snapshot and
// workloads in the store (deduplicated by content hash) and queue a
// campaign for the daemon.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "campaign/submission.hpp"
#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/render.hpp"
#include "common/error.hpp"
#include "config/operator.hpp"

namespace kopt::cli {

namespace {

struct submit_options {
  std::string file;
  std::int64_t priority = 0;
  std::string team;
  bool json = false;
};

}  // namespace

void register_submit(CLI::App& app, context& ctx, exit_status& /*status*/) {
  auto opts = std::make_shared<submit_options>();
  CLI::App* cmd = app.add_subcommand(
      "submit", "Validate an operator config and queue an optimization campaign for it");
  cmd->add_option("file", opts->file, "operator config file (JSON)")->required();
  cmd->add_option("--priority", opts->priority, "higher runs first")->capture_default_str();
  cmd->add_option("--team", opts->team, "team that owns the campaign (for list filters)");
  cmd->add_flag("--json", opts->json, "print the result as JSON on stdout");
  cmd->footer(
      "Prints the new campaign's id on stdout. Exit 1 when the config is invalid.\n"
      "Example: kopt submit configs/examples/rmsnorm.json --priority 5 --team inference");
  cmd->callback([opts, &ctx] {
    config::load_result r = config::load_operator_file(opts->file);
    for (const auto& d : r.diagnostics) std::cerr << d.to_string() << '\n';
    if (!r.ok()) {
      throw kopt::config_error(opts->file + " is not a valid operator config; nothing submitted");
    }
    const config::operator_config& op = *r.op;

    store::campaign_record c;
    c.provider = op.campaign.provider;
    c.model = op.campaign.model;
    c.settings = campaign::campaign_settings_json(op.campaign);
    c.budget = {op.campaign.limits.iterations, op.campaign.limits.wall_time_s,
                op.campaign.limits.tokens, op.campaign.limits.cost_usd};
    c.priority = opts->priority;
    c.team = opts->team;

    store::store s = ctx.open_writer();
    store::transaction tx(s.db());
    const auto put = store_operator(s, op);
    c.operator_id = put.operator_id;
    const store::row_id id = s.create_campaign(c);
    store::event_record ev;
    ev.campaign_id = id;
    ev.kind = "submitted";
    ev.message = "queued from " + op.file.string();
    ev.data = {{"operator_id", put.operator_id},
               {"new_operator", put.created},
               {"content_hash", op.content_hash()},
               {"priority", opts->priority},
               {"team", opts->team}};
    s.add_event(ev);
    tx.commit();
    spdlog::info("queued campaign {} for operator {} (operator row {}, {})", id, op.name,
                 put.operator_id, put.created ? "new" : "already stored");

    if (opts->json) {
      print_json({{"campaign_id", id},
                  {"operator_id", put.operator_id},
                  {"operator", op.name},
                  {"new_operator", put.created},
                  {"content_hash", op.content_hash()},
                  {"state", "queued"},
                  {"priority", opts->priority},
                  {"team", opts->team},
                  {"database", s.path()}});
    } else {
      std::cout << id << '\n';
      std::cerr << "kopt: queued campaign " << id << " for operator " << op.name << " ("
                << op.workloads.size() << " workloads, provider " << c.provider << ") in "
                << s.path() << '\n';
    }
  });
}

}  // namespace kopt::cli
