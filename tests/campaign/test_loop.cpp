// The campaign loop end to end on the CPU: the fake GPU and scripted or
// autotune sources. Parent choice, recorded dropout, each escalation step in
// order, every budget, promotion under noise, and the autotune campaign
// through final verification and export.
#include <gtest/gtest.h>

#include <fstream>

#include "campaign/export.hpp"
#include "support.hpp"

namespace kopt::campaign {
namespace {

using json = nlohmann::json;

TEST(Loop, AutotuneFindsTheOptimumVerifiesAndExports) {
  test::fixture f;
  fake_evaluator ev(test::default_model(), 0.01);
  autotune_source src;
  campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
  const auto r = loop.run();
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.stop_reason, "search space exhausted");
  EXPECT_TRUE(r.verified);
  ASSERT_TRUE(r.best_id);
  const auto best = f.db.find_candidate(*r.best_id);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->origin, store::candidate_origin::tuned);
  const auto pt = default_point(candidate_json(*best));
  EXPECT_EQ(pt.at("BLOCK"), 512);
  EXPECT_EQ(pt.at("ITEMS"), 8);
  const auto c = f.db.find_campaign(f.campaign_id);
  EXPECT_EQ(c->state, store::campaign_state::done);
  EXPECT_EQ(c->best_candidate_id, r.best_id);
  EXPECT_NEAR(*c->best_score, 0.5, 0.02);  // sol time is half the optimum's time
  EXPECT_GE(f.count_events("promoted"), 1);
  // The winner was compared with the baseline (speed 1.1) head to head.
  ASSERT_TRUE(r.summary.contains("vs_baseline"));
  EXPECT_NEAR(r.summary.value("speedup_vs_baseline", 0.0), 1.1, 0.03);
  // 20 points, each screened once, never twice.
  std::map<std::pair<std::string, std::string>, int> seen;
  for (const auto& call : ev.calls())
    for (const auto& k : call.keys) {
      const auto id = std::make_pair(call.stage + std::to_string(call.base_seed), k);
      EXPECT_EQ(++seen[id], 1);
    }
  const auto ex = export_winner(f.db, f.campaign_id, f.dir / "export");
  for (const char* name : {"kernel.cu", "candidate.json", "launch_plan.json", "parameters.json", "build.json",
                           "measurements.json", "README.md"})
    EXPECT_TRUE(std::filesystem::exists(f.dir / "export" / name)) << name;
  std::ifstream pin(f.dir / "export" / "parameters.json");
  EXPECT_EQ(json::parse(pin), json({{"BLOCK", 512}, {"ITEMS", 8}}));
  std::ifstream min(f.dir / "export" / "measurements.json");
  const auto m = json::parse(min);
  EXPECT_TRUE(m["final"]["verified"].get<bool>());
  EXPECT_EQ(m["final"]["verify"]["workloads"].size(), 6u);
}

// Private workloads (issue 17): never screened, compared or fully swept,
// measured only at verify and reported apart; the score ignores them.
TEST(Loop, PrivateWorkloadsAreMeasuredOnlyAtVerifyAndReportedApart) {
  json opj = test::operator_json();
  opj["workloads"][1]["private"] = true;  // n4k
  opj["workloads"][4]["private"] = true;  // n4m
  test::fixture f(opj);
  fake_evaluator ev(test::default_model(), 0.01);
  autotune_source src;
  campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
  const auto r = loop.run();
  ASSERT_TRUE(r.finished);
  EXPECT_TRUE(r.verified);
  std::size_t private_calls = 0;
  for (const auto& call : ev.calls()) {
    const bool has_private =
        std::find(call.workloads.begin(), call.workloads.end(), "n4k") != call.workloads.end() ||
        std::find(call.workloads.begin(), call.workloads.end(), "n4m") != call.workloads.end();
    if (!has_private) continue;
    ++private_calls;
    EXPECT_EQ(call.stage, "verify") << "a private workload reached stage " << call.stage;
    EXPECT_EQ(call.workloads, (std::vector<std::string>{"n4k", "n4m"}));
  }
  EXPECT_EQ(private_calls, 1u);
  ASSERT_TRUE(r.summary.contains("verify_private")) << r.summary.dump();
  const auto& vp = r.summary.at("verify_private");
  EXPECT_EQ(vp.at("workloads"), json({"n4k", "n4m"}));
  EXPECT_TRUE(vp.at("all_ok").get<bool>());
  EXPECT_GT(vp.at("weighted_sol").get<double>(), 0.0);
  EXPECT_EQ(r.summary.at("verify").at("workloads").size(), 4u);  // the public ones
}

