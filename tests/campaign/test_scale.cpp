// Issue #26: a resumed campaign step reads a bounded amount of state,
// whatever the campaign's history. The same step (resume, one iteration)
// runs after 10 real iterations, and after the same 10 plus the stored
// history of 990 more (iterations, candidates with their evaluations,
// "evaluated", "proposals" and "loop_state" events and journal rows, copied
// in by SQL so the test takes seconds), with SQLite's trace hook counting
// the read statements of the step and the rows they return. Before schema
// v5, load() read every event and every candidate of the campaign, so the
// rows grew with the history.
//
// The checkpoint itself is bounded too: it keeps the last history_window
// iteration notes (the rest are in the iterations table) and no per-iteration
// gains (the "promoted" events hold them), so its size and each
// iteration's dropout decisions are the same after 10 or 1000 iterations.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>
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
  std::int64_t reads = 0;   // read-only statements run
  std::int64_t writes = 0;  // the others (inserts, updates, transactions)
  std::int64_t rows = 0;    // rows returned
};

int on_trace(unsigned type, void* ctx, void* p, void*) {
  auto* c = static_cast<trace_counts*>(ctx);
  if (type == SQLITE_TRACE_STMT) {
    auto* stmt = static_cast<sqlite3_stmt*>(p);
    const char* sql = sqlite3_sql(stmt);
    // Trigger bodies are traced as "-- TRIGGER name": part of a write.
    if (sql != nullptr && std::string_view(sql).rfind("--", 0) == 0) return 0;
    if (sqlite3_stmt_readonly(stmt) != 0 && sqlite3_stmt_isexplain(stmt) == 0 &&
        std::string_view(sql ? sql : "").rfind("BEGIN", 0) != 0 &&
        std::string_view(sql ? sql : "").rfind("COMMIT", 0) != 0 &&
        std::string_view(sql ? sql : "").rfind("SAVEPOINT", 0) != 0 &&
        std::string_view(sql ? sql : "").rfind("RELEASE", 0) != 0)
      ++c->reads;
    else
      ++c->writes;
  }
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

// 990 more iterations' worth of stored history for campaign `id`, then the
// real latest checkpoint again so that it stays the latest.
void add_history(store::store& db, store::row_id id) {
  const std::string cid = std::to_string(id);
  db.db().exec(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 990) "
      "INSERT INTO iterations(campaign_id, number, strategy, status, started_at) "
      "SELECT " +
      cid +
      ", 100000 + i, 'improve', 'done', 0 FROM n;"
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 990) "
      "INSERT INTO candidates(campaign_id, origin, source, source_hash, launch_plan_json, "
      "content_key, created_at) SELECT " +
      cid +
      ", 'llm', 'source ' || i, 'h' || i, '{}', "
      "'synthetic ' || i, 0 FROM n;"
      "INSERT INTO evaluations(candidate_id, workload_id, status, median_ns, created_at) "
      "SELECT c.id, w.id, 'ok', 1000, 0 FROM candidates c, workloads w "
      "WHERE c.content_key LIKE 'synthetic %';"
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 99) "
      "INSERT INTO events(campaign_id, kind, level, message, data_json, created_at) "
      "SELECT e.campaign_id, e.kind, e.level, e.message, e.data_json, e.created_at "
      "FROM n, events e WHERE e.campaign_id = " +
      cid +
      " AND e.kind IN "
      "('evaluated', 'proposals', 'loop_state') ORDER BY n.i, e.id;"
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) "
      "INSERT INTO eval_journal(campaign_id, cache_key, event_id, subject) "
      "SELECT " +
      cid + ", 'synthetic ' || i, (SELECT max(id) FROM events), 0 FROM n;");
  auto st = db.db().prepare(
      "SELECT data_json FROM events WHERE campaign_id = ? AND kind = 'loop_state' ORDER BY id "
      "LIMIT 1 OFFSET (SELECT count(*) / 100 - 1 FROM events WHERE campaign_id = ? AND kind = "
      "'loop_state')");
  st.bind(1, id);
  st.bind(2, id);
  ASSERT_TRUE(st.step());
  store::event_record e;
  e.campaign_id = id;
  e.kind = "loop_state";
  e.level = "debug";
  e.message = "the real checkpoint, again the latest";
  e.data = st.get_json(0);
  db.add_event(e);
}

trace_counts resumed_step(bool long_history) {
  // No target and no stagnation limit reachable: the campaign runs on.
  test::fixture f(test::operator_json(), {{"candidates_per_iteration", 1},
                                          {"target_sol_fraction", 0.0},
                                          {"loop", {{"max_llm_errors", 1000000}}}});
  fake_evaluator ev(test::default_model(), 0.01);
  scripted_source src(one_slow_candidate());
  {
    campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
    run_limits lim;
    lim.max_iterations = 10;
    const auto r = loop.run(lim);
    EXPECT_FALSE(r.finished) << r.stop_reason;
    EXPECT_EQ(loop.state().completed, 10);
  }
  if (long_history) {
    add_history(f.db, f.campaign_id);
    EXPECT_GT(f.db.events_of(f.campaign_id).size(), 3000u);
  }
  trace_counts c;
  sqlite3_trace_v2(f.db.db().handle(), SQLITE_TRACE_STMT | SQLITE_TRACE_ROW, on_trace, &c);
  {
    campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
    run_limits lim;
    lim.max_iterations = 1;
    loop.run(lim);
    EXPECT_EQ(loop.state().completed, 11);
  }
  sqlite3_trace_v2(f.db.db().handle(), 0, nullptr, nullptr);
  return c;
}

