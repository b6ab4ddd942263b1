// Issue #26, the store's side: schema v5 migrates a v4 file with its
// history (counters seeded, the loop's evaluation journal back-filled),
// the counters follow inserts, deletes and status changes in the same
// transaction, totals() reads them at the same cost on 100k rows as on
// none, and the WAL stays under journal_size_limit during a long write by
// several connections with readers beside them, with no checkpoint but the
// one every commit runs for itself.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <span>
#include <thread>

#include "common/error.hpp"
#include "store/migrations.hpp"
#include "store/retention.hpp"
#include "store/scheduling.hpp"
#include "store/store.hpp"
#include "temp_dir.hpp"

namespace ks = kopt::store;

namespace {

std::int64_t count_rows(ks::database& db, const std::string& sql) {
  auto st = db.prepare(sql);
  EXPECT_TRUE(st.step());
  return st.get_int(0);
}

constexpr const char* base_rows =
    "INSERT INTO operators(id, name, op_type, config_json, content_hash, created_at) "
    "VALUES (1, 'op', 'custom', '{}', 'h', 0);"
    "INSERT INTO workloads(id, operator_id, key, position, axes_json, weight) VALUES "
    "(1, 1, 'w', 0, '{}', 1);"
    "INSERT INTO campaigns(id, operator_id, provider, settings_json, created_at, updated_at) "
    "VALUES (1, 1, 'autotune', '{}', 0, 0);"
    "INSERT INTO candidates(id, campaign_id, origin, source, source_hash, launch_plan_json, "
    "created_at) VALUES (1, 1, 'seed', 's', 'x', '{}', 0);";

}  // namespace

TEST(StoreScale, V4FileMigratesWithCountersAndJournal) {
  kopt::test::temp_dir dir;
  const auto path = dir / "kopt.db";
  {
    ks::database db(path, ks::database::open_mode::read_write_create);
    db.exec("PRAGMA foreign_keys = ON");
    const auto steps = ks::migrations();
    ks::migrate(db, std::span(steps.data(), 4));
    ASSERT_EQ(db.pragma_int("user_version"), 4);
    db.exec(base_rows);
    db.exec(
        "INSERT INTO evaluations(candidate_id, workload_id, status, created_at) VALUES "
        "(1, 1, 'ok', 0), (1, 1, 'ok', 0), (1, 1, 'incorrect', 0);"
        "INSERT INTO llm_calls(campaign_id, provider, prompt, status, attempts, prompt_tokens, "
        "completion_tokens, cost_usd, created_at) VALUES (1, 'p', 'x', 'ok', 3, 100, 20, 0.5, 0);"
        "INSERT INTO events(campaign_id, kind, message, data_json, created_at) VALUES "
        "(1, 'evaluated', 'm', '{\"subjects\":[{\"cache_key\":\"k1\",\"result\":{\"a\":1}},"
        "{\"cache_key\":\"k2\",\"result\":{\"a\":2}}]}', 0),"
        "(1, 'evaluated', 'm', '{\"subjects\":[{\"cache_key\":\"k1\",\"result\":{\"a\":3}}]}', 0),"
        "(NULL, 'step_failed', 'm', NULL, 0);");
  }
  auto s = ks::store::open(path);
  EXPECT_EQ(s.file_schema_version(), 5);
  const auto t = ks::totals(s);
  EXPECT_EQ(t.evaluations_by_status.at("ok"), 2);
  EXPECT_EQ(t.evaluations_by_status.at("incorrect"), 1);
  EXPECT_EQ(t.evaluations_by_status.at("crashed"), 0);
  EXPECT_EQ(t.llm_calls_by_status.at("ok"), 1);
  EXPECT_EQ(t.prompt_tokens, 100);
  EXPECT_EQ(t.completion_tokens, 20);
  EXPECT_DOUBLE_EQ(t.llm_cost_usd, 0.5);
  EXPECT_EQ(t.llm_retries, 2);
  EXPECT_EQ(t.candidates, 1);
  EXPECT_EQ(t.step_failed_events, 1);
  // The later event wins for a key journaled twice, as the old full replay did.
  EXPECT_EQ(s.journaled_result(1, "k1").value(), nlohmann::json({{"a", 3}}));
  EXPECT_EQ(s.journaled_result(1, "k2").value(), nlohmann::json({{"a", 2}}));
  EXPECT_FALSE(s.journaled_result(1, "k3"));
  EXPECT_EQ(s.journal_size(1), 2);
  // Rows from before v5 have no content key until the loop sets one.
  EXPECT_EQ(s.candidates_without_key(1).size(), 1u);
  s.set_candidate_key(1, "key1");
  EXPECT_EQ(s.find_candidate_by_key(1, "key1"), 1);
  EXPECT_TRUE(s.candidates_without_key(1).empty());
}

