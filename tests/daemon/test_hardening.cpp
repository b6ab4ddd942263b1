// Issue 18, the daemon: one bad spool file never stops the spool (a name
// that is not UTF-8, a number no double holds, a symlink, between two good
// files that both become campaigns), a spooled config never reads a file
// outside its team's spool directory or one of the daemon's API key files
// (and nothing of such a file reaches the store), one daemon per database,
// SIGHUP with restart-only changes changes nothing, the daemon config's
// duplicate keys and huge numbers are located errors, `--check` prints
// every default and warns about an HTTP address other machines can reach;
// the HTTP threads run with the configured scheduling slice (issue 26).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>

#include "common/error.hpp"
#include "daemon/config.hpp"
#include "daemon/queue.hpp"
#include "daemon/spool_file.hpp"
#include "support.hpp"

using namespace kopt;
using namespace kopt::test;
using json = nlohmann::json;

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
  // Every text the store holds about operators and submissions.
  std::string stored_text() {
    std::string all;
    for (const char* q :
         {"SELECT coalesce(group_concat(config_json, ' '), '') FROM operators",
          "SELECT coalesce(group_concat(coalesce(error, ''), ' '), '') FROM submissions",
          "SELECT coalesce(group_concat(coalesce(message, '') || coalesce(data_json, ''), ' '), "
          "'') "
          "FROM events"}) {
      auto st = db.db().prepare(q);
      if (st.step()) all += st.get_text(0);
    }
    return all;
  }
};

json fake_config(int delay_ms) {
  return {{"evaluator", "fake"}, {"gpus", 1}, {"fake", {{"delay_ms", delay_ms}}}};
}