TEST(Scale, ResumedStepReadsTheSameWhateverTheHistory) {
  const auto small = resumed_step(false);
  const auto large = resumed_step(true);
  std::cout << "resumed step after 10 iterations: " << small.reads << " reads returning "
            << small.rows << " rows, " << small.writes << " writes; with 1000 iterations of "
            << "history: " << large.reads << " reads returning " << large.rows << " rows, "
            << large.writes << " writes\n";
  // The same step reads the same, whatever is stored before it.
  EXPECT_EQ(large.reads, small.reads);
  EXPECT_EQ(large.rows, small.rows);
  EXPECT_EQ(large.writes, small.writes);
  EXPECT_LT(large.reads, 100);
  EXPECT_LT(large.rows, 100);
}

std::int64_t latest_checkpoint_bytes(store::store& db, store::row_id id) {
  auto st = db.db().prepare(
      "SELECT length(data_json) FROM events WHERE campaign_id = ? AND kind = 'loop_state' "
      "ORDER BY id DESC LIMIT 1");
  st.bind(1, id);
  EXPECT_TRUE(st.step());
  return st.get_int(0);
}

std::int64_t decisions_of_iteration(store::store& db, store::row_id id, std::int64_t n) {
  auto st = db.db().prepare(
      "SELECT count(*) FROM dropout_decisions d JOIN iterations i ON i.id = d.iteration_id "
      "WHERE i.campaign_id = ? AND i.number = ?");
  st.bind(1, id);
  st.bind(2, n);
  EXPECT_TRUE(st.step());
  return st.get_int(0);
}

TEST(Scale, CheckpointIsTheSameSizeAfter10And1000Iterations) {
  test::fixture f(test::operator_json(), {{"candidates_per_iteration", 1},
                                          {"target_sol_fraction", 0.0},
                                          {"loop", {{"max_llm_errors", 1000000}}}});
  fake_evaluator ev(test::default_model(), 0.01);
  scripted_source src(one_slow_candidate());
  auto settings = f.settings();
  // A window that 10 iterations already fill, so that both checkpoints hold
  // a full window (the default, 24, is full from iteration 24 on).
  settings.history_window = 8;
  std::int64_t done = 0;
  auto run_to = [&](std::int64_t n) {
    campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, settings);
    run_limits lim;
    lim.max_iterations = n - done;
    done = n;
    const auto r = loop.run(lim);
    EXPECT_FALSE(r.finished) << r.stop_reason;
    EXPECT_EQ(loop.state().completed, n);
    const auto& h = loop.state().history;
    EXPECT_EQ(std::count_if(h.begin(), h.end(), [](const prompt_item& i) { return i.optional; }),
              8);
    return loop.state();
  };
  run_to(10);
  const auto at10 = latest_checkpoint_bytes(f.db, f.campaign_id);
  const auto decisions10 = decisions_of_iteration(f.db, f.campaign_id, 10);
  const auto state = run_to(1000);
  const auto at1000 = latest_checkpoint_bytes(f.db, f.campaign_id);
  const auto decisions1000 = decisions_of_iteration(f.db, f.campaign_id, 1000);
  std::cout << "checkpoint after 10 iterations: " << at10 << " bytes, " << decisions10
            << " dropout decisions in iteration 10; after 1000: " << at1000 << " bytes, "
            << decisions1000 << " in iteration 1000\n";
  // The same up to the digits of the iteration numbers and the strategy
  // names in the notes (without the window it would hold 990 more notes).
  EXPECT_LE(std::abs(at1000 - at10), at10 / 10);
  // One decision per offered optional item: the directives and the notes
  // not masked, never more than the window (the masks differ: iteration
  // 10 is in a partial restart).
  const auto most = static_cast<std::int64_t>(settings.directives.size() + 8);
  EXPECT_LE(decisions10, most);
  EXPECT_LE(decisions1000, most);
  // The oldest notes left the state, not the store: the iterations table
  // keeps every one.
  EXPECT_EQ(state.history.back().id, "history:iter1000");
  EXPECT_EQ(f.db.iterations_of(f.campaign_id).size(), 1001u);
  for (const auto& m : state.masked)
    EXPECT_TRUE(std::any_of(state.history.begin(), state.history.end(),
                            [&](const prompt_item& h) { return h.id == m; }))
        << m << " is masked but not in the history";
}

// Everything the research commands show, as text.
std::map<std::string, std::string> figures(store::store& db, store::row_id id) {
  const auto d = report::load_campaign(db, id);
  std::map<std::string, std::string> out;
  out["log"] = report::log_json(d).dump();
  out["lineage"] = report::lineage_json(d).dump();
  out["trace"] = report::chrome_trace(d).dump();
  // The footer says when the report was generated: that line may differ.
  std::string html = report::html_report(d);
  if (const auto at = html.find("<footer>"); at != std::string::npos)
    html.erase(at, html.find("</footer>", at) - at);
  out["html"] = html;
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
