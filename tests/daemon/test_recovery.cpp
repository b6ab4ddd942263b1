// `kopt daemon` as a real process (evaluator "fake": no GPU): kill -9 in the
// middle of a campaign and restart (nothing finished lost or repeated, the
// campaign completes), SIGTERM (exits within 10 s, state consistent, the
// next start finishes the work), SIGHUP (a changed limit takes effect; a
// broken config is refused), a reader holding a long transaction (the
// daemon keeps working), and what systemd sees on NOTIFY_SOCKET.
#include <set>

#include "support.hpp"

using namespace kopt;
using namespace kopt::test;
using json = nlohmann::json;

namespace {

json fake_config(int delay_ms, int max_active = 0) {
  json c = {{"evaluator", "fake"}, {"gpus", 1}, {"fake", {{"delay_ms", delay_ms}}}};
  if (max_active > 0) c["limits"] = {{"max_active_campaigns", max_active}};
  return c;
}

store::row_id submit(daemon_process& d, const json& op, const std::string& tag) {
  const auto file = d.state().parent_path() / (tag + ".json");
  spit(file, op.dump(2));
  auto [rc, out] = run_kopt({"--db", d.db_path().string(), "submit", file.string()},
                            d.state().parent_path(), tag);
  EXPECT_EQ(rc, 0) << slurp(d.state().parent_path() / (tag + ".err"));
  return std::stoll(out);
}

// Every finished evaluation is journaled once ("evaluated" event, one cache
// key per subject): a repeat would show the same key twice.
std::multiset<std::string> evaluated_keys(daemon_process& d, store::row_id id) {
  auto db = d.reader();
  std::multiset<std::string> keys;
  for (const auto& e : db.events_of(id))
    if (e.kind == "evaluated")
      for (const auto& s : e.data.at("subjects")) keys.insert(s.at("cache_key").get<std::string>());
  return keys;
}

std::vector<store::row_id> evaluated_event_ids(daemon_process& d, store::row_id id) {
  auto db = d.reader();
  std::vector<store::row_id> ids;
  for (const auto& e : db.events_of(id))
    if (e.kind == "evaluated") ids.push_back(e.id);
  return ids;
}

}  // namespace

TEST(DaemonRecovery, KillNineMidCampaignLosesAndRepeatsNothing) {
  temp_dir dir;
  daemon_process d(dir.path(), fake_config(60));
  fs::create_directories(d.state());
  const auto id = submit(d, campaign_operator("vadd", 8), "vadd");
  d.spawn();
  d.wait_ready();
  ASSERT_TRUE(eventually([&] {
    return d.scalar("SELECT spent_iterations FROM campaigns WHERE id = " + std::to_string(id)) >= 2;
  })) << d.log();
  d.kill9();
  const auto before_ids = evaluated_event_ids(d, id);
  const auto before_keys = evaluated_keys(d, id);
  const auto iters_before =
      d.scalar("SELECT spent_iterations FROM campaigns WHERE id = " + std::to_string(id));
  ASSERT_FALSE(before_ids.empty());
  EXPECT_EQ(d.campaign_state(id), "running");  // killed mid-campaign

  d.spawn();
  d.wait_ready();
  ASSERT_TRUE(eventually([&] { return d.campaign_state(id) == "done"; }, 120s)) << d.log();
  ASSERT_TRUE(d.alive());

  // Nothing finished was lost: every evaluation journaled before the kill
  // is still there, unchanged ids.
  const auto after_ids = evaluated_event_ids(d, id);
  for (auto e : before_ids)
    EXPECT_NE(std::find(after_ids.begin(), after_ids.end(), e), after_ids.end());
  for (const auto& k : before_keys) EXPECT_GE(evaluated_keys(d, id).count(k), 1u);
  // Nothing was repeated: each cache key evaluated exactly once.
  const auto keys = evaluated_keys(d, id);
  for (const auto& k : keys) EXPECT_EQ(keys.count(k), 1u) << "evaluated twice: " << k;
  // Every iteration exactly once, all finished; the budget was honoured.
  EXPECT_EQ(d.scalar("SELECT spent_iterations FROM campaigns WHERE id = " + std::to_string(id)), 8);
  EXPECT_GE(iters_before, 2);
  EXPECT_EQ(d.scalar("SELECT count(*) FROM iterations WHERE number > 0 AND status = 'done' AND "
                     "campaign_id = " +
                     std::to_string(id)),
            8);
  EXPECT_EQ(d.scalar("SELECT count(*) FROM iterations WHERE number > 0 AND campaign_id = " +
                     std::to_string(id)),
            8);
  EXPECT_EQ(d.scalar("SELECT count(*) FROM events WHERE kind = 'finished' AND campaign_id = " +
                     std::to_string(id)),
            1);
  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(30s).has_value());
}

