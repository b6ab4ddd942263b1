// `kopt daemon` as a real process, its queue and its surfaces: 200
// submissions at once (CLI and spool, valid and invalid) all accounted for
// without duplicates; pause / resume / cancel from the CLI on a running
// daemon; the HTTP endpoints; JSON-lines logs; one daemon per state dir.
#include <fmt/format.h>

#include <atomic>
#include <mutex>
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

std::string invalid_config(int i) {
  switch (i % 3) {
    case 0:
      return "{ \"name\": \"broken" + std::to_string(i) + "\",\n  \"op_type\": ";  // not JSON
    case 1: {
      auto op = campaign_operator("bad" + std::to_string(i), 2);
      op["inputs"]["a"]["dtype"] = "float33";
      return op.dump(2);
    }
    default: {
      auto op = campaign_operator("bad" + std::to_string(i), 2);
      op.erase("workloads");
      return op.dump(2);
    }
  }
}

int files_in(const fs::path& dir, const std::string& suffix) {
  int n = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_regular_file() && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      ++n;
  }
  return n;
}

}  // namespace

TEST(DaemonQueue, TwoHundredSubmissionsAllAccountedForNoDuplicates) {
  temp_dir dir;
  // Slow fake GPU, one step at a time: the daemon is busy while the
  // submissions arrive.
  daemon_process d(dir.path(), fake_config(50, 1));
  fs::create_directories(d.state());
  d.spawn();
  d.wait_ready();
  const auto in = dir / "in";
  fs::create_directories(in);

  std::mutex mu;
  std::vector<store::row_id> cli_ids;
  std::atomic<int> cli_ok{0}, cli_invalid{0}, cli_other{0};
  std::vector<std::thread> threads;
  // 100 CLI submissions (50 valid, 50 invalid) from 8 threads at once...
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = t; i < 100; i += 8) {
        const auto f = in / fmt::format("cli{}.json", i);
        spit(f, i % 2 == 0 ? campaign_operator(fmt::format("cli{}", i), 2, i).dump(2)
                           : invalid_config(i));
        auto [rc, out] = run_kopt(
            {"--db", d.db_path().string(), "--busy-timeout-ms", "60000", "submit", f.string()}, in,
            fmt::format("cli{}", i));
        if (rc == 0) {
          ++cli_ok;
          std::lock_guard lk(mu);
          cli_ids.push_back(std::stoll(out));
        } else if (rc == 1) {
          ++cli_invalid;
        } else {
          ++cli_other;
        }
      }
    });
  // ...while 100 files land in the spool (50 valid, 50 invalid, half of
  // them in team directories).
  threads.emplace_back([&] {
    for (int i = 0; i < 100; ++i) {
      const int k = (i / 2) % 4;  // a valid and an invalid file in each place
      const fs::path sdir = k < 2 ? d.spool() : d.spool() / (k == 2 ? "teamA" : "teamB");
      spool_write(
          sdir, fmt::format("sp{}.json", i),
          i % 2 == 0 ? campaign_operator(fmt::format("sp{}", i), 2, i).dump(2) : invalid_config(i));
    }
  });
  for (auto& t : threads) t.join();

  EXPECT_EQ(cli_ok, 50);
  EXPECT_EQ(cli_invalid, 50);
  EXPECT_EQ(cli_other, 0);
  EXPECT_EQ(std::set<store::row_id>(cli_ids.begin(), cli_ids.end()).size(), 50u);

  // The spool drains: every file accepted or rejected, none left behind.
  ASSERT_TRUE(eventually([&] { return d.scalar("SELECT count(*) FROM submissions") == 100; }, 120s))
      << d.log();
  ASSERT_TRUE(eventually([&] {
    int left = 0;
    for (const auto& sdir : {d.spool(), d.spool() / "teamA", d.spool() / "teamB"})
      for (const auto& e : fs::directory_iterator(sdir))
        left += e.is_regular_file() && e.path().extension() == ".json";
    return left == 0;
  })) << d.log();
  EXPECT_EQ(d.scalar("SELECT count(*) FROM submissions WHERE status = 'accepted'"), 50);
  EXPECT_EQ(d.scalar("SELECT count(*) FROM submissions WHERE status = 'rejected'"), 50);
  EXPECT_EQ(
      d.scalar("SELECT count(DISTINCT campaign_id) FROM submissions WHERE status = 'accepted'"),
      50);
  EXPECT_EQ(d.scalar("SELECT count(*) FROM campaigns"), 100);  // 50 CLI + 50 spool, no duplicates
  EXPECT_EQ(d.scalar("SELECT count(*) FROM campaigns WHERE team = 'teamA'"), 12);
  EXPECT_EQ(d.scalar("SELECT count(*) FROM campaigns WHERE team = 'teamB'"), 12);
  EXPECT_EQ(files_in(d.spool(), ".error.txt"), 50);
  EXPECT_EQ(files_in(d.spool() / "rejected", ".json") +
                files_in(d.spool() / "teamA/rejected", ".json") +
                files_in(d.spool() / "teamB/rejected", ".json"),
            50);
  // Each error file says what is wrong, with file:line:col.
  const std::string e1 = slurp(d.spool() / "rejected/sp1.json.error.txt");
  EXPECT_NE(e1.find("float33"), std::string::npos) << e1;
  const std::string e5 = slurp(d.spool() / "teamA/rejected/sp5.json.error.txt");
  EXPECT_NE(e5.find("workloads"), std::string::npos) << e5;
  const std::string e7 = slurp(d.spool() / "teamB/rejected/sp7.json.error.txt");
  EXPECT_NE(e7.find("teamB/sp7.json:"), std::string::npos) << e7;
  // Operator names: every valid submission exactly once.
  auto db = d.reader();
  std::multiset<std::string> names;
  for (const auto& c : db.list_campaigns()) names.insert(c.operator_name);
  for (int i = 0; i < 100; i += 2) {
    EXPECT_EQ(names.count(fmt::format("cli{}", i)), 1u) << i;
    EXPECT_EQ(names.count(fmt::format("sp{}", i)), 1u) << i;
  }
  const std::string m = d.get("/metrics").body;
  EXPECT_NE(m.find("kopt_submissions_total{origin=\"spool\",status=\"rejected\"} 50"),
            std::string::npos)
      << m;
  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(10s).has_value());
}

