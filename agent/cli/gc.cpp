// `kopt gc`: retention for finished campaigns (store/retention.hpp). It
// drops what a campaign that will not run again no longer needs (per-sample
// arrays of candidates other than the winner, old checkpoints, the bulky
// part of debug events, the resume index) and keeps every figure a report
// shows. --archive FILE first writes a compact copy of the whole store
// (VACUUM INTO), so that nothing is lost for good. Safe beside a running
// daemon: one short write transaction per campaign.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/render.hpp"
#include "common/error.hpp"
#include "store/retention.hpp"

namespace kopt::cli {

namespace {

struct gc_cli_options {
  double older_than_days = 0;
  std::int64_t campaign = 0;
  std::string archive;
  bool dry_run = false;
  bool again = false;
  bool json = false;
};

}  // namespace

void register_gc(CLI::App& app, context& ctx, exit_status&) {
  auto o = std::make_shared<gc_cli_options>();
  CLI::App* cmd = app.add_subcommand(
      "gc", "Drop what finished campaigns no longer need (keeps every figure a report shows)");
  cmd->add_option("--older-than", o->older_than_days,
                  "only campaigns finished at least this many days ago (default 0: all finished)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--campaign", o->campaign, "only this campaign (it must be finished)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--archive", o->archive,
                  "first write a compact copy of the whole store to FILE (VACUUM INTO; FILE must "
                  "not exist)");
  cmd->add_flag("--dry-run", o->dry_run, "count what would be dropped, change nothing");
  cmd->add_flag("--again", o->again, "also campaigns collected before");
  cmd->add_flag("--json", o->json, "print the report as JSON on stdout");
  cmd->footer(
      "Per finished (done, failed, cancelled) campaign: drops timing_json.samples_ns of every\n"
      "candidate but the winner, cuts every loop_state checkpoint but the last to the incumbent\n"
      "it records (no elites, history, gains), removes subjects' results and worker events from "
      "\"evaluated\" events, and\n"
      "deletes the campaign's eval_journal rows. Medians, quartiles, sample counts, the trace\n"
      "and the report stay as they were. Freed pages are reused; VACUUM (or --archive) compacts.\n"
      "The daemon can do the same periodically (limits.gc_interval_s, docs/daemon.md).\n"
      "Exit codes: 0 done, 3 no such campaign or not finished, 4 store error.\n"
      "Examples:\n  kopt gc --dry-run\n  kopt gc --older-than 7 --archive /backup/kopt-2026-12.db\n"
      "  kopt gc --campaign 12 --json");
  cmd->callback([o, &ctx] {
    store::store s = ctx.open_writer();
    if (!o->archive.empty() && !o->dry_run) {
      store::archive(s, o->archive);
      std::cerr << "kopt: archived " << s.path() << " to " << o->archive << '\n';
    }
    store::gc_options g;
    g.min_age_ms = static_cast<std::int64_t>(o->older_than_days * 86400.0 * 1000.0);
    if (o->campaign > 0) g.campaign = o->campaign;
    g.dry_run = o->dry_run;
    g.again = o->again;
    const auto rep = store::collect_garbage(s, g);
    if (o->json) {
      auto j = rep.to_json();
      j["archive"] =
          o->archive.empty() || o->dry_run ? nlohmann::json(nullptr) : nlohmann::json(o->archive);
      print_json(j);
      return;
    }
    const auto& t = rep.total;
    std::cout << (rep.dry_run ? "would collect " : "collected ") << rep.campaigns.size()
              << " finished campaign(s): " << t.sample_rows << " evaluation row(s) lose their "
              << "samples, " << t.checkpoints << " old checkpoint(s) cut, " << t.debug_events
              << " debug event(s) slimmed, " << t.journal_rows << " journal row(s) removed; "
              << fmt_double(static_cast<double>(t.bytes) / (1 << 20), 1) << " MiB of JSON"
              << (rep.dry_run ? "" : " freed") << ".\n";
    if (!rep.dry_run)
      std::cout << "store: " << fmt_double(static_cast<double>(rep.file_bytes) / (1 << 20), 1)
                << " MiB, of which "
                << fmt_double(static_cast<double>(rep.free_bytes) / (1 << 20), 1)
                << " MiB free pages (reused by later writes; `sqlite3 DB VACUUM` returns them).\n";
  });
}

}  // namespace kopt::cli
