// Parts of the campaign loop on their own: representative workloads,
// dropout masks, history masking, attribution, the promotion rule under
// noise, and the autotune source (exhaustive and local search).
#include <gtest/gtest.h>

#include <set>

#include "campaign/dropout.hpp"
#include "campaign/promotion.hpp"
#include "campaign/sources.hpp"
#include "campaign/workloads.hpp"
#include "support.hpp"

namespace kopt::campaign {
namespace {

using json = nlohmann::json;

TEST(Representative, OnePerBandPlusHeavyWorkloads) {
  const auto op = test::load_op(test::operator_json());
  const auto rep = representative_workloads(op);
  // small band {n1k, n4k}: n1k weighs more; medium {n64k, n1m}: tie, the
  // smaller first; large {n4m, n16m}: tie -> n4m; n16m carries ~70 % of the
  // weighted bytes, so it is added as heavy.
  EXPECT_EQ(rep.workloads, (std::vector<std::string>{"n1k", "n64k", "n4m", "n16m"}));
  std::map<std::string, std::string> why;
  for (const auto& p : rep.picks) why[p.workload] = p.reason;
  EXPECT_EQ(why["n1k"], "band:small");
  EXPECT_EQ(why["n64k"], "band:medium");
  EXPECT_EQ(why["n4m"], "band:large");
  EXPECT_EQ(why["n16m"], "heavy");
  EXPECT_GT(rep.picks.back().weighted_share, 0.25);
}

TEST(Representative, MeasuredTimesReplaceTheSizeProxy) {
  const auto op = test::load_op(test::operator_json());
  std::map<std::string, double> flat;  // launch-bound everywhere: equal times
  for (const auto& w : op.workloads) flat[w.id] = 3000;
  const auto rep = representative_workloads(op, flat);
  EXPECT_EQ(rep.workloads, (std::vector<std::string>{"n1k", "n64k", "n4m"}));
  // A dominant weight is heavy even when it is not its band's pick.
  auto opj = test::operator_json();
  opj["workloads"][5]["weight"] = 5.0;  // n16m
  opj["workloads"][4]["weight"] = 6.0;  // n4m, picked by the large band
  opj["workloads"][1]["weight"] = 4.0;  // n4k, now the small band's pick
  const auto op2 = test::load_op(opj);
  const auto rep2 = representative_workloads(op2, flat);
  EXPECT_EQ(rep2.workloads, (std::vector<std::string>{"n4k", "n64k", "n4m", "n16m"}));
}

std::vector<prompt_item> items(std::size_t n) {
  std::vector<prompt_item> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back({"directive:d" + std::to_string(i), "directive", "t", true});
  v.push_back({"history:best", "history", "best", false});
  return v;
}

TEST(Dropout, ReproducibleBySeedAndRoughlyP) {
  const auto it = items(2000);
  const auto a = apply_dropout(it, 0.3, 42);
  const auto b = apply_dropout(it, 0.3, 42);
  const auto c = apply_dropout(it, 0.3, 43);
  ASSERT_EQ(a.decisions.size(), 2000u);  // the protected item is not a decision
  std::size_t dropped = 0, differ = 0;
  for (std::size_t i = 0; i < a.decisions.size(); ++i) {
    EXPECT_EQ(a.decisions[i].kept, b.decisions[i].kept);
    EXPECT_EQ(a.decisions[i].item_id, it[i].id);
    EXPECT_DOUBLE_EQ(a.decisions[i].p, 0.3);
    dropped += !a.decisions[i].kept;
    differ += a.decisions[i].kept != c.decisions[i].kept;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / 2000.0, 0.3, 0.04);
  EXPECT_GT(differ, 200u);
  EXPECT_EQ(a.kept.back().id, "history:best");
  EXPECT_EQ(apply_dropout(it, 0.0, 1).kept.size(), it.size());
  EXPECT_EQ(apply_dropout(it, 1.0, 1).kept.size(), 1u);
  // An item's draw does not depend on the other items.
  std::vector<prompt_item> fewer(it.begin() + 1000, it.end());
  const auto d = apply_dropout(fewer, 0.3, 42);
  for (std::size_t i = 0; i < d.decisions.size(); ++i) EXPECT_EQ(d.decisions[i].kept, a.decisions[i + 1000].kept);
}

TEST(Dropout, MaskHistoryHalfNeverProtected) {
  std::vector<prompt_item> h = {{"history:best", "history", "", false}, {"history:baseline", "history", "", false}};
  for (int i = 1; i <= 9; ++i) h.push_back({"history:iter" + std::to_string(i), "history", "", true});
  const auto m = mask_history(h, 5);
  EXPECT_EQ(m.size(), 5u);
  EXPECT_FALSE(m.count("history:best"));
  EXPECT_FALSE(m.count("history:baseline"));
  EXPECT_EQ(m, mask_history(h, 5));
}

store::dropout_decision decision(const char* id, bool kept) {
  store::dropout_decision x;
  x.item_id = id;
  x.item_kind = "directive";
  x.kept = kept;
  return x;
}

store::llm_call_record call_row(store::row_id id, json meta, std::string status = "ok") {
  store::llm_call_record c;
  c.id = id;
  c.status = std::move(status);
  c.request = {{"temperature", 0.7}};
  if (!meta.is_null()) c.request["meta"] = std::move(meta);
  return c;
}

TEST(Dropout, AttributionComparesGainsWithAndWithout) {
  // Three draws (no calls: one per iteration).
  std::vector<attribution_draw> draws = {
      {std::nullopt, {decision("a", true), decision("b", false)}, 0.2},
      {std::nullopt, {decision("a", true), decision("b", true)}, 0.1},
      {std::nullopt, {decision("a", false), decision("b", true)}, 0.0}};
  const auto at = attribution(draws);
  ASSERT_EQ(at.size(), 2u);
  EXPECT_EQ(at[0].item_id, "a");  // largest effect first
  EXPECT_EQ(at[0].kept, 2);
  EXPECT_EQ(at[0].dropped, 1);
  EXPECT_NEAR(at[0].mean_gain_kept, 0.15, 1e-12);
  EXPECT_NEAR(at[0].mean_gain_dropped, 0.0, 1e-12);
  EXPECT_NEAR(at[1].mean_gain_kept, 0.05, 1e-12);
  EXPECT_NEAR(at[1].mean_gain_dropped, 0.2, 1e-12);
}

TEST(Dropout, CallDecisionsApplyTheCallsOwnDraw) {
  const std::vector<store::dropout_decision> it = {decision("a", true), decision("b", true),
                                                   decision("c", false)};
  auto kept = [](const std::vector<store::dropout_decision>& ds) {
    std::string out;
    for (const auto& d : ds) out += d.kept ? d.item_id : std::string("-");
    return out;
  };
  // call_dropped removes a kept item; the iteration's dropped stays dropped.
  EXPECT_EQ(kept(call_decisions(it, call_row(1, {{"call_dropped", {"b"}}, {"items", {"a"}}}))),
            "a--");
  // items alone says the same (what the call showed).
  EXPECT_EQ(kept(call_decisions(it, call_row(2, {{"items", {"a", "history:best"}}}))), "a--");
  // Call 1 of an iteration: nothing of its own dropped.
  EXPECT_EQ(kept(call_decisions(it, call_row(3, {{"call_dropped", json::array()},
                                                 {"items", {"a", "b", "history:best"}}}))),
            "ab-");
  // Old format: no meta, or meta without the draw: the iteration's decisions.
  EXPECT_EQ(kept(call_decisions(it, call_row(4, nullptr))), "ab-");
  EXPECT_EQ(kept(call_decisions(it, call_row(5, {{"model", "m"}}))), "ab-");
}

TEST(Dropout, OnlyThePromotedCallGetsTheGain) {
  const auto c1 = call_row(11, {{"call", 0}, {"call_dropped", {"a"}}, {"items", {"b"}}});
  const auto c2 = call_row(12, {{"call", 1}, {"call_dropped", {"b"}}, {"items", {"a"}}});
  const auto failed = call_row(13, {{"call", 2}, {"call_dropped", json::array()}}, "timeout");
  attribution_iteration it;
  it.decisions = {decision("a", true), decision("b", true), decision("c", false)};
  it.calls = {&c1, &c2, &failed};
  it.promoted = true;
  it.gain = 0.3;
  it.promoted_call = 12;
  const auto draws = attribution_draws(it);
  ASSERT_EQ(draws.size(), 2u) << "a call that got no answer is not a draw";
  EXPECT_EQ(draws[0].llm_call_id, 11);
  EXPECT_EQ(draws[0].gain, 0.0);
  EXPECT_EQ(draws[1].llm_call_id, 12);
  EXPECT_EQ(draws[1].gain, 0.3);
  const auto at = attribution(draws);
  std::map<std::string, item_attribution> by;
  for (const auto& a : at) by[a.item_id] = a;
  // a: shown only to the winning call; b: shown only to the other one.
  EXPECT_EQ(by["a"].kept, 1);
  EXPECT_EQ(by["a"].dropped, 1);
  EXPECT_NEAR(by["a"].mean_gain_kept, 0.3, 1e-12);
  EXPECT_NEAR(by["a"].mean_gain_dropped, 0.0, 1e-12);
  EXPECT_NEAR(by["b"].mean_gain_kept, 0.0, 1e-12);
  EXPECT_NEAR(by["b"].mean_gain_dropped, 0.3, 1e-12);
  // c: the iteration dropped it for both calls.
  EXPECT_EQ(by["c"].kept, 0);
  EXPECT_EQ(by["c"].dropped, 2);
  EXPECT_NEAR(by["c"].mean_gain_dropped, 0.15, 1e-12);
}

TEST(Dropout, IterationsThatCannotBeSplitByCallCountOnce) {
  const auto c1 = call_row(21, nullptr);
  const auto c2 = call_row(22, nullptr);
  attribution_iteration it;
  it.decisions = {decision("a", true), decision("b", false)};
  it.promoted = true;
  it.gain = 0.2;
  // No recorded calls (autotune, scripted sources): the iteration is one draw.
  auto draws = attribution_draws(it);
  ASSERT_EQ(draws.size(), 1u);
  EXPECT_FALSE(draws[0].llm_call_id);
  EXPECT_EQ(draws[0].gain, 0.2);
  // Calls, but the promoted candidate names none of them (unlinked rows):
  // the gain cannot be placed on a call, so the iteration stays one draw.
  it.calls = {&c1, &c2};
  draws = attribution_draws(it);
  ASSERT_EQ(draws.size(), 1u);
  EXPECT_EQ(draws[0].gain, 0.2);
  it.promoted_call = 99;  // a call of another iteration
  EXPECT_EQ(attribution_draws(it).size(), 1u);
  // Linked, calls without meta (before per-call draws): one draw per call
  // with the iteration's decisions, the gain on the promoted call only.
  it.promoted_call = 22;
  draws = attribution_draws(it);
  ASSERT_EQ(draws.size(), 2u);
  EXPECT_EQ(draws[0].gain, 0.0);
  EXPECT_EQ(draws[1].gain, 0.2);
  for (const auto& d : draws) {
    ASSERT_EQ(d.decisions.size(), 2u);
    EXPECT_TRUE(d.decisions[0].kept);
    EXPECT_FALSE(d.decisions[1].kept);
  }
  // Not promoted: every call is a draw with gain 0.
  it.promoted = false;
  it.promoted_call.reset();
  draws = attribution_draws(it);
  ASSERT_EQ(draws.size(), 2u);
  EXPECT_EQ(draws[0].gain + draws[1].gain, 0.0);
  // Nothing optional in the prompt: nothing to attribute.
  it.decisions.clear();
  EXPECT_TRUE(attribution_draws(it).empty());
}

subject_result noisy(double time_ns, double rsd, std::uint64_t seed, std::size_t n = 40) {
  subject_result r;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  for (const char* w : {"n1k", "n64k", "n16m"}) {
    workload_result wr;
    wr.status = "ok";
    for (std::size_t i = 0; i < n; ++i) wr.samples_ns.push_back(time_ns * (1 + rsd * nd(rng)));
    auto v = wr.samples_ns;
    std::sort(v.begin(), v.end());
    wr.median_ns = v[n / 2];
    r.workloads[w] = wr;
  }
  return r;
}

TEST(Promotion, HalfPercentInsideNoiseIsATieTwentyPercentPromotes) {
  const std::map<std::string, double> w = {{"n1k", 0.3}, {"n64k", 0.3}, {"n16m", 0.4}};
  const auto inc = noisy(10000, 0.03, 1);
  const auto tie = decide_promotion(inc, noisy(9950, 0.03, 2), w, {});
  EXPECT_EQ(tie.v, promotion_decision::verdict::tie) << tie.reason;
  EXPECT_FALSE(tie.promoted());
  EXPECT_LT(tie.low, 1.0);
  EXPECT_GT(tie.high, 1.0);
  const auto win = decide_promotion(inc, noisy(8000, 0.03, 3), w, {});
  EXPECT_TRUE(win.promoted()) << win.reason;
  EXPECT_NEAR(win.gain, 0.25, 0.03);
  const auto worse = decide_promotion(inc, noisy(12000, 0.03, 4), w, {});
  EXPECT_EQ(worse.v, promotion_decision::verdict::worse);
  auto broken = noisy(8000, 0.03, 5);
  broken.workloads["n64k"].status = "incorrect";
  EXPECT_EQ(decide_promotion(inc, broken, w, {}).v, promotion_decision::verdict::incorrect);
  // A clear overall win that regresses one workload beyond noise is refused.
  auto mixed = noisy(7000, 0.01, 6);
  auto slow = noisy(11500, 0.01, 7);
  mixed.workloads["n1k"] = slow.workloads["n1k"];
  EXPECT_EQ(decide_promotion(noisy(10000, 0.01, 8), mixed, w, {}).v, promotion_decision::verdict::worse);
  // A few percent slower on one workload inside max_regression (default 5 %)
  // does not veto a clear weighted win; a stricter rule does.
  auto small_loss = noisy(7000, 0.01, 9);
  small_loss.workloads["n16m"] = noisy(10300, 0.01, 10).workloads["n16m"];
  const auto inc2 = noisy(10000, 0.01, 8);
  const auto ok = decide_promotion(inc2, small_loss, w, {});
  EXPECT_TRUE(ok.promoted()) << ok.reason;
  promotion_rule strict;
  strict.max_regression = 0.01;
  const auto refused = decide_promotion(inc2, small_loss, w, strict);
  EXPECT_EQ(refused.v, promotion_decision::verdict::worse) << refused.reason;
  EXPECT_NE(refused.reason.find("n16m"), std::string::npos) << refused.reason;
}

prompt_context ctx_for(const json& parent, std::uint64_t seed, std::set<std::string>* tried) {
  prompt_context c;
  c.parent = parent;
  c.parent_point = default_point(parent);
  c.k = 4;
  c.seed = seed;
  c.already_tried = [tried](const std::string& k) { return tried->count(k) > 0; };
  return c;
}

TEST(Autotune, ExhaustiveForSmallSpaces) {
  const json seed = test::kernel("seed", "// speed 1.0", test::seed_params(false));
  ASSERT_EQ(space_size(seed), 20u);
  std::set<std::string> tried = {content_key(seed)};
  autotune_source src;
  const auto a = src.propose(ctx_for(seed, 1, &tried));
  ASSERT_EQ(a.proposals.size(), 19u);  // every point but the parent's own
  std::set<param_values> points;
  for (const auto& p : a.proposals) {
    EXPECT_EQ(p.origin, store::candidate_origin::tuned);
    EXPECT_EQ(p.candidate.value("source", ""), seed.value("source", ""));
    points.insert(default_point(p.candidate));
    tried.insert(content_key(p.candidate));
  }
  EXPECT_EQ(points.size(), 19u);
  EXPECT_TRUE(src.propose(ctx_for(seed, 1, &tried)).proposals.empty());
}

TEST(Autotune, SeededLocalSearchForLargeSpaces) {
  const json seed = test::kernel("seed", "// speed 1.0", test::seed_params(true));
  ASSERT_EQ(space_size(seed), 144u);
  std::set<std::string> tried = {content_key(seed)};
  autotune_source src;
  const auto a = src.propose(ctx_for(seed, 9, &tried));
  const auto b = src.propose(ctx_for(seed, 9, &tried));
  ASSERT_EQ(a.proposals.size(), 4u);
  const auto base = default_point(seed);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(content_key(a.proposals[i].candidate), content_key(b.proposals[i].candidate));
    // A neighbour: exactly one parameter moved to an adjacent value.
    const auto p = default_point(a.proposals[i].candidate);
    int moved = 0;
    for (const auto& [k, v] : p)
      if (v != base.at(k)) {
        ++moved;
        const auto vals = seed["parameters"][k]["values"].get<std::vector<std::int64_t>>();
        const auto i0 = std::find(vals.begin(), vals.end(), base.at(k)) - vals.begin();
        const auto i1 = std::find(vals.begin(), vals.end(), v) - vals.begin();
        EXPECT_EQ(std::abs(i0 - i1), 1);
      }
    EXPECT_EQ(moved, 1);
  }
  // The parent has 5 neighbours (BLOCK 128/512, ITEMS 2/8, UNROLL 1/4 minus
  // none at an edge = 6); once all are tried, random points fill up.
  for (int round = 0; round < 3; ++round) {
    const auto r = src.propose(ctx_for(seed, 10 + static_cast<std::uint64_t>(round), &tried));
    EXPECT_EQ(r.proposals.size(), 4u);
    for (const auto& p : r.proposals) EXPECT_TRUE(tried.insert(content_key(p.candidate)).second);
  }
}

}  // namespace
}  // namespace kopt::campaign

