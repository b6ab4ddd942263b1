// kopt::report on a realistic campaign store (tests/report/support.hpp):
// outcome classes per iteration, scores and the path to the best, the log,
// lineage and diff views, the line diff, exports (JSON lines, CSV,
// FlashInfer-Trace) and the import back, the Chrome trace, and the HTML
// report's structure (every chart drawn with data, nothing external).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "common/error.hpp"
#include "report/data.hpp"
#include "report/exchange.hpp"
#include "report/html.hpp"
#include "report/models.hpp"
#include "report/trace.hpp"
#include "report/views.hpp"
#include "support.hpp"

namespace kopt::report {
namespace {

using json = nlohmann::json;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Report : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { rs_ = new test::research_store(); }
  static void TearDownTestSuite() {
    delete rs_;
    rs_ = nullptr;
  }
  static store::store reader() { return store::store::open(rs_->db_path(), {.read_only = true}); }
  static test::research_store* rs_;
};
test::research_store* Report::rs_ = nullptr;

TEST_F(Report, OutcomesFollowTheScriptedCandidates) {
  auto db = reader();
  const auto d = load_campaign(db, rs_->f.campaign_id);
  ASSERT_GE(d.iterations.size(), 9u);  // set-up + 8
  // Iteration 1: 0.85 (faster than the seed's 1.0), nocompile, broken.
  const auto* it1 = d.iteration(1);
  ASSERT_NE(it1, nullptr);
  EXPECT_EQ(it1->outcomes.at(outcome::faster), 1);
  EXPECT_EQ(it1->outcomes.at(outcome::compile_error), 1);
  EXPECT_EQ(it1->outcomes.at(outcome::incorrect), 1);
  // Iteration 2: parent is 0.85: 0.9 and 1.3 are slower, cheat is rejected.
  const auto* it2 = d.iteration(2);
  EXPECT_EQ(it2->outcomes.at(outcome::integrity), 1);
  EXPECT_EQ(it2->outcomes.at(outcome::slower), 2);
  EXPECT_FALSE(it2->outcomes.count(outcome::faster));
  // Set-up candidates are the start, not outcomes of the loop.
  const auto* it0 = d.iteration(0);
  EXPECT_TRUE(it0->outcomes.empty());
  for (auto id : it0->candidates) EXPECT_EQ(d.view(id)->result, outcome::start);
  // Every loop candidate has a class; totals match the script.
  std::map<outcome, std::int64_t> total;
  for (const auto& iv : d.iterations)
    for (const auto& [o, n] : iv.outcomes) total[o] += n;
  EXPECT_EQ(total[outcome::compile_error], 2);
  EXPECT_EQ(total[outcome::incorrect], 2);
  EXPECT_EQ(total[outcome::integrity], 2);
}

TEST_F(Report, BestPathIncumbentAndAttribution) {
  auto db = reader();
  const auto d = load_campaign(db, rs_->f.campaign_id);
  ASSERT_GE(d.best_path.size(), 3u);
  EXPECT_EQ(d.best_path.front(), rs_->seed);
  EXPECT_EQ(d.best_path.back(), rs_->best);
  // Scores rise along the path (each step was promoted for being faster).
  for (std::size_t i = 1; i < d.best_path.size(); ++i)
    EXPECT_GT(*d.view(d.best_path[i])->score, *d.view(d.best_path[i - 1])->score);
  // The incumbent never goes down and ends at the campaign's best.
  double last = 0;
  for (const auto& iv : d.iterations) {
    ASSERT_TRUE(iv.incumbent_score);
    EXPECT_GE(*iv.incumbent_score + 1e-12, last);
    last = *iv.incumbent_score;
  }
  EXPECT_EQ(d.iterations.back().incumbent, rs_->best);
  EXPECT_NEAR(last, *d.campaign.best_score, 1e-9);
  // Promotions happened; dropout decisions were recorded and attributed.
  int promoted = 0;
  for (const auto& iv : d.iterations) promoted += iv.promoted;
  EXPECT_GE(promoted, 2);
  ASSERT_FALSE(d.attribution.empty());
  for (const auto& a : d.attribution) {
    // Directives are offered every iteration; history items once they exist.
    if (a.kind == "directive") {
      EXPECT_EQ(a.kept + a.dropped, 8) << a.item_id;
    }
    EXPECT_LE(a.kept + a.dropped, 8) << a.item_id;
  }
  // Iterations 2 and 3 gained nothing: the first escalation step after 3.
  ASSERT_EQ(d.iteration(3)->escalations, std::vector<std::string>{"higher_p"});
  EXPECT_EQ(d.iteration(3)->outcomes.at(outcome::slower), 2);
  EXPECT_TRUE(d.iteration(4)->promoted);
  EXPECT_TRUE(d.iteration(7)->promoted);
  // Spend comes from the recorded LLM calls, cumulative.
  ASSERT_EQ(d.spend.size(), 8u);
  EXPECT_NEAR(d.spend.back().cost_usd, 8 * 0.012, 1e-9);
}

// Per model: the store's calls carry no meta here (written the way a
// recorder without the router would), so they count as provider/model, and
// only the candidate each call is linked to (the first of its iteration)
// counts for it.
TEST_F(Report, ModelBreakdownCountsCallsLinkedCandidatesAndWins) {
  auto db = reader();
  const auto d = load_campaign(db, rs_->f.campaign_id);
  const auto rows = model_breakdown(d);
  ASSERT_EQ(rows.size(), 1u);
  const auto& r = rows[0];
  EXPECT_EQ(r.label, "openai/test-model");
  EXPECT_EQ(r.provider, "openai");
  EXPECT_EQ(r.model, "test-model");
  EXPECT_EQ(r.calls, 8);
  EXPECT_EQ(r.failed_calls, 0);
  EXPECT_EQ(r.prompt_tokens, 8 * 2000 + 100 * 36);  // 2000 + 100 n, n = 1..8
  EXPECT_EQ(r.completion_tokens, 8 * 400 + 200 * 36);
  EXPECT_NEAR(r.cost_usd, 8 * 0.012, 1e-9);
  ASSERT_TRUE(r.mean_latency_ms);
  EXPECT_NEAR(*r.mean_latency_ms, 4000 + 500 * 4.5, 1e-9);
  // The first proposals: 0.85 0.9 1.1 0.7 0.75 0.95 0.55 0.8, all correct;
  // faster than their parent: 0.85 (seed), 0.7 (0.85), 0.55 (0.6).
  EXPECT_EQ(r.candidates, 8);
  EXPECT_EQ(r.compiled, 8);
  EXPECT_EQ(r.correct, 8);
  EXPECT_EQ(r.faster, 3);
  // Promoted: iterations 1, 4 and 7 with a first proposal, 5 with its second.
  EXPECT_EQ(r.wins, 3);
  double gain = 0, best_gain = 0;
  for (const std::int64_t n : {1, 4, 7}) {
    gain += d.iteration(n)->gain;
    best_gain = std::max(best_gain, d.iteration(n)->gain);
  }
  EXPECT_GT(gain, 0);
  EXPECT_NEAR(r.gain, gain, 1e-12);
  EXPECT_NEAR(r.best_gain, best_gain, 1e-12);
  ASSERT_TRUE(r.gain_per_usd());
  EXPECT_NEAR(*r.gain_per_usd(), gain / (8 * 0.012), 1e-9);
  EXPECT_TRUE(r.has_best);
  EXPECT_EQ(r.best_candidate, rs_->best);
  // No call carries a strategy hint: no hint breakdown.
  EXPECT_TRUE(hint_breakdown(d).empty());
  const json j = attribution_json(d);
  EXPECT_EQ(j.at("campaign"), rs_->f.campaign_id);
  ASSERT_EQ(j.at("models").size(), 1u);
  EXPECT_EQ(j["models"][0]["wins"], 3);
  EXPECT_EQ(j["models"][0]["tokens"], r.tokens());
  EXPECT_EQ(j.at("items").size(), d.attribution.size());
  const std::string html = html_report(d, {});
  const auto at = html.find("<section id=\"models\">");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NE(html.find("openai/test-model", at), std::string::npos);
}

// One iteration whose two LLM calls dropped different items (call 0 the
// first item the iteration kept, call 1 the second), each linked to its
// candidate; call 1's candidate (speed 0.7) is promoted, call 0's (1.3) is
// not. `with_meta` false writes the calls the way a recorder before
// per-call draws did: no meta, so both calls showed the iteration's items.
struct two_call_store {
  test::fixture f;
  std::vector<std::string> kept, dropped;  // the iteration's decisions
  std::vector<store::row_id> calls;        // call 0, call 1
  std::vector<campaign::item_attribution> loop_attribution;

