// End-to-end tests of the `kopt` binary: exit codes, stdout/stderr split,
// --json output, database location rules, and reading while another
// connection holds the write lock.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <map>
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
  long ms = 0;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path example(const std::string& name) {
  return fs::path(KOPT_SOURCE_DIR) / "configs" / "examples" / name;
}

class Cli : public ::testing::Test {
 protected:
  // Runs kopt with HOME pointing into the temp dir and the database
  // variables unset unless given, so no test touches the real home.
  result kopt(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
    if (!env.contains("HOME")) env["HOME"] = (dir_ / "home").string();
    std::string cmd = "cd " + quote(dir_.path().string()) + " && env -u KOPT_DB -u XDG_STATE_HOME";
    for (const auto& [k, v] : env) cmd += " " + k + "=" + quote(v);
    cmd += " " + quote(KOPT_BIN);
    for (const auto& a : args) cmd += " " + quote(a);
    const auto out = dir_ / "stdout.txt";
    const auto err = dir_ / "stderr.txt";
    cmd += " >" + quote(out.string()) + " 2>" + quote(err.string());
    const auto t0 = std::chrono::steady_clock::now();
    const int status = std::system(cmd.c_str());
    result r;
    r.ms = static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count());
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  std::string db() const { return (dir_ / "kopt.db").string(); }

  // Submits the rmsnorm example; skips the test when it is not there yet.
  std::int64_t submit_example(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--db", db(), "submit", example("rmsnorm.json").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = kopt(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return std::stoll(r.out);
  }

  kopt::test::temp_dir dir_;
};

#define REQUIRE_EXAMPLE(name)                                                    \
  do {                                                                           \
    if (!fs::exists(example(name))) GTEST_SKIP() << "no configs/examples/" name; \
  } while (0)

}  // namespace

TEST_F(Cli, VersionHelpAndUsageErrors) {
  auto r = kopt({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("kopt 0."), std::string::npos) << r.out;

  r = kopt({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("Examples:"), std::string::npos);
  EXPECT_NE(r.out.find("Exit codes"), std::string::npos);

  r = kopt({});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("subcommand"), std::string::npos) << r.err;

  EXPECT_EQ(kopt({"list", "--frobnicate"}).code, 2);
  EXPECT_EQ(kopt({"list", "--state", "sleeping"}).code, 2);
  EXPECT_EQ(kopt({"show", "campaign", "abc"}).code, 2);
  EXPECT_EQ(kopt({"show"}).code, 2);
  EXPECT_EQ(kopt({"validate"}).code, 2);
}

TEST_F(Cli, ValidatesEveryExampleConfig) {
  const fs::path examples = fs::path(KOPT_SOURCE_DIR) / "configs" / "examples";
  std::vector<std::string> files;
  if (fs::is_directory(examples)) {
    for (const auto& e : fs::directory_iterator(examples)) {
      if (e.path().extension() == ".json") files.push_back(e.path().string());
    }
  }
  if (files.empty()) GTEST_SKIP() << "no configs/examples/*.json yet";
  for (const auto& f : files) {
    auto r = kopt({"validate", f});
    EXPECT_EQ(r.code, 0) << f << "\n" << r.err;
    EXPECT_NE(r.out.find("valid"), std::string::npos);
  }
  std::vector<std::string> args{"validate", "--json"};
  args.insert(args.end(), files.begin(), files.end());
  auto r = kopt(args);
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["valid"].get<bool>());
  EXPECT_EQ(j["files"].size(), files.size());
  for (const auto& f : j["files"]) EXPECT_EQ(f["content_hash"].get<std::string>().size(), 64u);
}

