// kopt::daemon in-process: config parsing and its error messages, the
// scheduler's fairness, the JSON-lines log formatter's escaping, the
// NOTIFY_SOCKET protocol, the spool (valid and invalid files, accounting,
// a daemon killed between recording a file and moving it), pause / resume /
// cancel semantics, step failure backoff, and the metrics and API builders.
#include <gtest/gtest.h>
#include <spdlog/details/log_msg.h>

#include "common/error.hpp"
#include "daemon/config.hpp"
#include "daemon/http.hpp"
#include "daemon/logging.hpp"
#include "daemon/notify.hpp"
#include "daemon/queue.hpp"
#include "support.hpp"

using namespace kopt;
using namespace kopt::test;
using json = nlohmann::json;

namespace {

std::string config_error_of(const json& j) {
  try {
    daemon::parse_config(j, "/tmp/d.json");
  } catch (const kopt::config_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(DaemonConfig, DefaultsAndPaths) {
  const auto c =
      daemon::parse_config({{"state_dir", "state"}, {"gpus", 4}}, "/etc/kopt/daemon.json");
  EXPECT_EQ(c.state_dir, "/etc/kopt/state");  // relative to the config file
  EXPECT_EQ(c.db_path, "/etc/kopt/state/kopt.db");
  EXPECT_EQ(c.spool_dir, "/etc/kopt/state/spool");
  EXPECT_EQ(c.gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(c.active_limit(), 8);
  EXPECT_EQ(c.evaluator, "worker");
  EXPECT_EQ(c.http.address, "127.0.0.1");
  EXPECT_EQ(c.log.format, "text");
  const auto d = daemon::parse_config({{"state_dir", "/s"},
                                       {"gpus", {2, 5}},
                                       {"worker", {{"launch_prefix", {"srun", "--gres=gpu:1"}}}},
                                       {"limits", {{"max_active_campaigns", 3}}}},
                                      "/x/d.json");
  EXPECT_EQ(d.gpus, (std::vector<int>{2, 5}));
  EXPECT_EQ(d.worker.launch_prefix, (std::vector<std::string>{"srun", "--gres=gpu:1"}));
  EXPECT_EQ(d.active_limit(), 3);
}

TEST(DaemonConfig, ErrorsNameTheField) {
  EXPECT_NE(config_error_of(json::object()).find("state_dir: is required"), std::string::npos);
  EXPECT_NE(config_error_of({{"state_dir", "s"}, {"limit", 1}}).find("limit: unknown field"),
            std::string::npos);
  EXPECT_NE(config_error_of({{"state_dir", "s"}, {"gpus", {0, 0}}}).find("lists GPU 0 twice"),
            std::string::npos);
  EXPECT_NE(config_error_of({{"state_dir", "s"}, {"evaluator", "gpu"}}).find("evaluator: must be"),
            std::string::npos);
  EXPECT_NE(config_error_of({{"state_dir", "s"}, {"limits", {{"max_step_failures", 0}}}})
                .find("limits.max_step_failures: 0 is out of range"),
            std::string::npos);
  EXPECT_NE(config_error_of({{"state_dir", "s"}, {"log", {{"format", "xml"}}}}).find("log.format"),
            std::string::npos);
  EXPECT_NE(config_error_of({{"state_dir", "s"}, {"providers", {{"gemini", json::object()}}}})
                .find("providers.gemini: unknown provider"),
            std::string::npos);
  // A section with several models: every entry is checked at load, not at
  // the campaign's first step; a valid one loads.
  const json two = {{"model", "a"}, {"name", "a"}};
  EXPECT_NE(config_error_of(
                {{"state_dir", "s"},
                 {"providers", {{"openai", {{"models", {two, {{"model", "b"}, {"weight", 0}}}}}}}}})
                .find("providers.openai: llm.models[1].weight"),
            std::string::npos);
  EXPECT_EQ(config_error_of({{"state_dir", "s"},
                             {"providers",
                              {{"openai",
                                {{"models", {two, {{"model", "b"}, {"tier", 1}}}},
                                 {"selection", {{"policy", "bandit"}}}}}}}}),
            "");
  EXPECT_NE(config_error_of({{"state_dir", "s"}, {"http", {{"port", "80"}}}})
                .find("http.port: must be an integer"),
            std::string::npos);
}

TEST(DaemonScheduler, FairBetweenTeamsThenPriorityThenLeastRecent) {
  std::vector<daemon::runnable> c = {
      {1, "a", 0, 100, 0}, {2, "a", 5, 200, 0}, {3, "b", 0, 300, 0}, {4, "b", 0, 50, 10}};
  // Team b has used less GPU time: it goes first, its least recently run.
  EXPECT_EQ(daemon::pick_next(c, {}, {{"a", 10.0}, {"b", 2.0}}), 3);
  // Equal usage: priority decides (campaign 2, priority 5).
  EXPECT_EQ(daemon::pick_next(c, {}, {}), 2);
  // Active campaigns are not picked again.
  EXPECT_EQ(daemon::pick_next(c, {2}, {}), 1);  // 1 and 3 never ran; 1 is older
  EXPECT_EQ(daemon::pick_next(c, {1, 2, 3, 4}, {}), std::nullopt);
}

TEST(DaemonLogging, JsonLinesEscapeEverything) {
  auto f = daemon::make_json_formatter();
  const std::string nasty =
      "quote \" backslash \\ newline \n tab \t ctrl \x01 bad utf8 \xff\xfe end";
  spdlog::details::log_msg msg(spdlog::source_loc{}, "kopt", spdlog::level::warn, nasty);
  spdlog::memory_buf_t buf;
  f->format(msg, buf);
  const std::string line(buf.data(), buf.size());
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per record";
  const json j = json::parse(line);  // throws if the line is not valid JSON
  EXPECT_EQ(j.at("level"), "warning");
  const std::string m = j.at("msg");
  EXPECT_NE(m.find("quote \" backslash \\ newline \n tab"), std::string::npos);
  EXPECT_EQ(j.at("logger"), "kopt");
  EXPECT_TRUE(j.contains("ts"));

  auto t = daemon::make_text_formatter(true);
  spdlog::memory_buf_t b2;
  spdlog::details::log_msg m2(spdlog::source_loc{}, "kopt", spdlog::level::err, "two\nlines");
  t->format(m2, b2);
  EXPECT_EQ(std::string(b2.data(), b2.size()),
            "<3>error: two lines\n");  // journald priority prefix
}

TEST(DaemonNotify, SendsToNotifySocket) {
  temp_dir dir;
  notify_listener l(dir / "notify.sock");
  setenv("NOTIFY_SOCKET", l.path().c_str(), 1);
  EXPECT_TRUE(daemon::notify("READY=1\nSTATUS=testing"));
  unsetenv("NOTIFY_SOCKET");
  EXPECT_FALSE(daemon::notify("READY=1"));  // not under systemd: a no-op
  ASSERT_TRUE(eventually([&] { return l.seen("READY=1\nSTATUS=testing"); }, 5s));
  setenv("WATCHDOG_USEC", "2000000", 1);
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  ASSERT_TRUE(daemon::watchdog_interval().has_value());
  EXPECT_EQ(daemon::watchdog_interval()->count(), 2000000);
  setenv("WATCHDOG_PID", "1", 1);  // meant for another process
  EXPECT_FALSE(daemon::watchdog_interval().has_value());
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
  std::cout << "notify backend: " << daemon::notify_backend() << '\n';
}

namespace {

struct store_fixture {
  temp_dir dir;
  store::store db = store::store::open(dir / "kopt.db");
  fs::path spool = dir / "spool";
  std::int64_t count(const std::string& sql) {
    auto st = db.db().prepare(sql);
    st.step();
    return st.get_int(0);
  }
};

}  // namespace

TEST(DaemonSpool, ValidQueuedInvalidRejectedWithReasons) {
  store_fixture f;
  spool_write(f.spool, "good.json", campaign_operator("good", 3).dump(2));
  spool_write(f.spool / "inference", "team.json", campaign_operator("teamop", 3).dump(2));
  spool_write(f.spool, "syntax.json", "{\"name\": \"x\",\n  oops }");
  auto bad = campaign_operator("bad", 3);
  bad["inputs"]["a"]["dtype"] = "float33";
  spool_write(f.spool, "bad.json", bad.dump(2));
  spool_write(f.spool, "notyet.json.part", "{");  // still being written: ignored
  const auto rep = daemon::scan_spool(f.db, f.spool, 1 << 20);
  EXPECT_EQ(rep.accepted, 2);
  EXPECT_EQ(rep.rejected, 2);
  EXPECT_EQ(f.count("SELECT count(*) FROM campaigns"), 2);
  EXPECT_EQ(f.count("SELECT count(*) FROM campaigns WHERE team = 'inference'"), 1);
  EXPECT_EQ(f.count("SELECT count(*) FROM submissions WHERE status = 'rejected'"), 2);
  EXPECT_TRUE(fs::exists(f.spool / "rejected/syntax.json"));
  EXPECT_TRUE(fs::exists(f.spool / "rejected/bad.json"));
  const std::string why = slurp(f.spool / "rejected/bad.json.error.txt");
  EXPECT_NE(why.find("bad.json:"), std::string::npos) << why;
  EXPECT_NE(why.find("float33"), std::string::npos) << why;
  EXPECT_NE(slurp(f.spool / "rejected/syntax.json.error.txt").find("syntax.json:2:"),
            std::string::npos)
      << slurp(f.spool / "rejected/syntax.json.error.txt");
  EXPECT_FALSE(fs::exists(f.spool / "good.json"));
  EXPECT_TRUE(fs::exists(f.spool / "notyet.json.part"));
  int accepted = 0;
  for (const auto& e : fs::directory_iterator(f.spool / "accepted"))
    accepted += e.is_regular_file();
  EXPECT_EQ(accepted, 1);
  EXPECT_TRUE(fs::exists(f.spool / "inference/accepted"));
  // Nothing new: a second pass does nothing.
  const auto again = daemon::scan_spool(f.db, f.spool, 1 << 20);
  EXPECT_EQ(again.accepted + again.rejected + again.already_done, 0);
  // Too large.
  spool_write(f.spool, "big.json", campaign_operator("big", 3).dump(2));
  EXPECT_EQ(daemon::scan_spool(f.db, f.spool, 100).rejected, 1);
  EXPECT_NE(slurp(f.spool / "rejected/big.json.error.txt").find("spool_max_bytes"),
            std::string::npos);
}

TEST(DaemonSpool, RecordedButNotMovedIsNotSubmittedTwice) {
  store_fixture f;
  const std::string text = campaign_operator("once", 3).dump(2);
  spool_write(f.spool, "once.json", text);
  ASSERT_EQ(daemon::scan_spool(f.db, f.spool, 1 << 20).accepted, 1);
  // A daemon killed after its commit but before the rename: the file is
  // back in the spool with the same name, bytes and mtime.
  fs::path moved;
  for (const auto& e : fs::directory_iterator(f.spool / "accepted")) moved = e.path();
  fs::rename(moved, f.spool / "once.json");
  const auto rep = daemon::scan_spool(f.db, f.spool, 1 << 20);
  EXPECT_EQ(rep.accepted, 0);
  EXPECT_EQ(rep.already_done, 1);
  EXPECT_EQ(f.count("SELECT count(*) FROM campaigns"), 1);
  EXPECT_FALSE(fs::exists(f.spool / "once.json"));
}

TEST(DaemonControl, PauseResumeCancelSemantics) {
  store_fixture f;
  auto op = load_op(campaign_operator("ctl", 3));
  const auto a = daemon::submit_campaign(f.db, op, 0, "t", "test").campaign_id;
  const auto b = daemon::submit_campaign(f.db, op, 0, "t", "test").campaign_id;
  // Queued: paused at once; resume makes it queued again (never started).
  auto r = daemon::pause_campaign(f.db, a);
  EXPECT_TRUE(r.changed);
  EXPECT_FALSE(r.deferred);
  EXPECT_EQ(r.after, "paused");
  EXPECT_FALSE(daemon::pause_campaign(f.db, a).changed);
  EXPECT_EQ(daemon::resume_campaign(f.db, a).after, "queued");
  // Running: a request the daemon applies at a checkpoint.
  f.db.set_campaign_state(b, store::campaign_state::running);
  r = daemon::pause_campaign(f.db, b);
  EXPECT_TRUE(r.deferred);
  EXPECT_EQ(r.after, "running");
  EXPECT_TRUE(daemon::runnable_campaigns(f.db, store::now_ms()).size() ==
              1);  // b waits for its request
  EXPECT_EQ(daemon::apply_request(f.db, b), std::optional<std::string>("pause"));
  EXPECT_EQ(f.db.find_campaign(b)->state, store::campaign_state::paused);
  EXPECT_EQ(daemon::resume_campaign(f.db, b).after, "running");  // it had started
  r = daemon::cancel_campaign(f.db, b);
  EXPECT_TRUE(r.deferred);
  EXPECT_THROW(daemon::resume_campaign(f.db, b), kopt::error);
  daemon::apply_request(f.db, b);
  EXPECT_EQ(f.db.find_campaign(b)->state, store::campaign_state::cancelled);
  EXPECT_THROW(daemon::pause_campaign(f.db, b), kopt::error);
  EXPECT_FALSE(daemon::cancel_campaign(f.db, b).changed);
  EXPECT_THROW(daemon::pause_campaign(f.db, 999), kopt::not_found_error);
  EXPECT_EQ(daemon::cancel_campaign(f.db, a).after, "cancelled");
}

TEST(DaemonControl, FailuresBackOffThenPause) {
  store_fixture f;
  auto op = load_op(campaign_operator("fail", 3));
  const auto id = daemon::submit_campaign(f.db, op, 0, "", "test").campaign_id;
  EXPECT_FALSE(daemon::record_step_failure(f.db, id, "worker gone", 3, 100, 1000));
  // Backing off: not runnable now, runnable later.
  EXPECT_TRUE(daemon::runnable_campaigns(f.db, store::now_ms()).empty());
  EXPECT_EQ(daemon::runnable_campaigns(f.db, store::now_ms() + 200000).size(), 1u);
  EXPECT_FALSE(daemon::record_step_failure(f.db, id, "worker gone", 3, 100, 1000));
  EXPECT_TRUE(daemon::record_step_failure(f.db, id, "worker gone again", 3, 100, 1000));
  const auto c = f.db.find_campaign(id);
  EXPECT_EQ(c->state, store::campaign_state::paused);
  EXPECT_NE(c->stop_reason->find("3 steps failed in a row: worker gone again"), std::string::npos);
  daemon::resume_campaign(f.db, id);
  EXPECT_EQ(f.count("SELECT step_failures FROM campaigns WHERE id = " + std::to_string(id)), 0);
  EXPECT_EQ(daemon::runnable_campaigns(f.db, store::now_ms()).size(), 1u);
}

TEST(DaemonHttp, MetricsAndCampaignJson) {
  store_fixture f;
  auto op = load_op(campaign_operator("m", 5));
  const auto id = daemon::submit_campaign(f.db, op, 3, "infer\"ence", "test").campaign_id;
  const json status = {
      {"ready", true},
      {"active_campaigns", {id}},
      {"steps", json::object({{"yield", 2}})},
      {"limits", {{"max_active_campaigns", 2}}},
      {"gpus",
       json::array({json{{"gpu", 0}, {"busy_s", 1.5}, {"state", "busy"}, {"evaluations", 4}}})},
      {"team_gpu_seconds", json::object({{"infer\"ence", 1.5}})}};
  const std::string m = daemon::metrics_text(f.db, status);
  EXPECT_NE(m.find("kopt_daemon_ready 1"), std::string::npos);
  EXPECT_NE(m.find("kopt_campaigns{state=\"queued\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("kopt_evaluations_total{status=\"ok\"} 0"), std::string::npos);
  EXPECT_NE(m.find("kopt_gpu_busy_seconds_total{gpu=\"0\"} 1.5"), std::string::npos);
  EXPECT_NE(m.find("kopt_team_gpu_seconds_total{team=\"infer\\\"ence\"} 1.5"), std::string::npos)
      << m;
  EXPECT_NE(m.find("kopt_llm_retries_total 0"), std::string::npos);
  EXPECT_NE(m.find("kopt_daemon_steps_total{outcome=\"yield\"} 2"), std::string::npos) << m;
  EXPECT_NE(m.find("# TYPE kopt_llm_cost_usd_total counter"), std::string::npos);
  const json cs = daemon::campaigns_json(f.db);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0]["id"], id);
  EXPECT_EQ(cs[0]["operator"], "m");
  EXPECT_EQ(cs[0]["priority"], 3);
  EXPECT_EQ(cs[0]["budget"]["iterations"], 5);
  EXPECT_EQ(cs[0]["progress"], 0.0);
  EXPECT_NE(std::string(daemon::dashboard_html()).find("/api/campaigns"), std::string::npos);
}