TEST(StoreScale, CountersFollowEveryWriteInItsTransaction) {
  kopt::test::temp_dir dir;
  auto s = ks::store::open(dir / "kopt.db");
  auto& d = s.db();
  d.exec(base_rows);
  auto all_counted = [&] {
    const auto t = ks::totals(s);
    for (const auto& [status, n] : t.evaluations_by_status)
      EXPECT_EQ(n,
                count_rows(d, "SELECT count(*) FROM evaluations WHERE status = '" + status + "'"))
          << status;
    EXPECT_EQ(t.candidates, count_rows(d, "SELECT count(*) FROM candidates"));
    EXPECT_EQ(t.prompt_tokens,
              count_rows(d, "SELECT coalesce(sum(prompt_tokens), 0) FROM llm_calls"));
  };
  d.exec(
      "INSERT INTO evaluations(candidate_id, workload_id, status, created_at) VALUES "
      "(1, 1, 'ok', 0), (1, 1, 'timeout', 0);");
  all_counted();
  d.exec("UPDATE evaluations SET status = 'crashed' WHERE status = 'timeout'");
  all_counted();
  {
    ks::transaction tx(d);
    d.exec(
        "INSERT INTO evaluations(candidate_id, workload_id, status, created_at) VALUES (1, 1, "
        "'ok', 0)");
    d.exec(
        "INSERT INTO llm_calls(campaign_id, provider, prompt, status, prompt_tokens, created_at) "
        "VALUES (1, 'p', 'x', 'ok', 7, 0)");
    // rolled back: counters too
  }
  all_counted();
  EXPECT_EQ(ks::totals(s).evaluations_by_status.at("ok"), 1);
  // Cascades (a campaign deleted) count down as well.
  d.exec("DELETE FROM campaigns WHERE id = 1");
  all_counted();
  EXPECT_EQ(ks::totals(s).candidates, 0);
}

TEST(StoreScale, TotalsCostTheSameOn100kRowsAsOnNone) {
  kopt::test::temp_dir dir;
  auto s = ks::store::open(dir / "kopt.db");
  auto& d = s.db();
  d.exec(base_rows);
  auto time_totals = [&] {
    double best = 1e9;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      (void)ks::totals(s);
      best = std::min(
          best,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  const double empty_ms = time_totals();
  // 100k rows in one transaction (the 1M figure is tests/daemon/test_scale
  // and bench/store_scale.sh).
  d.exec(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) "
      "INSERT INTO evaluations(candidate_id, workload_id, status, median_ns, created_at) "
      "SELECT 1, 1, CASE WHEN i % 10 = 0 THEN 'incorrect' ELSE 'ok' END, i, 0 FROM n");
  const double full_ms = time_totals();
  const auto t = ks::totals(s);
  EXPECT_EQ(t.evaluations_by_status.at("ok"), 90000);
  EXPECT_EQ(t.evaluations_by_status.at("incorrect"), 10000);
  std::cout << "totals(): " << empty_ms << " ms on an empty store, " << full_ms
            << " ms on 100k evaluation rows\n";
  EXPECT_LT(full_ms, 5.0);
}

// The bound holds by construction: no explicit checkpoint here, only each
// commit's own check (open_options::checkpoint_policy). Four writing
// connections (the daemon has one per campaign step) append ~24 MB in
// 240 transactions while two readers take short snapshots back to back and
// a poller reads the WAL file's size as often as it can.
TEST(StoreScale, WalStaysUnderItsLimitDuringALongWrite) {
  kopt::test::temp_dir dir;
  const auto path = dir / "kopt.db";
  constexpr std::int64_t limit = 4 << 20;
  const ks::open_options opts{.busy_timeout = std::chrono::milliseconds(60000),
                              .journal_size_limit = limit};
  auto s = ks::store::open(path, opts);
  s.db().exec(base_rows);
  const auto before = ks::process_wal_stats();
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> polled_max{0}, reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r)
    readers.emplace_back([&] {
      auto rd = ks::store::open(path, {.read_only = true});
      while (!stop) {
        ks::transaction snap(rd.db(), ks::transaction::kind::deferred);
        (void)ks::totals(rd);
        snap.commit();
        ++reads;
      }
    });
  std::thread poller([&] {
    while (!stop) {
      polled_max = std::max(polled_max.load(), s.db().wal_bytes());
      std::this_thread::yield();
    }
  });
  const std::string payload(1000, 'x');
  std::vector<std::thread> writers;
  std::atomic<std::int64_t> after_commit_max{0}, counted_max{0};
  for (int w = 0; w < 4; ++w)
    writers.emplace_back([&] {
      auto ws = ks::store::open(path, opts);
      auto& d = ws.db();
      for (int tx_i = 0; tx_i < 60; ++tx_i) {
        ks::transaction tx(d);
        auto st = d.prepare(
            "INSERT INTO evaluations(candidate_id, workload_id, status, error, created_at) "
            "VALUES (1, 1, 'ok', ?, 0)");
        for (int i = 0; i < 100; ++i) {
          st.reset();
          st.bind(1, payload);
          st.run();
        }
        tx.commit();
        after_commit_max = std::max(after_commit_max.load(), d.wal_bytes());
      }
      counted_max = std::max(counted_max.load(), d.wal_max_bytes_seen());
    });
  for (auto& t : writers) t.join();
  stop = true;
  for (auto& t : readers) t.join();
  poller.join();
  const auto after = ks::process_wal_stats();
  const auto truncated = after.truncated - before.truncated;
  std::cout << "largest WAL: " << polled_max << " bytes (poller), " << after_commit_max
            << " (after a commit), " << counted_max << " (frames counted by the commits), limit "
            << limit << "; " << truncated << " truncated, " << after.busy - before.busy << " busy, "
            << after.passive - before.passive << " passive; " << reads << " reader snapshots\n";
  EXPECT_GT(truncated, 0);
  EXPECT_EQ(after.errors, before.errors);
  EXPECT_GT(reads.load(), 0);
  EXPECT_LE(polled_max.load(), limit);
  EXPECT_LE(after_commit_max.load(), limit);
  EXPECT_LE(counted_max.load(), limit);
  EXPECT_GT(counted_max.load(), limit / 4);  // it did reach the trigger
  EXPECT_EQ(count_rows(s.db(), "SELECT count(*) FROM evaluations"), 24000);
}