  explicit two_call_store(bool with_meta)
      : f(test::operator_json(), {{"candidates_per_iteration", 2}, {"loop", {{"explore_p", 0.0}}}},
          {1, {}, {}, {}}) {
    campaign::scripted_source src(test::speeds_script({{"1.3", "0.7"}}));
    campaign::fake_evaluator ev(test::default_model(), 0.01);
    campaign::loop_hooks hooks;
    hooks.at = [this, with_meta](std::string_view point, std::int64_t n) {
      if (point != "after_proposals") return;
      for (const auto& it : f.db.iterations_of(f.campaign_id)) {
        if (it.number != n) continue;
        for (const auto& d : f.db.dropout_decisions_of(it.id))
          (d.kept ? kept : dropped).push_back(d.item_id);
        if (kept.size() < 2) return;  // the test says so
        for (int c = 0; c < 2; ++c) {
          store::llm_call_record call;
          call.campaign_id = f.campaign_id;
          call.iteration_id = it.id;
          call.provider = "openai";
          call.model = "test-model";
          call.request = {{"temperature", 0.7}};
          if (with_meta) {
            json shown = json::array({"history:best"});
            for (const auto& k : kept)
              if (k != kept[static_cast<std::size_t>(c)]) shown.push_back(k);
            call.request["meta"] = {{"iteration", n},
                                    {"call", c},
                                    {"calls", 2},
                                    {"items", shown},
                                    {"call_dropped", {kept[static_cast<std::size_t>(c)]}}};
          }
          call.prompt = "call " + std::to_string(c);
          call.response = "```cuda\n```";
          const auto id = f.db.add_llm_call(call);
          calls.push_back(id);
          // speeds_script marks the k-th proposal "itN_k".
          f.db.db()
              .prepare(
                  "UPDATE candidates SET llm_call_id = ? WHERE iteration_id = ? AND source LIKE ?")
              .bind_all(id, it.id, "%it" + std::to_string(n) + "_" + std::to_string(c) + "%")
              .run();
        }
      }
    };
    campaign::campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings(), hooks);
    loop.run();
    loop_attribution = loop.attribution();
  }
};