// integrity.private_fraction goes through the same decision as the flag:
// the seeded choice is private at config load, so it too is measured only
// at verify, reported apart, and the rule is recorded with the report.
TEST(Loop, PrivateFractionBySeedIsMeasuredOnlyAtVerify) {
  json opj = test::operator_json();
  opj["integrity"] = {{"private_fraction", 0.34}, {"private_seed", 11}};
  test::fixture f(opj);
  std::vector<std::string> ids, priv;
  for (const auto& w : f.op.workloads) ids.push_back(w.id);
  const auto expected = config::private_fraction_choice(ids, 0.34, 11);
  ASSERT_EQ(expected.size(), 2u);  // round(0.34 x 6)
  for (const auto& w : f.op.workloads)
    if (w.is_private) priv.push_back(w.id);
  EXPECT_EQ(priv, expected);
  fake_evaluator ev(test::default_model(), 0.01);
  autotune_source src;
  campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
  const auto r = loop.run();
  ASSERT_TRUE(r.finished);
  std::size_t private_calls = 0;
  for (const auto& call : ev.calls()) {
    bool has_private = false;
    for (const auto& p : expected)
      has_private = has_private || std::find(call.workloads.begin(), call.workloads.end(), p) !=
                                       call.workloads.end();
    if (!has_private) continue;
    ++private_calls;
    EXPECT_EQ(call.stage, "verify") << "a private workload reached stage " << call.stage;
    EXPECT_EQ(call.workloads, expected);
  }
  EXPECT_EQ(private_calls, 1u);
  ASSERT_TRUE(r.summary.contains("verify_private")) << r.summary.dump();
  const auto& vp = r.summary.at("verify_private");
  EXPECT_EQ(vp.at("workloads"), json(expected));
  EXPECT_EQ(vp.at("chosen_by"), json({{"private_fraction", 0.34}, {"private_seed", 11}}));
  EXPECT_EQ(r.summary.at("verify").at("workloads").size(), 4u);
}

// Before a promotion the finalist goes to the evaluator's compute-sanitizer;
// the fake one has none, which the promoted event records as skipped.
TEST(Loop, PromotionRecordsTheSanitizerOutcome) {
  test::fixture f;
  fake_evaluator ev(test::default_model(), 0.01);
  autotune_source src;
  campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
  loop.run();
  int promoted = 0;
  for (const auto& e : f.db.events_of(f.campaign_id)) {
    if (e.kind != "promoted") continue;
    ++promoted;
    ASSERT_TRUE(e.data.contains("sanitize")) << e.data.dump();
    EXPECT_EQ(e.data.at("sanitize").value("status", ""), "skipped");
    EXPECT_FALSE(e.data.at("sanitize").value("reason", "").empty());
  }
  EXPECT_GE(promoted, 1);
}

TEST(Loop, ParentIsTheBestUnlessExploringAndChoicesAreReproducible) {
  auto run = [](double explore_p) {
    test::fixture f(test::operator_json(), {{"loop", {{"explore_p", explore_p}}}}, {6, {}, {}, {}});
    fake_evaluator ev(test::default_model(), 0.01);
    scripted_source src(test::speeds_script({{"1.3"}, {"1.3"}, {"1.3"}, {"1.3"}, {"1.3"}, {"1.3"}}));
    campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
    loop.run();
    std::vector<std::pair<store::row_id, std::string>> out;
    for (const auto& c : src.contexts()) out.emplace_back(c.parent_id, c.strategy);
    const auto best = *f.db.find_campaign(f.campaign_id)->best_candidate_id;
    return std::make_pair(out, best);
  };
  const auto [never, best0] = run(0.0);
  ASSERT_EQ(never.size(), 6u);
  for (const auto& [parent, strategy] : never) {
    EXPECT_EQ(parent, best0);
    EXPECT_EQ(strategy, "improve");
  }
  // The baseline is an elite: with explore_p = 1 it is always the parent.
  const auto [always, best1] = run(1.0);
  for (const auto& [parent, strategy] : always) {
    EXPECT_NE(parent, best1);
    EXPECT_EQ(strategy, "diverse");
  }
  const auto [half_a, ba] = run(0.5);
  const auto [half_b, bb] = run(0.5);
  EXPECT_EQ(half_a, half_b);
  std::set<std::string> strategies;
  for (const auto& [p, s] : half_a) strategies.insert(s);
  EXPECT_EQ(strategies.size(), 2u) << "seed 7 should give both choices in 6 draws";
}

