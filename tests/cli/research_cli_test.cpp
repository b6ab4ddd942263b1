// The researcher commands of the real `kopt` binary on a campaign store made
// by the loop with the fake evaluator (tests/report/support.hpp): log and
// show candidate (old fields kept, new ones added), diff, lineage, export in
// its three formats, import, report and trace; exit codes on bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "../report/support.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct result {
  int code = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ResearchCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { rs_ = new kopt::test::research_store(); }
  static void TearDownTestSuite() {
    delete rs_;
    rs_ = nullptr;
  }
  result kopt(const std::vector<std::string>& args) {
    std::string cmd = "cd " + quote(dir_.path().string()) + " && " + quote(KOPT_BIN) + " --db " +
                      quote(rs_->db_path().string());
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " >" + quote((dir_ / "o.txt").string()) + " 2>" + quote((dir_ / "e.txt").string());
    const int st = std::system(cmd.c_str());
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(dir_ / "o.txt"), slurp(dir_ / "e.txt")};
  }
  std::string cid() const { return std::to_string(rs_->f.campaign_id); }
  static kopt::test::research_store* rs_;
  kopt::test::temp_dir dir_;
};
kopt::test::research_store* ResearchCli::rs_ = nullptr;

TEST_F(ResearchCli, LogKeepsItsFieldsAndAddsTheResearchOnes) {
  auto r = kopt({"log", cid(), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_GE(j["iterations"].size(), 9u);
  const auto& it1 = j["iterations"][1];
  for (const char* k :
       {"candidates", "compile_errors", "outcomes", "best_candidate_id", "best_score", "llm_calls"})
    EXPECT_TRUE(it1.contains(k)) << k;
  EXPECT_EQ(it1["candidates"], 3);
  EXPECT_EQ(it1["outcome_classes"]["compile_error"], 1);
  EXPECT_EQ(it1["outcome_classes"]["incorrect"], 1);
  EXPECT_EQ(it1["outcome_classes"]["faster"], 1);
  EXPECT_EQ(it1["llm_calls"], 1);
  EXPECT_TRUE(it1["incumbent_sol_fraction"].is_number());
  EXPECT_TRUE(it1.contains("dropout"));
  bool escalated = false;
  for (const auto& it : j["iterations"]) escalated = escalated || !it["escalations"].empty();
  EXPECT_TRUE(escalated);

  r = kopt({"log", cid()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("SO FAR"), std::string::npos);
  EXPECT_NE(r.out.find("1C 1X 1F"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("escalate: higher_p"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("promoted"), std::string::npos) << r.out;
}

TEST_F(ResearchCli, ShowCandidateHasPromptResponseLogsAndCounters) {
  // The first candidate of iteration 1 is linked to its LLM call and did not compile? Find them.
  auto r = kopt({"lineage", cid(), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json lin = json::parse(r.out);
  std::int64_t compile_error = 0;
  for (const auto& n : lin["nodes"])
    if (n["outcome"] == "compile_error" && !compile_error) compile_error = n["id"];
  ASSERT_GT(compile_error, 0);

  r = kopt({"show", "candidate", std::to_string(rs_->best), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_TRUE(j.contains("source"));
  EXPECT_TRUE(j["research"]["is_best"].get<bool>());
  EXPECT_EQ(j["research"]["outcome"], "faster");
  EXPECT_FALSE(j["research"]["llm_calls"].empty());
  EXPECT_NE(j["research"]["llm_calls"][0]["prompt"].get<std::string>().find("Improve this kernel"),
            std::string::npos);
  EXPECT_FALSE(j["research"]["iteration"]["dropout"].empty());

  r = kopt({"show", "candidate", std::to_string(rs_->best)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("counters and diagnosis"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("metrics.dram__throughput.avg.pct_of_peak_sustained_elapsed = 61.5"),
            std::string::npos);
  EXPECT_NE(r.out.find("diagnosis.bottleneck = memory-bound-far-from-peak"), std::string::npos);
  EXPECT_NE(r.out.find("--- prompt"), std::string::npos);
  EXPECT_NE(r.out.find("--- answer"), std::string::npos);
  EXPECT_NE(r.out.find("the campaign's best"), std::string::npos);

  r = kopt({"show", "candidate", std::to_string(compile_error)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("compile log"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("undefined_thing"), std::string::npos);
  EXPECT_NE(r.out.find("outcome        compile_error"), std::string::npos) << r.out;
}

// A candidate whose own call dropped an item its iteration kept: `show
// candidate` lists that item as dropped, marked "(call)". The fixture's
// calls carry no meta, so a copy of the store gets one.
TEST_F(ResearchCli, ShowCandidateListsWhatItsOwnCallDropped) {
  const fs::path copy = dir_ / "copy.db";
  rs_->f.db.db().prepare("VACUUM INTO ?").bind_all(copy.string()).run();
  std::string item;
  {
    auto db = kopt::store::store::open(copy);
    const auto c = db.find_candidate(rs_->best);
    ASSERT_TRUE(c && c->llm_call_id && c->iteration_id);
    for (const auto& dd : db.dropout_decisions_of(*c->iteration_id))
      if (dd.kept && item.empty()) item = dd.item_id;
    ASSERT_FALSE(item.empty()) << "the best's iteration kept no optional item";
    db.db()
        .prepare("UPDATE llm_calls SET request_json = ? WHERE id = ?")
        .bind_all(json{{"meta", {{"call", 1}, {"call_dropped", {item}}}}}.dump(), *c->llm_call_id)
        .run();
  }
  const std::string cmd = "cd " + quote(dir_.path().string()) + " && " + quote(KOPT_BIN) +
                          " --db " + quote(copy.string()) + " show candidate " +
                          std::to_string(rs_->best) + " >o2.txt 2>e2.txt";
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << slurp(dir_ / "e2.txt");
  const std::string out = slurp(dir_ / "o2.txt");
  const auto line = out.find("  dropped      ");
  ASSERT_NE(line, std::string::npos) << out;
  EXPECT_NE(out.substr(line, out.find('\n', line) - line).find(item + " (call)"), std::string::npos)
      << out;
  // And no longer among the kept ones.
  const auto kept_at = out.find("  kept         ");
  ASSERT_NE(kept_at, std::string::npos) << out;
  std::stringstream kept(out.substr(kept_at + 15, out.find('\n', kept_at) - kept_at - 15));
  for (std::string id; std::getline(kept, id, ',');) {
    if (!id.empty() && id[0] == ' ') id.erase(0, 1);
    EXPECT_NE(id, item) << out;
  }
}

TEST_F(ResearchCli, DiffAndLineage) {
  auto r = kopt({"diff", std::to_string(rs_->seed), std::to_string(rs_->best), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json d = json::parse(r.out);
  EXPECT_EQ(d["workloads"].size(), 6u);
  EXPECT_LT(d["weighted_geomean_time_ratio"].get<double>(), 1.0);
  r = kopt({"diff", std::to_string(rs_->seed), std::to_string(rs_->best)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("+++ candidate " + std::to_string(rs_->best)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("weighted geomean speed-up of b over a"), std::string::npos);
  EXPECT_EQ(kopt({"diff", "1", "99999"}).code, 3);
  EXPECT_EQ(kopt({"diff", "1"}).code, 2);

  r = kopt({"lineage", cid()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("seed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::to_string(rs_->best)), std::string::npos);
  r = kopt({"lineage", cid(), "--all"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("`-- "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compile_error"), std::string::npos);
  EXPECT_EQ(kopt({"lineage", "999"}).code, 3);
}

TEST_F(ResearchCli, ExportImportReportTrace) {
  auto r = kopt({"export", cid(), "--format", "csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("campaign_id,candidate_id", 0), 0u);
  r = kopt({"export", cid(), "--format", "jsonl", "-o", "c.jsonl"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(slurp(dir_ / "c.jsonl"));
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    EXPECT_TRUE(json::parse(line).contains("candidate_id"));
    ++lines;
  }
  EXPECT_GT(lines, 10);
  EXPECT_EQ(kopt({"export", cid(), "--format", "flashinfer-trace"}).code, 2);  // needs -o
  EXPECT_EQ(kopt({"export", cid(), "--format", "xml"}).code, 2);
  r = kopt({"export", cid(), "--format", "flashinfer-trace", "-o", "fib", "--top", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "fib/definitions/elementwise/vadd.json"));
  EXPECT_NE(r.out.find("solutions/"), std::string::npos);

  // kopt's extension carries the reference: the config comes back whole.
  r = kopt({"import", "flashinfer-trace", "fib", "-o", "cfg", "--json"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  json imp = json::parse(r.out);
  EXPECT_EQ(imp[0]["status"], "imported");
  // Without it (a definition from elsewhere) there is no reference: a draft.
  json def = json::parse(slurp(dir_ / "fib/definitions/elementwise/vadd.json"));
  def.erase("kopt");
  fs::create_directories(dir_ / "plain/definitions");
  std::ofstream(dir_ / "plain/definitions/vadd.json") << def.dump();
  fs::copy(dir_ / "fib/workloads", dir_ / "plain/workloads", fs::copy_options::recursive);
  r = kopt({"import", "flashinfer-trace", "plain", "-o", "cfg2", "--json"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(json::parse(r.out)[0]["status"], "draft");
  fs::create_directories(dir_ / "refs");
  std::ofstream(dir_ / "refs/vadd.json") << kopt::test::kernel("ref", "out[0] = a[0];").dump();
  r = kopt({"import", "flashinfer-trace", "fib", "-o", "cfg", "--reference-dir", "refs"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("imported  vadd"), std::string::npos) << r.out;
  r = kopt({"validate", (dir_ / "cfg/vadd.json").string()});
  EXPECT_EQ(r.code, 0) << r.out << r.err;

  r = kopt({"report", cid(), "-o", "r.html"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = slurp(dir_ / "r.html");
  EXPECT_NE(html.find("data-chart=\"lineage\""), std::string::npos);
  // Without -o: the attribution tables; --json the same as JSON.
  r = kopt({"report", cid()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("openai/test-model"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("technique attribution"), std::string::npos) << r.out;
  r = kopt({"report", cid(), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json aj = json::parse(r.out);
  ASSERT_EQ(aj.at("models").size(), 1u);
  EXPECT_EQ(aj["models"][0]["calls"], 8);
  EXPECT_FALSE(aj.at("items").empty());
  EXPECT_EQ(kopt({"report", "999"}).code, 3);

  r = kopt({"trace", cid(), "-o", "t.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json t = json::parse(slurp(dir_ / "t.json"));
  EXPECT_GT(t["traceEvents"].size(), 20u);
  EXPECT_EQ(kopt({"trace", "999", "-o", "x.json"}).code, 3);
}

}  // namespace