std::map<std::string, attribution_row> by_item(const std::vector<attribution_row>& rows) {
  std::map<std::string, attribution_row> out;
  for (const auto& r : rows) out[r.item_id] = r;
  return out;
}

TEST(Attribution, PerCallDrawsCreditOnlyThePromotedCall) {
  two_call_store s(true);
  ASSERT_GE(s.kept.size(), 3u) << "the seed keeps too few directives for this test";
  ASSERT_FALSE(s.dropped.empty());
  ASSERT_EQ(s.calls.size(), 2u);
  const auto d = load_campaign(s.f.db, s.f.campaign_id);
  const auto* it = d.iteration(1);
  ASSERT_NE(it, nullptr);
  ASSERT_TRUE(it->promoted);
  const double g = it->gain;
  ASSERT_GT(g, 0);
  // The promoted candidate is call 1's answer.
  const auto promoted = d.campaign.best_candidate_id;
  ASSERT_TRUE(promoted);
  EXPECT_EQ(d.view(*promoted)->rec->llm_call_id, s.calls[1]);

  const auto at = by_item(d.attribution);
  // kept[0]: dropped by call 0 (not promoted: 0), shown by call 1 (promoted: g).
  const auto& a0 = at.at(s.kept[0]);
  EXPECT_EQ(a0.kept, 1);
  EXPECT_EQ(a0.dropped, 1);
  EXPECT_NEAR(a0.mean_gain_kept, g, 1e-12);
  EXPECT_NEAR(a0.mean_gain_dropped, 0.0, 1e-12);
  // kept[1]: dropped by the promoted call, shown by the other: the gain
  // goes to "dropped", which per-iteration attribution could not see.
  const auto& a1 = at.at(s.kept[1]);
  EXPECT_EQ(a1.kept, 1);
  EXPECT_EQ(a1.dropped, 1);
  EXPECT_NEAR(a1.mean_gain_kept, 0.0, 1e-12);
  EXPECT_NEAR(a1.mean_gain_dropped, g, 1e-12);
  EXPECT_NEAR(a1.effect(), -g, 1e-12);
  // Shown by both calls: one with g, one with 0.
  for (std::size_t i = 2; i < s.kept.size(); ++i) {
    const auto& a = at.at(s.kept[i]);
    EXPECT_EQ(a.kept, 2) << a.item_id;
    EXPECT_EQ(a.dropped, 0) << a.item_id;
    EXPECT_NEAR(a.mean_gain_kept, g / 2, 1e-12) << a.item_id;
  }
  // Dropped by the iteration: absent from both calls.
  for (const auto& id : s.dropped) {
    EXPECT_EQ(at.at(id).kept, 0) << id;
    EXPECT_EQ(at.at(id).dropped, 2) << id;
    EXPECT_NEAR(at.at(id).mean_gain_dropped, g / 2, 1e-12) << id;
  }
  // The loop reports the same (one rule), and so does `kopt report --json`.
  ASSERT_EQ(s.loop_attribution.size(), d.attribution.size());
  const auto la = by_item(s.loop_attribution);
  for (const auto& [id, r] : at) {
    EXPECT_EQ(la.at(id).kept, r.kept) << id;
    EXPECT_NEAR(la.at(id).mean_gain_dropped, r.mean_gain_dropped, 1e-12) << id;
  }
  bool found = false;
  const json report_json = attribution_json(d);  // kept alive across the loop
  for (const auto& j : report_json.at("items"))
    if (j.at("item_id") == s.kept[1]) {
      found = true;
      EXPECT_EQ(j.at("dropped"), 1);
      EXPECT_NEAR(j.at("mean_gain_dropped").get<double>(), g, 1e-12);
    }
  EXPECT_TRUE(found);
  // `kopt show candidate`: the winner's own call dropped kept[1].
  const auto rj = candidate_research_json(s.f.db, *d.view(*promoted)->rec);
  ASSERT_TRUE(rj.at("call_dropout").is_array());
  for (const auto& dd : rj["call_dropout"])
    EXPECT_EQ(dd.at("kept").get<bool>(),
              std::find(s.kept.begin(), s.kept.end(), dd.at("item_id")) != s.kept.end() &&
                  dd.at("item_id") != s.kept[1])
        << dd.dump();
}