TEST_F(Cli, ValidateReportsInvalidFiles) {
  { std::ofstream(dir_ / "broken.json") << "{\"name\": \"x\",\n  \"op_type\": }\n"; }
  auto r = kopt({"validate", "broken.json", "missing.json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("broken.json:2:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("broken.json: invalid"), std::string::npos) << r.out;

  r = kopt({"validate", "--json", "broken.json"});
  EXPECT_EQ(r.code, 1);
  const json j = json::parse(r.out);  // stdout holds only the JSON document
  EXPECT_FALSE(j["valid"].get<bool>());
  ASSERT_FALSE(j["files"][0]["diagnostics"].empty());
  EXPECT_EQ(j["files"][0]["diagnostics"][0]["level"], "error");
  EXPECT_EQ(j["files"][0]["diagnostics"][0]["line"], 2);
  EXPECT_TRUE(r.err.empty()) << r.err;

  // submit refuses it and creates nothing.
  r = kopt({"--db", db(), "submit", "broken.json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nothing submitted"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db()));
}

TEST_F(Cli, SubmitListShowStatusLog) {
  REQUIRE_EXAMPLE("rmsnorm.json");
  auto r = kopt({"--db", db(), "submit", example("rmsnorm.json").string(), "--priority", "7",
                 "--team", "inference"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::int64_t id = std::stoll(r.out);  // stdout is just the id
  EXPECT_EQ(r.out, std::to_string(id) + "\n");
  EXPECT_NE(r.err.find("queued campaign"), std::string::npos);

  r = kopt({"submit", example("rmsnorm.json").string(), "--json", "--db", db()});
  ASSERT_EQ(r.code, 0) << r.err;
  const json second = json::parse(r.out);
  EXPECT_EQ(second["campaign_id"], id + 1);
  EXPECT_FALSE(second["new_operator"].get<bool>());  // same content hash, same operator row

  r = kopt({"--db", db(), "list", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json list = json::parse(r.out);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1]["id"], id);
  EXPECT_EQ(list[1]["state"], "queued");
  EXPECT_EQ(list[1]["priority"], 7);
  EXPECT_EQ(list[1]["team"], "inference");
  EXPECT_EQ(list[1]["operator_id"], second["operator_id"]);

  r = kopt({"--db", db(), "list", "--json", "--team", "inference"});
  EXPECT_EQ(json::parse(r.out).size(), 1u);
  r = kopt({"--db", db(), "list", "--json", "--state", "running"});
  EXPECT_TRUE(json::parse(r.out).empty());
  r = kopt({"--db", db(), "list"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("STATE"), std::string::npos);
  EXPECT_NE(r.out.find("inference"), std::string::npos);

  r = kopt({"--db", db(), "show", "campaign", std::to_string(id), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json show = json::parse(r.out);
  EXPECT_EQ(show["id"], id);
  EXPECT_EQ(show["state"], "queued");
  EXPECT_FALSE(show["workloads"].empty());
  EXPECT_EQ(show["operator_record"]["content_hash"], second["content_hash"]);
  EXPECT_TRUE(show["operator_record"]["config"].is_object());
  EXPECT_EQ(show["events"][0]["kind"], "submitted");
  EXPECT_TRUE(show["settings"].contains("provider"));

  r = kopt({"--db", db(), "show", "campaign", std::to_string(id)});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("workloads"), std::string::npos);

  r = kopt({"--db", db(), "status", std::to_string(id), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["iterations"], 0);
  r = kopt({"--db", db(), "status", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["campaigns"]["queued"], 2);

  r = kopt({"--db", db(), "log", std::to_string(id), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out)["iterations"].empty());

  EXPECT_EQ(kopt({"--db", db(), "show", "campaign", "999"}).code, 3);
  EXPECT_EQ(kopt({"--db", db(), "show", "candidate", "999"}).code, 3);
  EXPECT_EQ(kopt({"--db", db(), "status", "999"}).code, 3);
  r = kopt({"--db", db(), "log", "999"});
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("no campaign 999"), std::string::npos) << r.err;
}

TEST_F(Cli, ShowCandidateAndLogFromStoredRows) {
  REQUIRE_EXAMPLE("rmsnorm.json");
  const std::int64_t id = submit_example();
  kopt::store::row_id cand = 0;
  {
    // What the campaign loop will write, written here through the store API.
    auto s = kopt::store::store::open(db());
    const auto c = s.find_campaign(id);
    const auto wl = s.workloads_of(c->operator_id);
    kopt::store::iteration_record it;
    it.campaign_id = id;
    it.number = 1;
    it.strategy = "improve";
    const auto iter = s.add_iteration(it);
    kopt::store::candidate_record k;
    k.campaign_id = id;
    k.iteration_id = iter;
    k.origin = kopt::store::candidate_origin::llm;
    k.source = "extern \"C\" __global__ void k() {}\n";
    cand = s.add_candidate(k);
    kopt::store::evaluation_record e;
    e.candidate_id = cand;
    e.workload_id = wl.at(0).id;
    e.timing.median_ns = 12345.0;
    e.sol_fraction = 0.5;
    s.add_evaluation(e);
    s.finish_iteration(iter, "done");
  }
  auto r = kopt({"--db", db(), "show", "candidate", std::to_string(cand), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["origin"], "llm");
  EXPECT_NE(j["source"].get<std::string>().find("__global__"), std::string::npos);
  EXPECT_EQ(j["evaluations"][0]["timing"]["median_ns"], 12345.0);

  r = kopt({"--db", db(), "show", "candidate", std::to_string(cand)});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("12.35 us"), std::string::npos) << r.out;

  r = kopt({"--db", db(), "log", std::to_string(id), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json log = json::parse(r.out);
  ASSERT_EQ(log["iterations"].size(), 1u);
  EXPECT_EQ(log["iterations"][0]["candidates"], 1);
  EXPECT_EQ(log["iterations"][0]["best_candidate_id"], cand);
  r = kopt({"--db", db(), "log", std::to_string(id)});
  EXPECT_NE(r.out.find("improve"), std::string::npos) << r.out;
}

TEST_F(Cli, DatabaseLocationPrecedence) {
  REQUIRE_EXAMPLE("rmsnorm.json");
  const std::string cfg = example("rmsnorm.json").string();
  const std::string env_db = (dir_ / "env/k.db").string();
  const std::string flag_db = (dir_ / "flag/k.db").string();

  auto r = kopt({"--db", flag_db, "submit", cfg}, {{"KOPT_DB", env_db}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(flag_db));
  EXPECT_FALSE(fs::exists(env_db));

  r = kopt({"submit", cfg}, {{"KOPT_DB", env_db}, {"XDG_STATE_HOME", (dir_ / "xdg").string()}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(env_db));
  EXPECT_FALSE(fs::exists(dir_ / "xdg"));

  r = kopt({"submit", cfg}, {{"XDG_STATE_HOME", (dir_ / "xdg").string()}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "xdg/kopt/kopt.db"));  // directories created

  r = kopt({"submit", cfg});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "home/.local/state/kopt/kopt.db"));

  // Readers follow the same rules: the env database holds one campaign.
  r = kopt({"list", "--json"}, {{"KOPT_DB", env_db}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).size(), 1u);
}

TEST_F(Cli, BadDatabasePathsAreStoreErrors) {
  REQUIRE_EXAMPLE("rmsnorm.json");
  const std::string cfg = example("rmsnorm.json").string();
  { std::ofstream(dir_ / "plainfile") << "x"; }
  const std::string under_file = (dir_ / "plainfile/sub/k.db").string();
  auto r = kopt({"--db", under_file, "submit", cfg});
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find((dir_ / "plainfile").string()), std::string::npos) << r.err;

  r = kopt({"--db", dir_.path().string(), "submit", cfg});
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;

  // A text file is not a database; a foreign SQLite file is refused.
  r = kopt({"--db", (dir_ / "plainfile").string(), "list"});
  EXPECT_EQ(r.code, 4);
  EXPECT_FALSE(r.err.empty());
  {
    kopt::store::database other(dir_ / "other.db",
                                kopt::store::database::open_mode::read_write_create);
    other.exec("PRAGMA application_id = 7; CREATE TABLE t(x)");
  }
  r = kopt({"--db", (dir_ / "other.db").string(), "submit", cfg});
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("not a kopt database"), std::string::npos) << r.err;

  // No database yet: list is empty, show is "not found".
  r = kopt({"--db", (dir_ / "none.db").string(), "list", "--json"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(json::parse(r.out).empty());
  EXPECT_EQ(kopt({"--db", (dir_ / "none.db").string(), "show", "campaign", "1"}).code, 3);
  EXPECT_FALSE(fs::exists(dir_ / "none.db"));
}

TEST_F(Cli, ReadsWhileAnotherConnectionHoldsTheWriteLock) {
  REQUIRE_EXAMPLE("rmsnorm.json");
  const std::int64_t id = submit_example();
  auto writer = kopt::store::store::open(db());
  kopt::store::transaction tx(writer.db());  // BEGIN IMMEDIATE: the write lock
  kopt::store::event_record ev;
  ev.campaign_id = id;
  ev.kind = "uncommitted";
  ev.message = "not visible to readers";
  writer.add_event(ev);

  auto r = kopt({"--db", db(), "list", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).size(), 1u);
  EXPECT_LT(r.ms, 4000);  // no wait for the busy timeout (5 s)
  r = kopt({"--db", db(), "show", "campaign", std::to_string(id), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json shown = json::parse(r.out);
  ASSERT_FALSE(shown["events"].empty());
  for (const auto& e : shown["events"]) EXPECT_NE(e["kind"], "uncommitted");

  // A second writer waits for its busy timeout, then says why.
  r = kopt({"--db", db(), "--busy-timeout-ms", "200", "submit", example("rmsnorm.json").string()});
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("locked"), std::string::npos) << r.err;

  tx.commit();
  r = kopt({"--db", db(), "submit", example("rmsnorm.json").string()});
  EXPECT_EQ(r.code, 0) << r.err;
}

// `kopt prompt render --candidate ID`: a stored candidate as the parent. The
// evaluation without a GPU stores the config's candidates (and exits 5), which
// gives the store something to render from.
TEST_F(Cli, PromptRenderTakesAStoredCandidateAsTheParent) {
  REQUIRE_EXAMPLE("rmsnorm.json");
  auto r = kopt({"--db", db(), "eval", example("rmsnorm.json").string()});
  if (r.code == 0) GTEST_SKIP() << "a GPU is present: this test covers the no-GPU path";
  if (r.code == 2) GTEST_SKIP() << "kopt was built without the worker part (no `kopt eval`)";
  ASSERT_EQ(r.code, 5) << r.err;
  r = kopt({"--db", db(), "prompt", "render", example("rmsnorm.json").string(), "--candidate", "1", "--template",
            "revise"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("## Current kernel (candidate 1)"), std::string::npos) << r.out.substr(0, 2000);
  r = kopt({"--db", db(), "prompt", "render", example("rmsnorm.json").string(), "--candidate", "99"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("no candidate 99"), std::string::npos) << r.err;
}

// The README's main job without a GPU: compile checks, the campaign kept,
// exit 5 (it ended in an internal error, exit 10, while `kopt run` read an
// option it never registered).
TEST_F(Cli, RunTheExampleWithoutAGpuExitsFive) {
  REQUIRE_EXAMPLE("rmsnorm.json");
  auto r = kopt({"--db", db(), "run", example("rmsnorm.json").string()});
  if (r.code == 0) GTEST_SKIP() << "a GPU is present: this test covers the no-GPU path";
  if (r.code == 2) GTEST_SKIP() << "kopt was built without the worker part";
  EXPECT_EQ(r.code, 5) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  r = kopt({"--db", db(), "run", example("rmsnorm.json").string(), "--counters", "bogus"});
  EXPECT_EQ(r.code, 2) << r.err;  // a usage error, named
  EXPECT_NE(r.err.find("--counters"), std::string::npos) << r.err;
}