TEST(DaemonQueue, PauseResumeCancelOnARunningDaemon) {
  temp_dir dir;
  daemon_process d(dir.path(), fake_config(100, 1));
  fs::create_directories(d.state());
  auto sub = [&](const std::string& name, int it) {
    const auto f = dir / (name + ".json");
    spit(f, campaign_operator(name, it).dump(2));
    auto [rc, out] =
        run_kopt({"--db", d.db_path().string(), "submit", f.string()}, dir.path(), name);
    EXPECT_EQ(rc, 0);
    return std::stoll(out);
  };
  const auto a = sub("pa", 200);
  const auto b = sub("pb", 3);
  d.spawn();
  d.wait_ready();
  ASSERT_TRUE(eventually([&] { return d.campaign_state(a) == "running"; })) << d.log();
  const std::string db = d.db_path().string();
  auto [rc1, out1] =
      run_kopt({"--db", db, "pause", std::to_string(a), "--json"}, dir.path(), "pause");
  EXPECT_EQ(rc1, 0);
  const json pr = json::parse(out1);
  EXPECT_TRUE(pr["changed"].get<bool>());
  ASSERT_TRUE(eventually([&] { return d.campaign_state(a) == "paused"; })) << d.log();
  // With a paused, b gets the slot and finishes.
  ASSERT_TRUE(eventually([&] { return d.campaign_state(b) == "done"; }, 120s)) << d.log();
  const auto iters =
      d.scalar("SELECT spent_iterations FROM campaigns WHERE id = " + std::to_string(a));
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(d.scalar("SELECT spent_iterations FROM campaigns WHERE id = " + std::to_string(a)),
            iters);  // really paused
  auto [rc2, out2] = run_kopt({"--db", db, "resume", std::to_string(a)}, dir.path(), "resume");
  EXPECT_EQ(rc2, 0) << out2;
  ASSERT_TRUE(eventually([&] {
    return d.scalar("SELECT spent_iterations FROM campaigns WHERE id = " + std::to_string(a)) >
           iters;
  })) << d.log();
  auto [rc3, out3] = run_kopt({"--db", db, "cancel", std::to_string(a)}, dir.path(), "cancel");
  EXPECT_EQ(rc3, 0);
  ASSERT_TRUE(eventually([&] { return d.campaign_state(a) == "cancelled"; })) << d.log();
  // Final states refuse further control with exit code 1; unknown ids 3.
  EXPECT_EQ(run_kopt({"--db", db, "pause", std::to_string(b)}, dir.path(), "p2").first, 1);
  EXPECT_EQ(run_kopt({"--db", db, "resume", "9999"}, dir.path(), "p3").first, 3);
  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(10s).has_value());
}