std::string config_error_of_text(const std::string& text) {
  try {
    daemon::load_config_text(text, "/tmp/d.json");
  } catch (const kopt::config_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(SpoolHardening, PoisonedFilesBetweenTwoGoodOnesAreRejectedAndTheGoodOnesQueued) {
  store_fixture f;
  spool_write(f.spool, "a_good.json", campaign_operator("first", 2).dump(2));
  // A name that is not UTF-8: before, nlohmann's dump threw type_error 316
  // out of scan_spool, every poll, and every file after it stayed pending.
  spool_write(f.spool, "b_latin1_\xe9t\xe9.json", campaign_operator("latin", 2).dump(2));
  // A number no double holds: before, an "internal error ... number overflow".
  auto huge = campaign_operator("huge", 2).dump(2);
  huge.replace(huge.find("\"weight\": 0.2"), 13, "\"weight\": 1e400");
  spool_write(f.spool, "c_huge.json", huge);
  // A symlink: before, skipped silently forever.
  spit(f.dir / "elsewhere.json", campaign_operator("linked", 2).dump(2));
  fs::create_symlink(f.dir / "elsewhere.json", f.spool / "d_link.json");
  spool_write(f.spool, "e_good.json", campaign_operator("second", 2).dump(2));

  daemon::spool_report rep;
  ASSERT_NO_THROW(rep = daemon::scan_spool(f.db, f.spool, 1 << 20));
  EXPECT_EQ(rep.accepted, 2);
  EXPECT_EQ(rep.rejected, 3);
  EXPECT_EQ(f.count("SELECT count(*) FROM campaigns"), 2);
  {
    auto st = f.db.db().prepare(
        "SELECT group_concat(o.name, ',') FROM campaigns c JOIN operators o ON o.id = "
        "c.operator_id");
    ASSERT_TRUE(st.step());
    const std::string names = st.get_text(0);
    EXPECT_NE(names.find("first"), std::string::npos) << names;
    EXPECT_NE(names.find("second"), std::string::npos) << names;
  }
  // Each poisoned file is in rejected/ with its reason.
  const auto why_latin = slurp(f.spool / "rejected" / "b_latin1_\xe9t\xe9.json.error.txt");
  EXPECT_NE(why_latin.find("not valid UTF-8"), std::string::npos) << why_latin;
  EXPECT_NE(why_latin.find("b_latin1_\\xe9t\\xe9.json"), std::string::npos) << why_latin;
  const auto why_huge = slurp(f.spool / "rejected" / "c_huge.json.error.txt");
  EXPECT_NE(why_huge.find("c_huge.json:"), std::string::npos) << why_huge;
  EXPECT_NE(why_huge.find("out of the range of a double"), std::string::npos) << why_huge;
  const auto why_link = slurp(f.spool / "rejected" / "d_link.json.error.txt");
  EXPECT_NE(why_link.find("symbolic link"), std::string::npos) << why_link;
  EXPECT_TRUE(
      fs::is_symlink(f.spool / "rejected" / "d_link.json"));  // the link moved, not its target
  EXPECT_TRUE(fs::exists(f.dir / "elsewhere.json"));
  // Nothing is left pending, and a second pass has nothing to do.
  EXPECT_FALSE(fs::exists(f.spool / "a_good.json"));
  EXPECT_FALSE(fs::exists(f.spool / "e_good.json"));
  const auto again = daemon::scan_spool(f.db, f.spool, 1 << 20);
  EXPECT_EQ(again.accepted + again.rejected + again.already_done, 0);
}

TEST(SpoolHardening, ALinkedTeamDirectoryIsRejectedNotFollowed) {
  store_fixture f;
  fs::create_directories(f.dir / "other");
  spit(f.dir / "other" / "op.json", campaign_operator("via_link", 2).dump(2));
  fs::create_directories(f.spool);
  fs::create_directory_symlink(f.dir / "other", f.spool / "team");
  const auto rep = daemon::scan_spool(f.db, f.spool, 1 << 20);
  EXPECT_EQ(rep.accepted, 0);
  EXPECT_EQ(rep.rejected, 1);
  EXPECT_EQ(f.count("SELECT count(*) FROM campaigns"), 0);
  EXPECT_TRUE(fs::exists(f.dir / "other" / "op.json"));  // never touched
  EXPECT_NE(slurp(f.spool / "rejected" / "team.error.txt").find("symbolic link"),
            std::string::npos);
}

TEST(SpoolHardening, ASourceFileOutsideTheSpoolIsRejectedAndNothingOfItIsStored) {
  store_fixture f;
  const std::string secret = "SECRET-SHADOW-CONTENT-4711";
  spit(f.dir / "shadow", "root:$6$" + secret + ":19000:0:99999:7:::\n");
  spit(f.dir / "kernel.cu", "extern \"C\" __global__ void k() {} // " + secret + "\n");
  fs::create_directories(f.spool / "team");
  fs::create_symlink(f.dir / "kernel.cu", f.spool / "team" / "linked.cu");
  int n = 0;
  for (const std::string src :
       {(f.dir / "shadow").string(), std::string("../../kernel.cu"), std::string("linked.cu")}) {
    auto op = campaign_operator("leak" + std::to_string(n), 2);
    op["reference"].erase("source");
    op["reference"]["source_file"] = src;
    spool_write(f.spool / "team", "leak" + std::to_string(n++) + ".json", op.dump(2));
  }
  // Inside the team's directory: allowed.
  spit(f.spool / "team" / "mine.cu", "extern \"C\" __global__ void ref() {} // mine\n");
  auto ok = campaign_operator("mine", 2);
  ok["reference"].erase("source");
  ok["reference"]["source_file"] = "mine.cu";
  spool_write(f.spool / "team", "mine.json", ok.dump(2));

  const auto rep = daemon::scan_spool(f.db, f.spool, 1 << 20);
  EXPECT_EQ(rep.rejected, 3);
  EXPECT_EQ(rep.accepted, 1);
  for (int i = 0; i < 3; ++i) {
    const auto why =
        slurp(f.spool / "team" / "rejected" / ("leak" + std::to_string(i) + ".json.error.txt"));
    EXPECT_NE(why.find("outside this config's spool directory"), std::string::npos) << why;
  }
  EXPECT_EQ(f.stored_text().find(secret), std::string::npos)
      << "a file outside the spool reached the store";
  EXPECT_NE(f.stored_text().find("// mine"), std::string::npos);
}

TEST(SpoolHardening, TheDaemonsApiKeyFileIsNeverRead) {
  store_fixture f;
  const fs::path key = f.dir / "openai.key";
  spit(key, "sk-proj-SECRETKEY0123456789abcdef\n");
  ::chmod(key.c_str(), 0600);
  fs::create_directories(f.spool);
  fs::create_hard_link(key, f.spool / "k.cu");  // inside the spool, the key's inode
  auto op = campaign_operator("keyleak", 2);
  op["seed"].erase("source");
  op["seed"]["source_file"] = "k.cu";
  spool_write(f.spool, "keyleak.json", op.dump(2));
  const auto rep = daemon::scan_spool(f.db, f.spool, 1 << 20, {key});
  EXPECT_EQ(rep.rejected, 1);
  const auto why = slurp(f.spool / "rejected" / "keyleak.json.error.txt");
  EXPECT_NE(why.find("API key file"), std::string::npos) << why;
  EXPECT_EQ(f.stored_text().find("SECRETKEY"), std::string::npos);
  EXPECT_EQ(why.find("SECRETKEY"), std::string::npos);
}

TEST(SpoolHardening, TheVerdictNeverThrows) {
  // The fuzz target's property on a few inputs that once threw.
  for (const std::string content : {std::string("{\"a\": 1e400}"), std::string("{\"a\": \"\xff\"}"),
                                    std::string("\xef\xbb\xbf{"), std::string(300, '[')}) {
    daemon::spool_verdict v;
    ASSERT_NO_THROW(v = daemon::examine_spool_file("x\xff.json", daemon::spool_entry_kind::regular,
                                                   static_cast<std::int64_t>(content.size()),
                                                   1 << 20, content, "/nonexistent", {}));
    EXPECT_FALSE(v.op.has_value());
    EXPECT_FALSE(v.error.empty());
    EXPECT_NO_THROW((void)json(v.error).dump());
  }
}

TEST(DaemonConfigHardening, DuplicateKeysAndHugeNumbersAreLocatedErrors) {
  std::string e = config_error_of_text("{\n  \"state_dir\": \"a\",\n  \"state_dir\": \"b\"\n}");
  EXPECT_NE(e.find("/tmp/d.json:3:3: duplicate key \"state_dir\""), std::string::npos) << e;
  e = config_error_of_text("{\"state_dir\": \"a\", \"limits\": {\"backoff_max_s\": 1e400}}");
  EXPECT_NE(e.find("out of the range of a double"), std::string::npos) << e;
  e = config_error_of_text("{\"state_dir\": \"a\", \"http\": {\"port\": 1, \"port\": 2}}");
  EXPECT_NE(e.find("duplicate key \"port\""), std::string::npos) << e;
}

TEST(DaemonConfigHardening, AnAddressOtherMachinesReachIsWarnedAbout) {
  auto c = daemon::parse_config({{"state_dir", "s"}}, "/tmp/d.json");
  EXPECT_TRUE(daemon::config_warnings(c).empty());
  c = daemon::parse_config({{"state_dir", "s"}, {"http", {{"address", "0.0.0.0"}}}}, "/tmp/d.json");
  const auto w = daemon::config_warnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("NO authentication"), std::string::npos) << w[0];
  c = daemon::parse_config(
      {{"state_dir", "s"}, {"http", {{"address", "0.0.0.0"}, {"enabled", false}}}}, "/tmp/d.json");
  EXPECT_TRUE(daemon::config_warnings(c).empty());
}

TEST(DaemonConfigHardening, CheckPrintsEveryDefault) {
  temp_dir dir;
  const json cfg = {
      {"state_dir", "state"},
      {"http", {{"address", "0.0.0.0"}}},
      {"providers", {{"openai", {{"model", "gpt-x"}, {"api_key_env", "OPENAI_API_KEY"}}}}}};
  spit(dir / "daemon.json", cfg.dump(2));
  auto [rc, out] = run_kopt({"daemon", "--config", (dir / "daemon.json").string(), "--check"},
                            dir.path(), "check");
  ASSERT_EQ(rc, 0) << slurp(dir / "check.err");
  const json j = json::parse(out);
  for (const char* k : {"hello_timeout_s", "silence_timeout_s", "max_restarts", "seeds",
                        "min_time_s", "max_time_s", "launch_timeout_ms", "peaks_file"})
    EXPECT_TRUE(j.at("worker").contains(k)) << k << "\n" << out;
  EXPECT_EQ(j.at("worker").at("seeds"), 3);
  EXPECT_EQ(j.at("worker").at("hello_timeout_s"), 180.0);
  ASSERT_TRUE(j.at("providers").contains("openai")) << out;
  const json& p = j.at("providers").at("openai");
  EXPECT_EQ(p.at("model"), "gpt-x");
  EXPECT_EQ(p.at("timeouts").at("connect_s"), 10.0);
  EXPECT_EQ(p.at("retry").at("max_attempts"), 5);
  EXPECT_EQ(p.at("limits").at("concurrency"), 4);
  EXPECT_TRUE(j.contains("fake"));
  EXPECT_NE(slurp(dir / "check.err").find("WARNING: http.address is \"0.0.0.0\""),
            std::string::npos)
      << slurp(dir / "check.err");
}

TEST(DaemonHardening, ASecondDaemonOnTheSameDatabaseRefusesToStart) {
  temp_dir dir;
  fs::create_directories(dir / "one");
  fs::create_directories(dir / "two");
  const fs::path db = dir / "shared.db";
  json c1 = fake_config(10);
  c1["database"] = db.string();
  daemon_process d1(dir / "one", c1);
  d1.spawn();
  d1.wait_ready();
  // Another state directory, the same database (by another path, through a
  // symlinked directory: the lock is on the database's real path).
  fs::create_directory_symlink(dir.path(), dir / "alias");
  json c2 = fake_config(10);
  c2["state_dir"] = (dir / "two" / "state").string();
  c2["database"] = (dir / "alias" / "shared.db").string();
  c2["http"] = {{"port", 0}};
  spit(dir / "two" / "daemon.json", c2.dump(2));
  auto [rc, out] = run_kopt({"daemon", "--config", (dir / "two" / "daemon.json").string()},
                            dir.path(), "second");
  EXPECT_EQ(rc, 1);
  const std::string err = slurp(dir / "second.err");
  EXPECT_NE(err.find("another kopt daemon"), std::string::npos) << err;
  EXPECT_NE(err.find("one daemon per database"), std::string::npos) << err;
  EXPECT_TRUE(d1.alive());
  d1.signal(SIGTERM);
  ASSERT_TRUE(d1.wait_exit(10s).has_value());
}

TEST(DaemonHardening, SighupWithRestartOnlyChangesChangesNothing) {
  temp_dir dir;
  daemon_process d(dir.path(), fake_config(10));
  d.spawn();
  d.wait_ready();
  const json before = json::parse(d.get("/api/daemon").body);
  // A new state_dir (which moves the default spool) and a new limit in one
  // edit: the reload is refused as a whole.
  d.config()["state_dir"] = (dir / "elsewhere").string();
  d.config()["limits"]["max_active_campaigns"] = 7;
  d.write_config();
  d.signal(SIGHUP);
  ASSERT_TRUE(eventually(
      [&] { return d.log().find("reload refused, nothing changed") != std::string::npos; }, 30s))
      << d.log();
  EXPECT_NE(d.log().find("state_dir"), std::string::npos);
  const json after = json::parse(d.get("/api/daemon").body);
  EXPECT_EQ(after["limits"], before["limits"]);
  // The spool is still the old one.
  spool_write(d.spool(), "still.json", campaign_operator("still_here", 2).dump(2));
  ASSERT_TRUE(eventually([&] { return d.scalar("SELECT count(*) FROM campaigns") == 1; }, 60s))
      << d.log();
  EXPECT_FALSE(fs::exists(dir / "elsewhere" / "spool"));
  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(10s).has_value());
}