TEST(Attribution, CallsWithoutTheirOwnDrawUseTheIterationsDecisions) {
  two_call_store s(false);
  ASSERT_GE(s.kept.size(), 3u);
  const auto d = load_campaign(s.f.db, s.f.campaign_id);
  const auto* it = d.iteration(1);
  ASSERT_NE(it, nullptr);
  ASSERT_TRUE(it->promoted);
  const double g = it->gain;
  ASSERT_GT(g, 0);
  const auto at = by_item(d.attribution);
  ASSERT_EQ(at.size(), s.kept.size() + s.dropped.size());
  // Every call showed the iteration's kept items: each counts twice (two
  // calls), once with the promoted call's gain and once with 0.
  for (const auto& id : s.kept) {
    EXPECT_EQ(at.at(id).kept, 2) << id;
    EXPECT_EQ(at.at(id).dropped, 0) << id;
    EXPECT_NEAR(at.at(id).mean_gain_kept, g / 2, 1e-12) << id;
  }
  for (const auto& id : s.dropped) {
    EXPECT_EQ(at.at(id).dropped, 2) << id;
    EXPECT_NEAR(at.at(id).mean_gain_dropped, g / 2, 1e-12) << id;
  }
  const auto promoted = d.campaign.best_candidate_id;
  ASSERT_TRUE(promoted);
  const auto rj = candidate_research_json(s.f.db, *d.view(*promoted)->rec);
  ASSERT_TRUE(rj.at("call_dropout").is_array());
  EXPECT_EQ(rj["call_dropout"], rj.at("iteration").at("dropout"));
}

TEST_F(Report, LogAndLineageJson) {
  auto db = reader();
  const auto d = load_campaign(db, rs_->f.campaign_id);
  const json log = log_json(d);
  ASSERT_EQ(log.size(), d.iterations.size());
  EXPECT_EQ(log[1]["outcomes"]["compile_error"], 1);
  EXPECT_EQ(log[1]["llm_calls"], 1);
  EXPECT_EQ(log[1]["models"], json({{"openai/test-model", 1}}));
  EXPECT_EQ(log[0]["models"], json::object());  // set-up: no call
  EXPECT_GT(log[1]["dropout"]["kept"].get<int>() + log[1]["dropout"]["dropped"].get<int>(), 0);
  const json lin = lineage_json(d);
  EXPECT_EQ(lin["nodes"].size(), d.candidates.size());
  EXPECT_EQ(lin["best_path"].back()["id"], rs_->best);
  int on_path = 0;
  for (const auto& n : lin["nodes"]) on_path += n["on_best_path"].get<bool>();
  EXPECT_EQ(static_cast<std::size_t>(on_path), d.best_path.size());
}

TEST(LineDiff, FindsInsertionsDeletionsAndHunks) {
  const std::string a = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n";
  const std::string b = "a\nb\nX\nd\ne\nf\ng\nh\ni\nj\nk\n";
  const auto lines = line_diff(a, b);
  int minus = 0, plus = 0;
  for (const auto& l : lines) {
    minus += l.op == '-';
    plus += l.op == '+';
  }
  EXPECT_EQ(minus, 1);
  EXPECT_EQ(plus, 2);
  const auto u = unified_diff(a, b, "a", "b", 1);
  EXPECT_NE(u.find("--- a\n+++ b\n"), std::string::npos);
  EXPECT_NE(u.find("-c\n+X\n"), std::string::npos) << u;
  EXPECT_NE(u.find("+k\n"), std::string::npos) << u;
  // Two separate hunks with one line of context.
  EXPECT_EQ(std::count(u.begin(), u.end(), '@'), 8) << u;
  EXPECT_EQ(unified_diff(a, a, "a", "b"), "");
  // Too large for the table: one block replacement, still correct.
  const auto big = line_diff("x\ny\n", "y\nz\n", 1);
  EXPECT_EQ(big.size(), 4u);
}

