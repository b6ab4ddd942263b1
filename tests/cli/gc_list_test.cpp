// `kopt list` and `kopt status` paging and `kopt gc` (issue #26) through
// the binary: the default page of 50 with the next page named on stderr,
// --limit 0, --offset; gc's dry run, JSON report, archive and exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../store/temp_dir.hpp"
#include "store/store.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class GcList : public ::testing::Test {
 protected:
  result kopt(const std::vector<std::string>& args) {
    std::string cmd = "env -u KOPT_DB HOME='" + (dir_ / "home").string() + "' '" + KOPT_BIN + "'";
    for (const auto& a : args) cmd += " '" + a + "'";
    cmd += " >'" + (dir_ / "out").string() + "' 2>'" + (dir_ / "err").string() + "'";
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir_ / "out"), slurp(dir_ / "err")};
  }
  std::string db() const { return (dir_ / "kopt.db").string(); }
  // 60 campaigns; campaign 1 is done with two candidates (2 the winner),
  // each with an evaluation holding its samples.
  void fill() {
    auto s = kopt::store::store::open(db());
    s.db().exec(
        "INSERT INTO operators(id, name, op_type, config_json, content_hash, created_at) "
        "VALUES (1, 'op', 'custom', '{}', 'h', 0);"
        "INSERT INTO workloads(id, operator_id, key, position, axes_json, weight) VALUES "
        "(1, 1, 'w', 0, '{}', 1);"
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60) "
        "INSERT INTO campaigns(id, operator_id, provider, settings_json, created_at, updated_at) "
        "SELECT i, 1, 'autotune', '{}', i, i FROM n;"
        "INSERT INTO candidates(id, campaign_id, origin, source, source_hash, launch_plan_json, "
        "created_at) VALUES (1, 1, 'seed', 'a', 'x', '{}', 0), (2, 1, 'tuned', 'b', 'y', '{}', 0);"
        "INSERT INTO evaluations(candidate_id, workload_id, status, median_ns, samples, "
        "timing_json, created_at) VALUES (1, 1, 'ok', 2, 3, '{\"samples_ns\":[1,2,3]}', 0), "
        "(2, 1, 'ok', 1, 3, '{\"samples_ns\":[1,1,1]}', 0);"
        "UPDATE campaigns SET state = 'done', finished_at = 1, best_candidate_id = 2 WHERE id = "
        "1;");
  }
  std::int64_t with_samples() {
    auto s = kopt::store::store::open(db(), {.read_only = true});
    auto st = s.db().prepare(
        "SELECT count(*) FROM evaluations WHERE json_type(timing_json, '$.samples_ns') IS NOT "
        "NULL");
    st.step();
    return st.get_int(0);
  }
  kopt::test::temp_dir dir_;
};

