// `kopt daemon` with workers started through a launch prefix (a shell
// script standing in for srun) and a fake python worker: one worker per
// GPU, launched with --gpu N through the prefix; a worker that crashes on
// start-up (the daemon stays up and not ready, backs off, becomes ready
// when the worker can start, and the campaign completes); a worker that
// crashes in a loop for one campaign (that campaign is paused with the
// reason, another campaign completes).
#include <set>

#include "fake_worker.hpp"
#include "support.hpp"

using namespace kopt;
using namespace kopt::test;
using json = nlohmann::json;

namespace {

store::row_id submit(daemon_process& d, const json& op, const std::string& tag) {
  const auto file = d.state().parent_path() / (tag + ".json");
  spit(file, op.dump(2));
  auto [rc, out] = run_kopt({"--db", d.db_path().string(), "submit", file.string()},
                            d.state().parent_path(), tag);
  EXPECT_EQ(rc, 0) << slurp(d.state().parent_path() / (tag + ".err"));
  return std::stoll(out);
}

}  // namespace

TEST(DaemonWorkers, CrashOnStartupBacksOffThenRecovers) {
  temp_dir dir;
  const auto wdir = dir / "worker";
  json cfg = {{"gpus", {0, 1}},
              {"worker", install_fake_worker(wdir)},
              {"limits",
               {{"backoff_initial_s", 0.05}, {"backoff_max_s", 0.4}, {"max_step_failures", 1000}}}};
  daemon_process d(dir.path(), cfg);
  fs::create_directories(d.state());
  spit(wdir / "crash_on_start", "");
  const auto id = submit(d, campaign_operator("vadd", 3), "vadd");
  d.spawn();
  // Up, serving /health with 503 and the worker's own reason, retrying.
  ASSERT_TRUE(eventually([&] { return count_lines(wdir / "starts.log") >= 6; })) << d.log();
  const auto h = d.get("/health");
  EXPECT_EQ(h.status, 503) << h.body;
  EXPECT_EQ(json::parse(h.body)["state"], "starting");
  EXPECT_NE(h.body.find("cannot initialise the device"), std::string::npos) << h.body;
  EXPECT_TRUE(d.alive());
  EXPECT_EQ(d.campaign_state(id), "queued");  // nothing runs before a worker is ready

  fs::remove(wdir / "crash_on_start");
  d.wait_ready();
  ASSERT_TRUE(eventually([&] { return d.campaign_state(id) == "done"; }, 120s)) << d.log();

  // Every worker went through the prefix, one per GPU, with its --gpu.
  const std::string prefix_log = slurp(wdir / "prefix.log");
  EXPECT_NE(prefix_log.find("worker.py --gpu 0"), std::string::npos) << prefix_log;
  EXPECT_NE(prefix_log.find("worker.py --gpu 1"), std::string::npos) << prefix_log;
  const std::string metrics = d.get("/metrics").body;
  EXPECT_NE(metrics.find("kopt_worker_failures_total{gpu=\"0\"}"), std::string::npos);
  EXPECT_EQ(metrics.find("kopt_worker_failures_total{gpu=\"0\"} 0\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("kopt_campaigns{state=\"done\"} 1"), std::string::npos) << metrics;
  d.signal(SIGTERM);
  const auto ex = d.wait_exit(10s);
  ASSERT_TRUE(ex.has_value());
  EXPECT_TRUE(WIFEXITED(*ex) && WEXITSTATUS(*ex) == 0) << d.log();
}

TEST(DaemonWorkers, CrashLoopPausesThatCampaignOthersGoOn) {
  temp_dir dir;
  const auto wdir = dir / "worker";
  json cfg = {
      {"gpus", 1},
      {"worker", install_fake_worker(wdir, 2)},
      {"limits", {{"backoff_initial_s", 0.05}, {"backoff_max_s", 0.2}, {"max_step_failures", 3}}}};
  daemon_process d(dir.path(), cfg);
  fs::create_directories(d.state());
  const auto bad = submit(d, campaign_operator("crashy_op", 3), "bad");
  const auto good = submit(d, campaign_operator("steady_op", 4, 11), "good");
  d.spawn();
  d.wait_ready();
  ASSERT_TRUE(eventually([&] { return d.campaign_state(good) == "done"; }, 120s)) << d.log();
  ASSERT_TRUE(eventually([&] { return d.campaign_state(bad) == "paused"; }, 60s)) << d.log();
  {
    auto db = d.reader();
    const auto c = db.find_campaign(bad);
    ASSERT_TRUE(c->stop_reason.has_value());
    EXPECT_NE(c->stop_reason->find("3 steps failed in a row"), std::string::npos)
        << *c->stop_reason;
    EXPECT_NE(c->stop_reason->find("crashed"), std::string::npos) << *c->stop_reason;
    int failed = 0;
    for (const auto& e : db.events_of(bad)) failed += e.kind == "step_failed";
    EXPECT_EQ(failed, 3);
    // Its crashes were not recorded as kernel results.
    EXPECT_EQ(
        d.scalar("SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
                 "WHERE c.campaign_id = " +
                 std::to_string(bad)),
        0);
  }
  const json api = json::parse(d.get("/api/campaigns/" + std::to_string(bad)).body);
  EXPECT_EQ(api["state"], "paused");
  EXPECT_NE(api["last_error"].get<std::string>().find("crashed"), std::string::npos);
  // `kopt resume` makes it runnable again (and it fails again the same way).
  auto [rc, out] =
      run_kopt({"--db", d.db_path().string(), "resume", std::to_string(bad)}, dir.path(), "resume");
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("running again"), std::string::npos) << out;
  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(10s).has_value());
}

// Daemon campaigns carry the default counters tier, as `kopt run`'s do: each
// GPU slot has a --profile-only worker beside its timing worker, started
// through the same launch prefix; the full stage's evaluations store the
// counters it measured; the timing worker is never asked for counters.
TEST(DaemonWorkers, CampaignsCarryCountersFromTheSlotsProfilingWorker) {
  temp_dir dir;
  const auto wdir = dir / "worker";
  json cfg = {{"gpus", 1}, {"worker", install_fake_worker(wdir)}};
  daemon_process d(dir.path(), cfg);
  fs::create_directories(d.state());
  const auto id = submit(d, campaign_operator("vadd", 3), "vadd");
  d.spawn();
  d.wait_ready();
  ASSERT_TRUE(eventually([&] { return d.campaign_state(id) == "done"; }, 120s)) << d.log();

  const std::string prefix_log = slurp(wdir / "prefix.log");
  EXPECT_NE(prefix_log.find("--profile-only"), std::string::npos) << prefix_log;
  const std::string counters_log = slurp(wdir / "counters.log");
  ASSERT_FALSE(counters_log.empty()) << "no worker was asked for counters";
  EXPECT_EQ(counters_log.find("\"profile_only\": false"), std::string::npos) << counters_log;
  EXPECT_NE(counters_log.find("\"tier\": \"default\""), std::string::npos) << counters_log;
  // Counters stored with the full stage's evaluations, never the screen's.
  EXPECT_GT(d.scalar("SELECT count(*) FROM evaluations WHERE stage = 'full' AND counters_json LIKE "
                     "'%dram__throughput%'"),
            0);
  EXPECT_EQ(
      d.scalar("SELECT count(*) FROM evaluations WHERE stage = 'screen' AND counters_json LIKE "
               "'%dram__throughput%'"),
      0);
  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(10s).has_value());
}