// Myers: a few changes in a large file stay a few lines of diff (the old
// quadratic table gave up on such inputs and replaced everything).
TEST(LineDiff, LargeFilesWithFewChangesStayMinimal) {
  std::string a, b;
  for (int i = 0; i < 30000; ++i) {
    const std::string line = "  x[" + std::to_string(i) + "] = y;\n";
    a += line;
    if (i == 100 || i == 15000 || i == 29990)
      b += "  changed " + std::to_string(i) + ";\n";
    else
      b += line;
    if (i == 20000) b += "  inserted;\n";
  }
  const auto lines = line_diff(a, b);
  int minus = 0, plus = 0, same = 0;
  for (const auto& l : lines) {
    minus += l.op == '-';
    plus += l.op == '+';
    same += l.op == ' ';
  }
  EXPECT_EQ(minus, 3);
  EXPECT_EQ(plus, 4);
  EXPECT_EQ(same, 30000 - 3);
  // Reassembling each side from the script gives the inputs back.
  std::string ra, rb;
  for (const auto& l : lines) {
    if (l.op != '+') ra += l.text + "\n";
    if (l.op != '-') rb += l.text + "\n";
  }
  EXPECT_EQ(ra, a);
  EXPECT_EQ(rb, b);
}

TEST_F(Report, DiffOfSeedAndBest) {
  auto db = reader();
  const json j = diff_json(db, rs_->seed, rs_->best);
  EXPECT_FALSE(j["same_source"].get<bool>());
  const std::string src = j["source_diff"];
  EXPECT_NE(src.find("+  if (i < n) out[i] = a[i] + b[i];"), std::string::npos) << src;
  EXPECT_NE(src.find("-"), std::string::npos);
  ASSERT_EQ(j["workloads"].size(), 6u);
  for (const auto& w : j["workloads"]) {
    EXPECT_TRUE(w["same_stage"].get<bool>()) << w.dump();
    EXPECT_GT(w["speedup"].get<double>(), 1.0) << w.dump();  // the best is faster everywhere
  }
  EXPECT_LT(j["weighted_geomean_time_ratio"].get<double>(), 1.0);
  EXPECT_FALSE(j["launch_plan_patch"].empty());  // the seed has tunable parameters, the best none
  EXPECT_THROW(diff_json(db, rs_->seed, 99999), kopt::not_found_error);
}

TEST(Flatten, RendersNestedJsonGenerically) {
  const auto f =
      flatten(json{{"metrics", {{"a", 1.5}, {"b", "x"}}}, {"notes", {"p", "q"}}, {"n", nullptr}});
  std::map<std::string, std::string> m(f.begin(), f.end());
  EXPECT_EQ(m.at("metrics.a"), "1.5");
  EXPECT_EQ(m.at("metrics.b"), "x");
  EXPECT_EQ(m.at("notes"), "p, q");
  EXPECT_FALSE(m.count("n"));
}

TEST_F(Report, JsonlAndCsvHaveEveryCandidateAndEvaluation) {
  auto db = reader();
  const auto d = load_campaign(db, rs_->f.campaign_id);
  std::ostringstream jl, csv;
  write_jsonl(d, jl, true);
  write_csv(d, csv);
  std::istringstream jin(jl.str());
  std::string line;
  std::size_t n = 0, evals = 0;
  bool saw_best = false;
  while (std::getline(jin, line)) {
    const json j = json::parse(line);
    ++n;
    evals += j["evaluations"].size();
    EXPECT_TRUE(j.contains("source"));
    if (j["is_best"].get<bool>()) {
      saw_best = true;
      EXPECT_TRUE(j["on_best_path"].get<bool>());
      bool counters = false;
      for (const auto& e : j["evaluations"])
        counters = counters || e["counters"].contains("metrics");
      EXPECT_TRUE(counters);
    }
  }
  EXPECT_EQ(n, d.candidates.size());
  EXPECT_TRUE(saw_best);
  std::size_t rows = 0;
  std::istringstream cin(csv.str());
  std::getline(cin, line);
  EXPECT_EQ(line.rfind("campaign_id,candidate_id,parent_id,origin,iteration", 0), 0u);
  const auto cols = std::count(line.begin(), line.end(), ',');
  while (std::getline(cin, line)) {
    ++rows;
    // Error messages with commas are quoted: count only unquoted commas.
    std::size_t c = 0;
    bool q = false;
    for (char ch : line) {
      if (ch == '"') q = !q;
      if (ch == ',' && !q) ++c;
    }
    EXPECT_EQ(static_cast<long>(c), cols) << line;
  }
  EXPECT_EQ(rows, evals);
}

