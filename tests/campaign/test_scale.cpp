// Issue #26: a resumed campaign step reads a bounded amount of state,
// whatever the campaign's history. The same step (resume, one iteration) is
// run after 10 and after 1000 stored iterations with SQLite's trace hook
// counting the statements the loop runs and the rows they return; before
// schema v5, load() read every event and every candidate of the campaign,
// so both grew with the history.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <sstream>

#include "common/error.hpp"
#include "report/data.hpp"
#include "report/exchange.hpp"
#include "report/html.hpp"
#include "report/trace.hpp"
#include "report/views.hpp"
#include "store/retention.hpp"
#include "support.hpp"

namespace kopt::campaign {
namespace {

using json = nlohmann::json;

struct trace_counts {
  std::int64_t statements = 0;
  std::int64_t rows = 0;
};

int on_trace(unsigned type, void* ctx, void*, void*) {
  auto* c = static_cast<trace_counts*>(ctx);
  if (type == SQLITE_TRACE_STMT) ++c->statements;
  if (type == SQLITE_TRACE_ROW) ++c->rows;
  return 0;
}

// One new candidate per iteration, always slower than its parent: it is
// screened and dropped, so every iteration stores a candidate, an
// iteration row, evaluations, a proposals, an evaluated and a loop_state
// event.
scripted_source::script one_slow_candidate() {
  return [](const prompt_context& ctx) {
    source_answer a;
    json c = test::kernel("cand", "// speed 1.5 it" + std::to_string(ctx.iteration));
    a.proposals.push_back({c, store::candidate_origin::llm, "scripted"});
    return a;
  };
}

trace_counts resumed_step(std::int64_t history) {
  // No target and no stagnation limit reachable: the campaign runs on.
  test::fixture f(test::operator_json(), {{"candidates_per_iteration", 1},
                                          {"target_sol_fraction", 0.0},
                                          {"loop", {{"max_llm_errors", 1000000}}}});
  fake_evaluator ev(test::default_model(), 0.01);
  scripted_source src(one_slow_candidate());
  {
    campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
    run_limits lim;
    lim.max_iterations = history;
    const auto r = loop.run(lim);
    EXPECT_FALSE(r.finished) << r.stop_reason;
    EXPECT_EQ(loop.state().completed, history);
  }
  trace_counts c;
  sqlite3_trace_v2(f.db.db().handle(), SQLITE_TRACE_STMT | SQLITE_TRACE_ROW, on_trace, &c);
  {
    campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
    run_limits lim;
    lim.max_iterations = 1;
    loop.run(lim);
    EXPECT_EQ(loop.state().completed, history + 1);
  }
  sqlite3_trace_v2(f.db.db().handle(), 0, nullptr, nullptr);
  return c;
}

TEST(Scale, ResumedStepReadsTheSameWhateverTheHistory) {
  const auto small = resumed_step(10);
  const auto large = resumed_step(1000);
  std::cout << "resumed step after 10 iterations: " << small.statements << " statements, "
            << small.rows << " rows; after 1000: " << large.statements << " statements, "
            << large.rows << " rows\n";
  // Bounded: the same step costs the same, within a few statements (the
  // escalation level, hence which parent and which cached results, may
  // differ between the two histories).
  EXPECT_LE(large.statements, small.statements + 10);
  EXPECT_LE(large.rows, small.rows + 10);
  EXPECT_LT(large.statements, 200);
  EXPECT_LT(large.rows, 200);
}

// Everything the research commands show, as text.
std::map<std::string, std::string> figures(store::store& db, store::row_id id) {
  const auto d = report::load_campaign(db, id);
  std::map<std::string, std::string> out;
  out["log"] = report::log_json(d).dump();
  out["lineage"] = report::lineage_json(d).dump();
  out["trace"] = report::chrome_trace(d).dump();
  out["html"] = report::html_report(d);
  std::ostringstream csv, jsonl;
  report::write_csv(d, csv);
  report::write_jsonl(d, jsonl, false);
  out["csv"] = csv.str();
  out["jsonl"] = jsonl.str();
  for (const auto& c : db.candidates_of(id))
    out["candidate " + std::to_string(c.id)] = report::candidate_research_json(db, c).dump();
  return out;
}

std::int64_t count(store::store& db, const std::string& sql) {
  auto st = db.db().prepare(sql);
  st.step();
  return st.get_int(0);
}

TEST(Scale, GcKeepsEveryFigureAndDropsWhatAFinishedCampaignNoLongerNeeds) {
  test::fixture f;
  fake_evaluator ev(test::default_model(), 0.01);
  autotune_source src;
  run_result first;
  {
    campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
    first = loop.run();
  }
  ASSERT_TRUE(first.finished);
  const auto before = figures(f.db, f.campaign_id);
  const auto best = *f.db.find_campaign(f.campaign_id)->best_candidate_id;
  const std::string others_with_samples =
      "SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
      "WHERE c.campaign_id = 1 AND c.id <> " +
      std::to_string(best) + " AND json_type(e.timing_json, '$.samples_ns') IS NOT NULL";
  ASSERT_GT(count(f.db, others_with_samples), 0);
  const auto journal = count(f.db, "SELECT count(*) FROM eval_journal");
  ASSERT_GT(journal, 0);

  store::gc_options dry;
  dry.dry_run = true;
  const auto would = store::collect_garbage(f.db, dry);
  ASSERT_EQ(would.campaigns.size(), 1u);
  EXPECT_GT(would.total.sample_rows, 0);
  EXPECT_GT(would.total.checkpoints, 0);
  EXPECT_GT(would.total.debug_events, 0);
  EXPECT_GT(would.total.bytes, 0);
  EXPECT_EQ(count(f.db, "SELECT count(*) FROM eval_journal"), journal) << "a dry run changed rows";

  const auto bytes_before = count(f.db, "SELECT sum(length(data_json)) FROM events") +
                            count(f.db, "SELECT sum(length(timing_json)) FROM evaluations");
  const auto done = store::collect_garbage(f.db, {});
  ASSERT_EQ(done.campaigns.size(), 1u);
  EXPECT_EQ(done.total.sample_rows, would.total.sample_rows);
  EXPECT_EQ(done.total.checkpoints, would.total.checkpoints);
  EXPECT_EQ(done.total.debug_events, would.total.debug_events);
  const auto bytes_after = count(f.db, "SELECT sum(length(data_json)) FROM events") +
                           count(f.db, "SELECT sum(length(timing_json)) FROM evaluations");
  EXPECT_EQ(bytes_before - bytes_after, done.total.bytes);
  EXPECT_EQ(count(f.db, others_with_samples), 0);
  EXPECT_EQ(count(f.db, "SELECT count(*) FROM eval_journal"), 0);
  EXPECT_GT(
      count(f.db, "SELECT count(*) FROM evaluations WHERE candidate_id = " + std::to_string(best) +
                      " AND json_type(timing_json, '$.samples_ns') IS NOT NULL"),
      0)
      << "the winner keeps its samples";
  // Collected once: a second run finds nothing new.
  EXPECT_TRUE(store::collect_garbage(f.db, {}).campaigns.empty());

  const auto after = figures(f.db, f.campaign_id);
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [name, text] : before) EXPECT_EQ(after.at(name), text) << name << " changed";

  // The finished campaign still opens as finished.
  campaign_loop again(f.db, f.campaign_id, f.op, src, ev, f.settings());
  const auto r = again.run();
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.best_id, first.best_id);
  EXPECT_EQ(r.verified, first.verified);

  // The archive is a store of its own with the same rows.
  store::archive(f.db, f.dir / "archive.db");
  auto copy = store::store::open(f.dir / "archive.db", {.read_only = true});
  EXPECT_EQ(count(copy, "SELECT count(*) FROM evaluations"),
            count(f.db, "SELECT count(*) FROM evaluations"));
  EXPECT_THROW(store::archive(f.db, f.dir / "archive.db"), kopt::store_error);
  // A running campaign is not collected.
  store::gc_options one;
  one.campaign = 999;
  EXPECT_THROW(store::collect_garbage(f.db, one), kopt::not_found_error);
}

}  // namespace
}  // namespace kopt::campaign