// A reader that holds one snapshot for longer than the wait makes the
// size-triggered TRUNCATE busy (the commit still succeeds and loses
// nothing); the first commit after the reader leaves truncates. The
// daemon's periodic checkpoint_wal empties a WAL that writes left behind.
TEST(StoreScale, LongReaderMakesTheSizeCheckpointBusyThenTheNextCommitTruncates) {
  kopt::test::temp_dir dir;
  const auto path = dir / "kopt.db";
  constexpr std::int64_t limit = 1 << 20;
  auto s = ks::store::open(
      path, {.journal_size_limit = limit, .wal_checkpoint_wait = std::chrono::milliseconds(50)});
  auto& d = s.db();
  d.exec(base_rows);
  const std::string payload(1000, 'x');
  auto write = [&](int rows) {
    ks::transaction tx(d);
    auto st = d.prepare(
        "INSERT INTO evaluations(candidate_id, workload_id, status, error, created_at) "
        "VALUES (1, 1, 'ok', ?, 0)");
    for (int i = 0; i < rows; ++i) {
      st.reset();
      st.bind(1, payload);
      st.run();
    }
    tx.commit();
  };
  const auto before = ks::process_wal_stats();
  {
    auto rd = ks::store::open(path, {.read_only = true});
    ks::transaction snap(rd.db(), ks::transaction::kind::deferred);
    ASSERT_EQ(count_rows(rd.db(), "SELECT count(*) FROM evaluations"), 0);
    write(400);  // ~0.4 MB: past a quarter of the limit
    EXPECT_GT(ks::process_wal_stats().busy, before.busy);
    EXPECT_GT(d.wal_bytes(), limit / 4);
    EXPECT_EQ(count_rows(rd.db(), "SELECT count(*) FROM evaluations"), 0);  // its snapshot
    snap.commit();
  }
  write(1);
  EXPECT_GT(ks::process_wal_stats().truncated, before.truncated);
  EXPECT_EQ(d.wal_bytes(), 0);
  EXPECT_EQ(count_rows(d, "SELECT count(*) FROM evaluations"), 401);
  write(10);  // below every threshold
  EXPECT_GT(d.wal_bytes(), 0);
  EXPECT_EQ(ks::checkpoint_wal(s, std::chrono::milliseconds(250), std::chrono::milliseconds(5000)),
            "truncated");
  EXPECT_EQ(d.wal_bytes(), 0);
}