TEST(Loop, DropoutDecisionsAreRecordedAndMatchThePrompt) {
  test::fixture f(test::operator_json(), {}, {4, {}, {}, {}});
  fake_evaluator ev(test::default_model(), 0.01);
  scripted_source src(test::speeds_script({{"0.9"}, {"0.8"}, {"1.3"}, {"1.3"}}));
  auto s = f.settings();
  campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, s);
  loop.run();
  const auto ctxs = src.contexts();
  ASSERT_EQ(ctxs.size(), 4u);
  for (const auto& it : f.db.iterations_of(f.campaign_id)) {
    if (it.number == 0) continue;
    const auto d = f.db.dropout_decisions_of(it.id);
    ASSERT_FALSE(d.empty());
    std::set<std::string> in_prompt;
    for (const auto& i : ctxs[static_cast<std::size_t>(it.number - 1)].items) in_prompt.insert(i.id);
    EXPECT_TRUE(in_prompt.count("history:best"));  // protected, always there
    for (const auto& x : d) {
      EXPECT_EQ(x.kept, in_prompt.count(x.item_id) == 1) << x.item_id;
      EXPECT_DOUBLE_EQ(x.p, 0.3);
      const bool expect = unit_draw(derive_seed(derive_seed(7, "dropout", it.number), x.item_id)) >= 0.3;
      EXPECT_EQ(x.kept, expect) << "not reproducible from the seed: " << x.item_id;
    }
  }
  const auto at = loop.attribution();
  EXPECT_FALSE(at.empty());
  for (const auto& a : at) {
    if (a.kind == "directive") {
      EXPECT_EQ(a.kept + a.dropped, 4) << a.item_id;  // no calls: one draw per iteration
    }
  }
}

TEST(Loop, StagnationEscalatesStepByStepWithEvents) {
  test::fixture f(test::operator_json(), {{"loop", {{"stagnation_window", 2}, {"explore_p", 0.0}}}},
                  {10, {}, {}, {}});
  fake_evaluator ev(test::default_model(), 0.01);
  // A first gain (history grows), then nothing better: slower candidates.
  std::vector<std::vector<std::string>> script = {{"0.8"}};
  for (int i = 0; i < 9; ++i) script.push_back({"1.4"});
  scripted_source src(test::speeds_script(script));
  campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
  loop.run();
  std::vector<std::string> steps;
  std::vector<std::int64_t> at;
  for (const auto& e : f.db.events_of(f.campaign_id))
    if (e.kind == "escalation") {
      steps.push_back(e.data.value("step", ""));
      at.push_back(e.data.value("iteration", std::int64_t{0}));
    }
  EXPECT_EQ(steps, (std::vector<std::string>{"higher_p", "partial_restart", "restart_from_elite", "different_algorithm"}));
  EXPECT_EQ(at, (std::vector<std::int64_t>{3, 5, 7, 9}));
  const auto ctxs = src.contexts();
  ASSERT_EQ(ctxs.size(), 10u);
  const auto its = f.db.iterations_of(f.campaign_id);
  auto p_of = [&](std::int64_t n) { return *its[static_cast<std::size_t>(n)].dropout_p; };
  EXPECT_DOUBLE_EQ(p_of(3), 0.3);
  EXPECT_DOUBLE_EQ(p_of(4), 0.6);  // after higher_p
  // After partial_restart (iteration 5) about half the history is masked,
  // never the best or the baseline.
  const json info6 = its[6].prompt_info;
  const auto masked = info6.value("masked_history", std::vector<std::string>{});
  EXPECT_FALSE(masked.empty());
  for (const auto& m : masked) {
    EXPECT_NE(m, "history:best");
    EXPECT_NE(m, "history:baseline");
  }
  for (const auto& i : ctxs[5].items) EXPECT_EQ(std::count(masked.begin(), masked.end(), i.id), 0);
  // After restart_from_elite (iteration 7): parent from the elite pool.
  const auto best = *f.db.find_campaign(f.campaign_id)->best_candidate_id;
  EXPECT_EQ(ctxs[6].parent_id, best);
  EXPECT_NE(ctxs[7].parent_id, best);
  EXPECT_EQ(ctxs[7].strategy, "restart_elite");
  EXPECT_FALSE(ctxs[7].different_algorithm);
  // After different_algorithm (iteration 9): the flag is set.
  EXPECT_TRUE(ctxs[9].different_algorithm);
  EXPECT_EQ(ctxs[9].strategy, "new_algorithm");
}