TEST_F(Report, FlashInferTraceExportAndImportBack) {
  auto db = reader();
  const auto d = load_campaign(db, rs_->f.campaign_id);
  test::temp_dir out;
  flashinfer_export_options o;
  o.top = 2;
  const auto files = write_flashinfer_trace(d, out.path(), o);
  const auto def = json::parse(slurp(out / "definitions/elementwise/vadd.json"));
  EXPECT_EQ(def["name"], "vadd");
  EXPECT_EQ(def["axes"]["n"]["type"], "var");
  EXPECT_EQ(def["inputs"]["a"]["shape"], json::array({"n"}));
  EXPECT_EQ(def["inputs"]["a"]["dtype"], "float32");
  EXPECT_NE(def["reference"].get<std::string>().find("NotImplementedError"), std::string::npos);
  std::size_t solutions = 0;
  for (const auto& f : files)
    if (f.rfind("solutions/", 0) == 0) {
      ++solutions;
      const auto s = json::parse(slurp(out / f));
      EXPECT_EQ(s["definition"], "vadd");
      EXPECT_EQ(s["spec"]["language"], "cuda");
      EXPECT_EQ(s["spec"]["entry_point"], "kernel.cu::cand");
      EXPECT_EQ(s["sources"][0]["path"], "kernel.cu");
      EXPECT_EQ(s["author"], "kopt-test");
    }
  EXPECT_EQ(solutions, 2u);
  // Traces: one line per exported solution and workload, all PASSED.
  std::istringstream tin(slurp(out / "traces/kopt-test/elementwise/vadd.jsonl"));
  std::string line;
  std::size_t traces = 0;
  const std::string best_name =
      "vadd_kopt_c" + std::to_string(rs_->f.campaign_id) + "_k" + std::to_string(rs_->best);
  while (std::getline(tin, line)) {
    const auto t = json::parse(line);
    ++traces;
    EXPECT_EQ(t["evaluation"]["status"], "PASSED");
    EXPECT_GT(t["evaluation"]["performance"]["latency_ms"].get<double>(), 0);
    EXPECT_TRUE(t["workload"]["axes"].contains("n"));
    EXPECT_EQ(t["workload"]["inputs"]["a"]["type"], "random");
    EXPECT_EQ(t["workload"]["uuid"].get<std::string>().size(), 36u);
    if (traces == 1) {
      EXPECT_EQ(t["solution"], best_name);  // the best comes first
    }
  }
  EXPECT_EQ(traces, 12u);
  EXPECT_EQ(flashinfer_status(store::eval_status::rejected_integrity), "RUNTIME_ERROR");
  EXPECT_EQ(flashinfer_status(store::eval_status::incorrect), "INCORRECT_NUMERICAL");

  // kopt's extension brings the whole config back, reference included.
  test::temp_dir cfgs;
  import_options io;
  io.out_dir = cfgs.path();
  auto r = import_flashinfer_trace(out.path(), io);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, "imported") << json(r[0].problems).dump();
  EXPECT_EQ(r[0].workloads, 6u);
  {
    const auto back = config::load_operator_file(cfgs / "vadd.json");
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back.op->snapshot(), rs_->f.op.snapshot());
  }
  // A definition without the extension (from elsewhere): no reference, a
  // draft that says what is missing.
  {
    auto plain = def;
    plain.erase("kopt");
    std::ofstream(out / "definitions/elementwise/vadd.json") << plain.dump();
  }
  r = import_flashinfer_trace(out.path(), io);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, "draft");
  EXPECT_EQ(r[0].workloads, 6u);
  ASSERT_FALSE(r[0].problems.empty());
  EXPECT_NE(r[0].problems[0].find("no reference"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(cfgs / "vadd.draft.json"));
  EXPECT_TRUE(std::filesystem::exists(cfgs / "vadd.reference.py"));
  // With a reference in kopt's format: a config that validates.
  test::temp_dir refs;
  std::ofstream(refs / "vadd.json") << test::kernel("ref", "out[0] = a[0] + b[0];").dump();
  io.reference_dir = refs.path();
  r = import_flashinfer_trace(out.path(), io);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, "imported") << json(r[0].problems).dump();
  const auto lr = config::load_operator_file(cfgs / "vadd.json");
  ASSERT_TRUE(lr.ok());
  EXPECT_EQ(lr.op->workloads.size(), 6u);
  EXPECT_EQ(lr.op->name, "vadd");
  EXPECT_THROW(import_flashinfer_trace(refs.path(), io), kopt::config_error);
}