// Issue #26: the HTTP threads (the accepting one and the pool's) ask for
// http.slice_us, so a scrape is not queued behind busy step threads. Read
// off /proc: the kernel's own view of each thread's slice.
TEST(DaemonHardening, HttpThreadsRunWithTheConfiguredSchedulingSlice) {
  temp_dir dir;
  json cfg = fake_config(10);
  cfg["http"] = {{"port", 0}, {"slice_us", 350}};
  daemon_process d(dir.path(), cfg);
  d.spawn();
  d.wait_ready();
  // Several requests, so more than one pool thread has served one.
  for (int i = 0; i < 16; ++i) EXPECT_EQ(d.get("/metrics").status, 200);
  // Each HTTP thread keeps its store connection between scrapes: a kept
  // connection must see what was committed after it was opened.
  spool_write(d.spool(), "later.json", campaign_operator("later", 2).dump(2));
  ASSERT_TRUE(eventually(
      [&] { return d.scalar("SELECT count(*) FROM campaigns WHERE state = 'done'") == 1; }, 120s))
      << d.log();
  for (int i = 0; i < 16; ++i)
    EXPECT_NE(d.get("/metrics").body.find("kopt_campaigns{state=\"done\"} 1\n"), std::string::npos)
        << i;
  std::map<long, int> slices;  // slice in us -> threads
  bool reported = false;
  for (const auto& t :
       fs::directory_iterator(fs::path("/proc") / std::to_string(d.pid()) / "task")) {
    std::istringstream in(slurp(t.path() / "sched"));
    for (std::string line; std::getline(in, line);)
      if (line.rfind("se.slice", 0) == 0) {
        reported = true;
        ++slices[std::stol(line.substr(line.find(':') + 1)) / 1000];
      }
  }
  const std::string log = d.log();
  d.signal(SIGTERM);
  ASSERT_TRUE(d.wait_exit(10s).has_value());
  if (log.find("keep the default scheduling slice") != std::string::npos) {
    EXPECT_EQ(slices.count(350), 0u);
    GTEST_SKIP() << "this kernel has no custom scheduling slices: "
                 << log.substr(log.find("keep the default scheduling slice"), 120);
  }
  ASSERT_TRUE(reported) << "no se.slice in /proc/PID/task/*/sched";
  EXPECT_NE(log.find("HTTP threads run with a 350 us scheduling slice"), std::string::npos) << log;
  // The acceptor and at least one handler thread; the daemon's other
  // threads (main, steps, pool starters) keep the default.
  EXPECT_GE(slices[350], 2) << "threads per slice: " << json(slices).dump();
  EXPECT_GE(slices.size(), 2u) << json(slices).dump();
}

TEST(DaemonConfigHardening, TheHttpSliceIsRangeChecked) {
  EXPECT_EQ(daemon::parse_config({{"state_dir", "s"}}, "/tmp/d.json").http.slice_us, 200);
  EXPECT_EQ(daemon::parse_config({{"state_dir", "s"}, {"http", {{"slice_us", 0}}}}, "/tmp/d.json")
                .http.slice_us,
            0);
  for (const json& bad : {json(-1), json(100001), json("fast")}) {
    try {
      daemon::parse_config({{"state_dir", "s"}, {"http", {{"slice_us", bad}}}}, "/tmp/d.json");
      ADD_FAILURE() << "accepted http.slice_us = " << bad.dump();
    } catch (const kopt::config_error& e) {
      EXPECT_NE(std::string(e.what()).find("slice_us"), std::string::npos) << e.what();
    }
  }
  const auto c =
      daemon::parse_config({{"state_dir", "s"}, {"http", {{"slice_us", 500}}}}, "/tmp/d.json");
  EXPECT_EQ(c.to_json().at("http").at("slice_us"), 500);
}
