// `kopt prompt render` through the real binary: the seed as the parent, no
// database (so the prompt says no measurements are stored), dropout labels
// and the exit codes for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "config/operator.hpp"
#include "store/store.hpp"

namespace {

struct result {
  int code = -1;
  std::string out;
};

// Runs kopt with stderr discarded; a database path that does not exist
// keeps the user's real database out of the test.
result kopt(const std::string& args, std::filesystem::path db = {}) {
  if (db.empty()) {
    db = std::filesystem::temp_directory_path() / "kopt-prompts-cli-test-none.db";
    std::filesystem::remove(db);
  }
  const std::string cmd = std::string("cd '") + KOPT_SOURCE_DIR + "' && KOPT_DB='" + db.string() +
                          "' '" + KOPT_BIN + "' " + args + " 2>/dev/null";
  result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(prompt_cli, renders_the_seed_prompt_without_measurements) {
  const result r = kopt("prompt render configs/examples/rmsnorm.json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("===== system ====="), std::string::npos);
  EXPECT_NE(r.out.find("===== user (first) ====="), std::string::npos);
  EXPECT_NE(r.out.find("## Current kernel (seed)"), std::string::npos);
  EXPECT_NE(r.out.find("No measurements: none are stored for the seed kernel yet."),
            std::string::npos);
}

TEST(prompt_cli, json_output_reports_dropped_items) {
  const result r = kopt(
      "prompt render configs/examples/rmsnorm.json --template revise --drop measurements --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("template"), "revise");
  EXPECT_EQ(j.at("parent"), "seed");
  EXPECT_EQ(j.at("measurements"), false);
  EXPECT_EQ(j.at("dropped_items"), nlohmann::json::array({"measurements"}));
  EXPECT_EQ(j.at("user").get<std::string>().find("No measurements"), std::string::npos);
  EXPECT_NE(j.at("system").get<std::string>().find("```json"), std::string::npos);
}

TEST(prompt_cli, reference_parent_and_bad_input) {
  const result ref =
      kopt("prompt render configs/examples/rmsnorm.json --parent reference --template fix_compile");
  ASSERT_EQ(ref.code, 0);
  EXPECT_NE(ref.out.find("## Current kernel (reference)"), std::string::npos);
  EXPECT_NE(ref.out.find("(no compiler output was recorded)"), std::string::npos);
  EXPECT_EQ(kopt("prompt render configs/examples/rmsnorm.json --template nope").code, 2);
  EXPECT_EQ(kopt("prompt render does-not-exist.json").code, 1);
  EXPECT_EQ(kopt("prompt render configs/examples/rmsnorm.json --prompts-dir /nonexistent").code, 1);
}

// With the seed measured in the store, the prompt shows the measurements.
TEST(prompt_cli, stored_measurements_of_the_seed_are_shown) {
  namespace ks = kopt::store;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kopt-prompts-cli-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto db_path = dir / "kopt.db";
  {
    const auto loaded = kopt::config::load_operator_file(std::filesystem::path(KOPT_SOURCE_DIR) /
                                                         "configs/examples/rmsnorm.json");
    ASSERT_TRUE(loaded.ok());
    const auto& op = *loaded.op;
    ks::store st = ks::store::open(db_path);
    ks::operator_record rec;
    rec.name = op.name;
    rec.op_type = op.op_type;
    rec.config = op.snapshot();
    rec.content_hash = op.content_hash();
    std::vector<ks::workload_record> wl;
    for (std::size_t i = 0; i < op.workloads.size(); ++i) {
      ks::workload_record w;
      w.key = op.workloads[i].id;
      w.position = static_cast<int>(i);
      w.weight = op.workloads[i].weight;
      wl.push_back(w);
    }
    const auto put = st.put_operator(rec, wl);
    ks::campaign_record c;
    c.operator_id = put.operator_id;
    c.provider = "autotune";
    const auto campaign = st.create_campaign(c);
    ks::candidate_record cand;
    cand.campaign_id = campaign;
    cand.origin = ks::candidate_origin::seed;
    cand.source = op.seed->source;
    const auto cid = st.add_candidate(cand);
    for (const auto& w : st.workloads_of(put.operator_id)) {
      if (w.key != "t2048_h4096") continue;
      ks::evaluation_record e;
      e.candidate_id = cid;
      e.workload_id = w.id;
      e.timing.median_ns = 14800.0;
      e.sol_fraction = 0.472;
      st.add_evaluation(e);
    }
  }
  const result r = kopt("prompt render configs/examples/rmsnorm.json --json", db_path);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("measurements"), true);
  const std::string user = j.at("user");
  EXPECT_NE(user.find("| t2048_h4096 | 0.15 | ok | 14.80 | 6.99 | 0.472 |"), std::string::npos)
      << user;
  EXPECT_NE(user.find("over the 1 of 9 workloads measured"), std::string::npos);
}

}  // namespace