struct budget_case {
  const char* name;
  json settings;
  store::budget_limits budget;
  int llm_errors_per_iteration;
  std::string reason;
  std::int64_t iterations;
};

TEST(Loop, EveryBudgetStopsTheLoop) {
  const budget_case cases[] = {
      {"iterations", json::object(), {3, {}, {}, {}}, 0, "budget: iterations", 3},
      {"wall time", json::object(), {{}, 0.0, {}, {}}, 0, "budget: wall time", 0},
      {"tokens", json::object(), {{}, {}, 2500, {}}, 0, "budget: tokens", 3},
      {"cost", json::object(), {{}, {}, {}, 0.025}, 0, "budget: cost", 3},
      {"llm errors", {{"loop", {{"max_llm_errors", 5}}}}, {}, 2, "budget: LLM errors", 3},
      {"target", {{"target_sol_fraction", 0.3}}, {}, 0, "target reached: 44.1 % of speed of light", 0},
  };
  for (const auto& bc : cases) {
    SCOPED_TRACE(bc.name);
    test::fixture f(test::operator_json(), bc.settings, bc.budget);
    fake_evaluator ev(test::default_model(), 0.0);
    const int errs = bc.llm_errors_per_iteration;
    auto base = test::speeds_script(std::vector<std::vector<std::string>>(20, {"1.3"}));
    scripted_source src([base, errs](const prompt_context& c) {
      auto a = base(c);
      a.llm_errors = errs;
      return a;
    });
    campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
    const auto r = loop.run();
    EXPECT_TRUE(r.finished);
    EXPECT_EQ(r.stop_reason, bc.reason);
    EXPECT_EQ(f.db.find_campaign(f.campaign_id)->spent_iterations, bc.iterations);
    EXPECT_EQ(static_cast<std::int64_t>(src.contexts().size()), bc.iterations);
    EXPECT_EQ(f.db.find_campaign(f.campaign_id)->state, store::campaign_state::done);
  }
}

TEST(Loop, FatalSourceErrorStopsAndMaxIterationsPauses) {
  test::fixture f(test::operator_json(), {}, {});
  fake_evaluator ev(test::default_model(), 0.01);
  scripted_source src([](const prompt_context& c) {
    source_answer a;
    if (c.iteration == 2) a.fatal = "401: key revoked";
    return a;
  });
  campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
  const auto paused = loop.run({1});
  EXPECT_FALSE(paused.finished);
  EXPECT_EQ(f.db.find_campaign(f.campaign_id)->state, store::campaign_state::paused);
  const auto r = loop.run();
  EXPECT_EQ(r.stop_reason, "stopped: 401: key revoked");
  EXPECT_EQ(r.iterations_run, 1);
  EXPECT_TRUE(r.verified);  // the seed is still the verified winner
}

TEST(Loop, NoisyHalfPercentIsATieClearTwentyPercentPromotes) {
  test::fixture f(test::operator_json(false), {{"loop", {{"explore_p", 0.0}}}}, {2, {}, {}, {}});
  // Screen and full are exact, so 0.995 reaches the head-to-head, where
  // both kernels are measured with 3 % noise.
  fake_evaluator ev(test::default_model(), 0.0);
  ev.set_stage_noise("compare", 0.03);
  // Speeds relative to the seed at its default parameters.
  const double sf = test::speed_factor(f.op.seed->to_json());
  scripted_source src(test::speeds_script({{std::to_string(sf * 0.995)}, {std::to_string(sf * 0.8)}}));
  campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
  loop.run({1});
  const auto seed_best = *f.db.find_campaign(f.campaign_id)->best_candidate_id;
  std::vector<std::string> verdicts;
  for (const auto& e : f.db.events_of(f.campaign_id))
    if (e.kind == "promoted" || e.kind == "not_promoted") verdicts.push_back(e.data["decision"].value("verdict", ""));
  EXPECT_EQ(verdicts, std::vector<std::string>{"tie"});
  EXPECT_EQ(f.db.find_candidate(seed_best)->origin, store::candidate_origin::seed);
  const auto r = loop.run();
  EXPECT_NE(*r.best_id, seed_best);
  EXPECT_EQ(f.count_events("promoted"), 1);
  // The gains are the promotions' (the checkpoint keeps none).
  const auto promoted = f.db.events_of_kind(f.campaign_id, "promoted");
  ASSERT_EQ(promoted.size(), 1u);
  EXPECT_EQ(promoted[0].data.value("iteration", -1), 2);
  EXPECT_GT(promoted[0].data["decision"].value("gain", 0.0), 0.15);
}

}  // namespace
}  // namespace kopt::campaign