namespace kopt::campaign {
namespace {

// The LLM source's prompt comes from kopt's templates: measured parent ->
// "revise" with the measurements, the diagnosis of the heaviest workloads
// and the snippets that survived dropout; never-measured parent -> "first";
// a request for a new algorithm -> "broaden".
TEST(ComposePrompt, RendersTemplatesWithDiagnosisAndSnippets) {
  const auto op = test::load_op(test::operator_json());
  prompt_setup setup;
  setup.gpu.name = "H200";
  setup.gpu.sm_count = 132;
  setup.gpu.dram_bytes_per_s = 4.8e12;
  setup.template_dir = std::filesystem::path(KOPT_SOURCE_DIR) / "prompts/templates";
  prompt_context ctx;
  ctx.op = &op;
  ctx.iteration = 3;
  ctx.parent = op.seed ? op.seed->to_json() : op.reference.to_json();
  ctx.parent_id = 7;
  auto first = compose_prompt(ctx, setup);
  EXPECT_EQ(first.template_name, "first");
  EXPECT_FALSE(first.system.empty());

  for (const auto& w : op.workloads) {
    workload_result r;
    r.status = "ok";
    r.median_ns = 12345;
    r.sol_fraction = 0.42;
    r.diagnosis = {{"primary", "memory-bound-far-from-peak"},
                   {"findings", json::array({{{"class", "memory-bound-far-from-peak"}, {"severity", 0.6},
                                               {"summary", "DRAM bandwidth only 31% of peak"}}})}};
    ctx.parent_results[w.id] = r;
  }
  ctx.items.push_back({"snippet:vector-loads", "snippet", "Vector loads\nUse 16-byte loads.", true});
  ctx.items.push_back({"history:c3", "history", "tried BLOCK=512: slower", true});
  const auto rev = compose_prompt(ctx, setup);
  EXPECT_EQ(rev.template_name, "revise");
  EXPECT_NE(rev.user.find("DRAM bandwidth only 31% of peak"), std::string::npos) << rev.user;
  EXPECT_NE(rev.user.find("memory-bound-far-from-peak"), std::string::npos);
  EXPECT_NE(rev.user.find("Use 16-byte loads."), std::string::npos);
  EXPECT_NE(rev.user.find("tried BLOCK=512"), std::string::npos);
  EXPECT_NE(std::find(rev.present_items.begin(), rev.present_items.end(), "snippet:vector-loads"),
            rev.present_items.end());

  ctx.different_algorithm = true;
  EXPECT_EQ(compose_prompt(ctx, setup).template_name, "broaden");
}

}  // namespace
}  // namespace kopt::campaign