TEST(DaemonRecovery, SigtermExitsCleanlyAndTheNextStartFinishes) {
  temp_dir dir;
  daemon_process d(dir.path(), fake_config(300));
  fs::create_directories(d.state());
  const auto a = submit(d, campaign_operator("va", 6), "a");
  const auto b = submit(d, campaign_operator("vb", 6, 9), "b");
  notify_listener sd(dir / "notify.sock");
  d.spawn({"NOTIFY_SOCKET=" + sd.path().string(), "WATCHDOG_USEC=400000"});
  d.wait_ready();
  ASSERT_TRUE(eventually([&] { return sd.seen("READY=1"); }, 30s));
  ASSERT_TRUE(eventually([&] { return sd.seen("WATCHDOG=1"); }, 30s));
  ASSERT_TRUE(eventually([&] {
    return d.scalar("SELECT count(*) FROM events WHERE kind = 'evaluated'") >= 3;
  })) << d.log();

  const auto t0 = std::chrono::steady_clock::now();
  d.signal(SIGTERM);
  const auto st = d.wait_exit(10s);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(st.has_value()) << "no exit within 10 s; log:\n" << d.log();
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << d.log();
  EXPECT_LT(took, 10.0);
  EXPECT_TRUE(sd.seen("STOPPING=1"));
  EXPECT_NE(d.log().find("stopped cleanly"), std::string::npos) << d.log();

  // Consistent: the file checks, nothing is left half-way in the campaign
  // states, and the lock is free for the next start.
  {
    auto db = d.reader();
    auto q = db.db().prepare("PRAGMA integrity_check");
    ASSERT_TRUE(q.step());
    EXPECT_EQ(q.get_text(0), "ok");
  }
  for (auto id : {a, b}) {
    const auto s = d.campaign_state(id);
    EXPECT_TRUE(s == "running" || s == "queued" || s == "done") << s;
  }
  d.spawn();
  d.wait_ready();
  ASSERT_TRUE(eventually(
      [&] { return d.campaign_state(a) == "done" && d.campaign_state(b) == "done"; }, 120s))
      << d.log();
  for (auto id : {a, b}) {
    const auto keys = evaluated_keys(d, id);
    for (const auto& k : keys) EXPECT_EQ(keys.count(k), 1u) << "evaluated twice: " << k;
  }
  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(10s).has_value());
}

TEST(DaemonRecovery, SighupAppliesAChangedLimit) {
  temp_dir dir;
  daemon_process d(dir.path(), fake_config(100, 1));
  fs::create_directories(d.state());
  for (int i = 0; i < 3; ++i)
    submit(d, campaign_operator("h" + std::to_string(i), 200, 3 + i), "h" + std::to_string(i));
  d.spawn();
  d.wait_ready();
  auto active = [&] {
    const auto r = d.get("/api/daemon");
    if (r.status != 200) return -1;
    return static_cast<int>(json::parse(r.body).at("active_campaigns").size());
  };
  ASSERT_TRUE(eventually([&] { return active() == 1; })) << d.log();
  for (int i = 0; i < 10; ++i) {
    EXPECT_LE(active(), 1);
    std::this_thread::sleep_for(50ms);
  }
  // A broken config is refused and the running one kept.
  spit(dir / "daemon.json", "{ \"state_dir\": ");
  d.signal(SIGHUP);
  ASSERT_TRUE(eventually([&] { return d.log().find("reload refused") != std::string::npos; }, 30s))
      << d.log();
  EXPECT_TRUE(d.alive());
  EXPECT_EQ(json::parse(d.get("/api/daemon").body)["limits"]["max_active_campaigns"], 1);

  d.config()["limits"]["max_active_campaigns"] = 3;
  d.write_config();
  d.signal(SIGHUP);
  ASSERT_TRUE(eventually([&] { return active() == 3; }, 60s)) << d.log();
  const json st = json::parse(d.get("/api/daemon").body);
  EXPECT_EQ(st["limits"]["max_active_campaigns"], 3);
  EXPECT_EQ(st["reloads"], 1);
  d.signal(SIGTERM);
  const auto ex = d.wait_exit(10s);
  ASSERT_TRUE(ex.has_value());
  EXPECT_TRUE(WIFEXITED(*ex) && WEXITSTATUS(*ex) == 0);
}

TEST(DaemonRecovery, ALongReadTransactionDoesNotStopTheDaemon) {
  temp_dir dir;
  daemon_process d(dir.path(), fake_config(20));
  fs::create_directories(d.state());
  const auto id = submit(d, campaign_operator("reader", 5), "r");
  // A reader (another connection, as `kopt list` or a report would be)
  // opens a transaction and holds its snapshot for the whole campaign.
  store::database reader(d.db_path(), store::database::open_mode::read_only);
  reader.exec("BEGIN");
  auto q = reader.prepare("SELECT count(*) FROM campaigns");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.get_int(0), 1);
  q.reset();
  d.spawn();
  d.wait_ready();
  ASSERT_TRUE(eventually([&] { return d.campaign_state(id) == "done"; }, 120s)) << d.log();
  // The reader still sees its old snapshot: the transaction really was open.
  auto q2 = reader.prepare("SELECT state FROM campaigns WHERE id = ?");
  q2.bind_all(id);
  ASSERT_TRUE(q2.step());
  EXPECT_EQ(q2.get_text(0), "queued");
  reader.exec("COMMIT");
  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(10s).has_value());
}