TEST(DaemonQueue, HttpEndpointsJsonLogsAndOneDaemonPerStateDir) {
  temp_dir dir;
  json cfg = fake_config(10);
  cfg["log"] = {{"format", "json"}, {"level", "debug"}};
  daemon_process d(dir.path(), cfg);
  fs::create_directories(d.state());
  // A spool file whose error message has quotes and newlines in the log.
  spool_write(d.spool(), "weird \"name\".json", "{\n\"x\": \"a\\nb\"");
  spool_write(d.spool(), "ok.json", campaign_operator("httpop", 2).dump(2));
  d.spawn();
  d.wait_ready();
  ASSERT_TRUE(eventually(
      [&] { return d.scalar("SELECT count(*) FROM campaigns WHERE state = 'done'") == 1; }, 120s))
      << d.log();

  auto h = d.get("/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(json::parse(h.body)["state"], "ready");
  auto m = d.get("/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.content_type.find("text/plain"), std::string::npos);
  for (const char* fam :
       {"kopt_campaigns{state=\"done\"} 1", "kopt_evaluations_total{status=\"ok\"}",
        "kopt_gpu_busy_seconds_total{gpu=\"0\"}", "kopt_llm_calls_total", "kopt_llm_tokens_total",
        "kopt_llm_cost_usd_total", "kopt_llm_retries_total", "kopt_daemon_steps_total"})
    EXPECT_NE(m.body.find(fam), std::string::npos) << fam << "\n" << m.body;
  // Every sample line is "name{labels} value" or "name value".
  std::istringstream lines(m.body);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto sp = line.rfind(' ');
    ASSERT_NE(sp, std::string::npos) << line;
    EXPECT_NO_THROW((void)std::stod(line.substr(sp + 1))) << line;
  }
  auto cs = d.get("/api/campaigns");
  ASSERT_EQ(cs.status, 200);
  const json list = json::parse(cs.body);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["operator"], "httpop");
  EXPECT_EQ(list[0]["progress"], 1.0);
  const auto one = d.get("/api/campaigns/" + std::to_string(list[0]["id"].get<int>()));
  ASSERT_EQ(one.status, 200);
  EXPECT_FALSE(json::parse(one.body)["events"].empty());
  EXPECT_EQ(d.get("/api/campaigns/999").status, 404);
  EXPECT_EQ(d.get("/nope").status, 404);
  const auto page = d.get("/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<table"), std::string::npos);

  // A second daemon on the same state directory refuses to start.
  const auto cfgfile = dir / "daemon.json";
  auto [rc, out] = run_kopt({"daemon", "--config", cfgfile.string()}, dir.path(), "second");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(slurp(dir / "second.err").find("another kopt daemon"), std::string::npos)
      << slurp(dir / "second.err");

  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(10s).has_value());
  // JSON logs: every line is one valid JSON object.
  std::istringstream log(d.log());
  int n = 0;
  bool saw_reject = false;
  for (std::string line; std::getline(log, line);) {
    if (line.empty()) continue;
    json j;
    ASSERT_NO_THROW(j = json::parse(line)) << "not JSON: " << line;
    EXPECT_TRUE(j.contains("msg") && j.contains("level") && j.contains("ts")) << line;
    if (j["msg"].get<std::string>().find("weird \"name\".json rejected") != std::string::npos)
      saw_reject = true;
    ++n;
  }
  EXPECT_GT(n, 3);
  EXPECT_TRUE(saw_reject) << d.log();
}