TEST(FlashInferImport, ReportsWhatDoesNotMap) {
  test::temp_dir in, out;
  std::filesystem::create_directories(in / "definitions/misc");
  std::filesystem::create_directories(in / "workloads/misc");
  std::ofstream(in / "definitions/misc/rms_h64.json") << json{
      {"name", "rms_h64"},
      {"op_type", "rmsnorm"},
      {"axes", {{"b", {{"type", "var"}}}, {"h", {{"type", "const"}, {"value", 64}}}}},
      {"constraints", {"b > 0"}},
      {"inputs",
       {{"x", {{"shape", {"b", "h"}}, {"dtype", "bfloat16"}}},
        {"idx", {{"shape", {"b"}}, {"dtype", "int32"}}},
        {"eps", {{"shape", nullptr}, {"dtype", "float32"}}}}},
      {"outputs", {{"y", {{"shape", {"b", "h"}}, {"dtype", "float4_e2m1"}}}}},
      {"reference", "def run(x, idx, eps):\n    return x\n"}}.dump();
  std::ofstream wl(in / "workloads/misc/rms_h64.jsonl");
  int u = 0;
  for (int b : {1, 8, 8, 32})
    wl << json{{"definition", "rms_h64"},
               {"workload",
                {{"uuid", "u" + std::to_string(u++)},
                 {"axes", {{"b", b}}},
                 {"inputs",
                  {{"x", {{"type", "safetensors"}, {"path", "x.st"}, {"tensor_key", "x"}}},
                   {"eps", {{"type", "scalar"}, {"value", 1e-6}}}}}}}}
              .dump()
       << "\n";
  wl.close();
  import_options io;
  io.out_dir = out.path();
  const auto r = import_flashinfer_trace(in.path(), io);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, "draft");
  EXPECT_EQ(r[0].workloads, 3u);  // b=8 twice: one workload of weight 2
  std::string problems = json(r[0].problems).dump(), notes = json(r[0].notes).dump();
  EXPECT_NE(problems.find("float4_e2m1"), std::string::npos) << problems;
  EXPECT_NE(problems.find("input 'idx' is int32"), std::string::npos) << problems;
  EXPECT_NE(notes.find("safetensors"), std::string::npos) << notes;
  const auto draft = json::parse(slurp(out / "rms_h64.draft.json"));
  EXPECT_EQ(draft["constraints"], json::array({"b > 0"}));  // one kopt checks
  EXPECT_EQ(draft["scalars"]["eps"]["dtype"], "float32");
  EXPECT_DOUBLE_EQ(draft["scalars"]["eps"]["value"].get<double>(), 1e-6);
  double w8 = 0;
  for (const auto& w : draft["workloads"])
    if (w["axes"]["b"] == 8) w8 = w["weight"];
  EXPECT_DOUBLE_EQ(w8, 2.0);
}

TEST_F(Report, ChromeTraceHasNonOverlappingSpansPerTrack) {
  auto db = reader();
  const auto d = load_campaign(db, rs_->f.campaign_id);
  const json t = chrome_trace(d);
  ASSERT_TRUE(t["traceEvents"].is_array());
  std::map<int, std::string> names;
  std::map<std::string, int> by_cat;
  std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>> spans;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name")
      names[e["tid"].get<int>()] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    by_cat[e["cat"]]++;
    EXPECT_GT(e["dur"].get<std::int64_t>(), 0);
    spans[e["tid"].get<int>()].push_back(
        {e["ts"].get<std::int64_t>(), e["ts"].get<std::int64_t>() + e["dur"].get<std::int64_t>()});
  }
  EXPECT_EQ(by_cat["iteration"], static_cast<int>(d.iterations.size()));
  EXPECT_EQ(by_cat["llm"], 8);
  EXPECT_GT(by_cat["compile"], 0);
  EXPECT_GT(by_cat["evaluate"], 0);
  for (auto& [tid, ss] : spans) {
    std::sort(ss.begin(), ss.end());
    for (std::size_t i = 1; i < ss.size(); ++i)
      if (names[tid] != "iterations") {
        EXPECT_LE(ss[i - 1].second, ss[i].first) << names[tid];
      }
  }
  bool worker_track = false;
  for (const auto& [tid, n] : names)
    worker_track = worker_track || n.rfind("fake GPU evaluate", 0) == 0;
  EXPECT_TRUE(worker_track);
}