TEST_F(GcList, ListPagesFiftyAtATime) {
  fill();
  auto r = kopt({"--db", db(), "list", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = json::parse(r.out);
  ASSERT_EQ(j.size(), 50u);
  EXPECT_EQ(j[0]["id"], 60);
  EXPECT_NE(r.err.find("50 of 60 campaign(s) shown; next page: --offset 50"), std::string::npos)
      << r.err;
  r = kopt({"--db", db(), "list", "--json", "--offset", "50"});
  j = json::parse(r.out);
  ASSERT_EQ(j.size(), 10u);
  EXPECT_EQ(j[9]["id"], 1);
  EXPECT_EQ(r.err.find("next page"), std::string::npos) << r.err;
  r = kopt({"--db", db(), "list", "--json", "--limit", "0"});
  EXPECT_EQ(json::parse(r.out).size(), 60u);
  r = kopt({"--db", db(), "list", "--limit", "5", "--offset", "5"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.err.find("next page: --offset 10"), std::string::npos) << r.err;
  EXPECT_EQ(kopt({"--db", db(), "list", "--limit", "-1"}).code, 2);
  EXPECT_NE(kopt({"list", "--help"}).out.find("--offset"), std::string::npos);
}

TEST_F(GcList, StatusPagesTheActiveCampaigns) {
  fill();
  {
    auto s = kopt::store::store::open(db());
    s.db().exec(
        "UPDATE campaigns SET state = 'running' WHERE id IN (10, 20);"
        "UPDATE campaigns SET state = 'paused' WHERE id = 30;");
  }
  // 59 active: running 20 and 10, paused 30, then 56 queued (60 .. 2).
  auto r = kopt({"--db", db(), "status", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = json::parse(r.out);
  ASSERT_EQ(j["active"].size(), 50u);
  EXPECT_EQ(j["active_total"], 59);
  EXPECT_EQ(j["campaigns"]["queued"], 56);
  EXPECT_EQ(j["active"][0]["id"], 20);
  EXPECT_EQ(j["active"][1]["id"], 10);
  EXPECT_EQ(j["active"][2]["id"], 30);
  EXPECT_EQ(j["active"][3]["id"], 60);
  EXPECT_NE(r.err.find("50 of 59 active campaign(s) shown; next page: --offset 50"),
            std::string::npos)
      << r.err;
  r = kopt({"--db", db(), "status", "--json", "--offset", "50"});
  j = json::parse(r.out);
  ASSERT_EQ(j["active"].size(), 9u);
  EXPECT_EQ(j["active"][8]["id"], 2);
  EXPECT_EQ(r.err.find("next page"), std::string::npos) << r.err;
  // A page across the states.
  r = kopt({"--db", db(), "status", "--json", "--offset", "2", "--limit", "2"});
  j = json::parse(r.out);
  ASSERT_EQ(j["active"].size(), 2u);
  EXPECT_EQ(j["active"][0]["id"], 30);
  EXPECT_EQ(j["active"][1]["id"], 60);
  r = kopt({"--db", db(), "status", "--json", "--limit", "0"});
  EXPECT_EQ(json::parse(r.out)["active"].size(), 59u);
  r = kopt({"--db", db(), "status", "--limit", "3"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("queued 56"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("3 of 59 active campaign(s) shown; next page: --offset 3"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(kopt({"--db", db(), "status", "--offset", "-1"}).code, 2);
}

TEST_F(GcList, GcDryRunReportsArchivesAndCollects) {
  fill();
  auto r = kopt({"--db", db(), "gc", "--dry-run", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = json::parse(r.out);
  EXPECT_TRUE(j["dry_run"].get<bool>());
  ASSERT_EQ(j["campaigns"].size(), 1u);
  EXPECT_EQ(j["total"]["sample_rows"], 1);  // the loser's, not the winner's
  EXPECT_EQ(with_samples(), 2);

  const auto archive = (dir_ / "archive.db").string();
  r = kopt({"--db", db(), "gc", "--json", "--archive", archive});
  ASSERT_EQ(r.code, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_FALSE(j["dry_run"].get<bool>());
  EXPECT_EQ(j["archive"], archive);
  EXPECT_EQ(j["total"]["sample_rows"], 1);
  EXPECT_EQ(with_samples(), 1);
  {
    auto a = kopt::store::store::open(archive, {.read_only = true});
    auto st = a.db().prepare(
        "SELECT count(*) FROM evaluations WHERE json_type(timing_json, '$.samples_ns') IS NOT "
        "NULL");
    st.step();
    EXPECT_EQ(st.get_int(0), 2) << "the archive is the store before collection";
  }
  r = kopt({"--db", db(), "gc"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("collected 0 finished campaign(s)"), std::string::npos) << r.out;
  EXPECT_EQ(kopt({"--db", db(), "gc", "--archive", archive}).code, 4) << "archive exists";
  EXPECT_EQ(kopt({"--db", db(), "gc", "--campaign", "999"}).code, 3);
  EXPECT_EQ(kopt({"--db", db(), "gc", "--campaign", "2"}).code, 3) << "not finished";
  EXPECT_NE(kopt({"gc", "--help"}).out.find("--dry-run"), std::string::npos);
}

}  // namespace