TEST_F(Report, HtmlIsSelfContainedAndEveryChartHasMarks) {
  auto db = reader();
  const auto d = load_campaign(db, rs_->f.campaign_id);
  const std::string html = html_report(d, {});
  for (const char* chart : {"progress-iteration", "progress-time", "workloads", "outcomes",
                            "attribution", "tokens", "cost", "lineage"}) {
    const std::regex re(std::string("data-chart=\"") + chart + "\" data-marks=\"(\\d+)\"");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(html, m, re)) << chart;
    EXPECT_GT(std::stoi(m[1]), 0) << chart;
  }
  // Nothing fetched from anywhere: no scripts, links, imports or URLs other
  // than the SVG namespace.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  std::string rest = html;
  for (std::size_t p; (p = rest.find("http://www.w3.org/2000/svg")) != std::string::npos;)
    rest.erase(p, 26);
  EXPECT_EQ(rest.find("http://"), std::string::npos);
  EXPECT_EQ(rest.find("https://"), std::string::npos);
  // The winner's source is there, escaped.
  EXPECT_NE(html.find("if (i &lt; n) out[i] = a[i] + b[i];"), std::string::npos);
  EXPECT_EQ(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

// Attainable SOL (issue 17): with the worker's measured launch floor in the
// stored timings (timing.launch_floor_ns, as record_worker_batch stores the
// worker's timing), each workload shows max(T_SOL, floor) / T beside its
// physical fraction, and the weighted totals of both are shown; without a
// floor (the research store above) no attainable figure appears at all.
TEST(HtmlReport, AttainableSolBesidePhysicalWithTheMeasuredFloor) {
  test::research_store rs;
  {
    auto db = store::store::open(rs.db_path(), {.read_only = true});
    const auto plain = load_campaign(db, rs.f.campaign_id);
    EXPECT_EQ(html_report(plain, {}).find("attainable"), std::string::npos);
  }
  constexpr double floor_ns = 2500;
  rs.f.db.db()
      .prepare(
          "UPDATE evaluations SET timing_json = json_set(coalesce(timing_json, '{}'), "
          "'$.launch_floor_ns', 2500.0)")
      .run();
  auto db = store::store::open(rs.db_path(), {.read_only = true});
  const auto d = load_campaign(db, rs.f.campaign_id);
  const auto* best = d.view(rs.best);
  ASSERT_NE(best, nullptr);
  ASSERT_TRUE(best->score && best->attainable_score);
  const auto& full = best->by_stage.at("full");
  double num = 0, den = 0;
  bool floor_bound = false;
  for (const auto& [k, m] : full) {
    ASSERT_TRUE(m.sol && m.median_ns && m.attainable) << k;
    const double want = std::max(*m.sol, floor_ns / *m.median_ns);
    EXPECT_NEAR(*m.attainable, want, 1e-12) << k;
    EXPECT_GE(*m.attainable, *m.sol) << k;
    floor_bound = floor_bound || floor_ns > *m.sol * *m.median_ns;
    const double w = d.weights.count(k) ? d.weights.at(k) : 1.0;
    num += w * *m.attainable;
    den += w;
  }
  EXPECT_TRUE(floor_bound) << "the test's floor should bind on some workload";
  EXPECT_NEAR(*best->attainable_score, num / den, 1e-12);
  EXPECT_GT(*best->attainable_score, *best->score);
  const std::string html = html_report(d, {});
  EXPECT_NE(html.find(pct(best->attainable_score) + " attainable"), std::string::npos);
  EXPECT_NE(html.find("<b>weighted</b>"), std::string::npos);
  EXPECT_NE(html.find("max(T<sub>SOL</sub>, measured launch floor) / T"), std::string::npos);
  // The table shows each workload's best available measurement (verify first).
  for (const auto& [k, m] : best->best_measures())
    EXPECT_NE(html.find(pct(m.attainable) + " attainable"), std::string::npos) << k;
}

TEST(HtmlReport, EmptyCampaignRendersPlaceholders) {
  test::fixture f;
  const auto d = load_campaign(f.db, f.campaign_id);
  const std::string html = html_report(d, {});
  EXPECT_NE(html.find("data-chart=\"progress-iteration\" data-marks=\"0\""), std::string::npos);
  EXPECT_NE(html.find("no candidate was measured"), std::string::npos);
  // No LLM call, no model: no Models section, and empty lists in JSON.
  EXPECT_EQ(html.find("id=\"models\""), std::string::npos);
  EXPECT_TRUE(model_breakdown(d).empty());
  EXPECT_TRUE(attribution_json(d).at("models").empty());
  EXPECT_THROW(load_campaign(f.db, 12345), kopt::not_found_error);
}

}  // namespace
}  // namespace kopt::report
