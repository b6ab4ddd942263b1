// Several models per campaign: the router's policies (fixed, weighted round
// robin, UCB bandit on gain per dollar) and its escalation rule, and the LLM
// source's per-call plans (model, strategy hint, per-call dropout, `n`),
// recorded with each call. The models are fakes: providers that answer from
// a function, with a price per call; no network.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>

#include "campaign/call_plan.hpp"
#include "campaign/sources.hpp"
#include "common/error.hpp"
#include "llm/router.hpp"

using namespace kopt;
using nlohmann::json;

namespace {

// Answers with a valid candidate whose kernel names the model and the call.
std::string answer(const std::string& who, int i) {
  return "Here it is.\n```cuda\nextern \"C\" __global__ void k(float* out) { /* " + who + " " +
         std::to_string(i) +
         " */ }\n```\n```json\n{\"launches\": [{\"kernel\": \"k\", \"grid\": [1], \"block\": [32], "
         "\"args\": "
         "[{\"tensor\": \"out\"}]}]}\n```\n";
}

class fake_model final : public llm::provider {
 public:
  fake_model(std::string model, double usd_per_call, int n_max = 1)
      : provider("fake", std::move(model)), usd_(usd_per_call), n_max_(n_max) {}
  llm::capabilities caps() const override { return {true, false, false, true, false}; }
  llm::completion complete(const llm::request& r) override {
    std::lock_guard lock(mu_);
    requests.push_back(r);
    llm::completion c;
    c.model = model();
    const int n = std::min(std::max(r.n, 1), n_max_);
    for (int i = 0; i < n; ++i) c.texts.push_back(answer(model(), counter_++));
    c.text = c.texts.front();
    if (n == 1) c.texts.clear();
    c.tokens.prompt = 1000;
    c.tokens.completion = 500;
    c.tokens.reported = true;
    return c;
  }
  std::vector<llm::request> requests;
  double usd_;

 private:
  std::mutex mu_;
  int n_max_;
  int counter_ = 0;
};

struct fleet {
  std::vector<fake_model*> models;
  std::vector<std::unique_ptr<llm::llm_client>> clients;
  llm::memory_recorder recorder;

  // Each model priced per call through the price table: 1000 input tokens
  // at input_per_mtok = usd * 1000 makes a call cost `usd`.
  void add(const std::string& name, double usd, int tier = 0, int n_max = 1) {
    auto p = std::make_unique<fake_model>(name, usd, n_max);
    models.push_back(p.get());
    llm::client_options o;
    o.recorder = &recorder;
    o.prices.set(name, {usd * 1000.0, 0, 0, 0});
    clients.push_back(std::make_unique<llm::llm_client>(std::move(p), o));
    tiers.push_back(tier);
  }
  std::vector<llm::router::arm> arms(std::vector<double> weights = {}) {
    std::vector<llm::router::arm> a;
    for (std::size_t i = 0; i < clients.size(); ++i)
      a.push_back({models[i]->model(), clients[i].get(), weights.empty() ? 1.0 : weights[i],
                   std::nullopt, tiers[i], 1});
    return a;
  }
  std::vector<int> tiers;
};

llm::completion paid(double usd) {
  llm::completion c;
  c.cost_usd = usd;
  c.tokens.prompt = 1000;
  return c;
}

campaign::prompt_context context(std::int64_t iteration, std::size_t k) {
  campaign::prompt_context ctx;
  ctx.iteration = iteration;
  ctx.strategy = "improve";
  ctx.k = k;
  ctx.seed = 1234 + static_cast<std::uint64_t>(iteration);
  ctx.parent = {{"source", "// parent"}, {"launches", json::array()}};
  ctx.items = {{"directive:vectorize", "directive", "Use vector loads.", true},
               {"directive:smem", "directive", "Stage data in shared memory.", true},
               {"history:iter1", "history", "Iteration 1: nothing.", true},
               {"history:best", "history", "The best runs at 30 %.", false}};
  return ctx;
}

}  // namespace

TEST(Router, FixedAndWeightedRoundRobin) {
  fleet f;
  f.add("a", 0.01);
  f.add("b", 0.10);
  llm::router fixed(f.arms());
  EXPECT_EQ(fixed.choose(4), (std::vector<std::size_t>{0, 0, 0, 0}));
  llm::router rr(f.arms({3.0, 1.0}), llm::selection_policy::round_robin);
  std::map<std::size_t, int> count;
  for (std::size_t i : rr.choose(40)) ++count[i];
  EXPECT_EQ(count[0], 30);
  EXPECT_EQ(count[1], 10);
  // Smooth: the minority model is never starved for long.
  const auto seq = rr.choose(4);
  EXPECT_EQ(std::count(seq.begin(), seq.end(), 1u), 1);
}

TEST(Router, BanditFindsTheBestGainPerDollar) {
  // Three models: cheap and weak, mid-priced and good, expensive and best.
  // Gain per dollar: cheap 0.05 * 0.1 / 0.01 = 0.5, mid 0.40 * 0.1 / 0.05 =
  // 0.8, expensive 0.6 * 0.12 / 1.0 = 0.072. The bandit should end up
  // sending most calls to the mid model and few to the expensive one.
  fleet f;
  f.add("cheap", 0.01);
  f.add("mid", 0.05);
  f.add("expensive", 1.00);
  const double usd[] = {0.01, 0.05, 1.00};
  const double p_gain[] = {0.05, 0.40, 0.60};
  const double gain[] = {0.10, 0.10, 0.12};
  llm::router r(f.arms(), llm::selection_policy::bandit, 0.5);
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  std::map<std::size_t, int> calls;
  for (int it = 0; it < 300; ++it) {
    for (std::size_t arm : r.choose(4)) {
      ++calls[arm];
      r.record_call(arm, paid(usd[arm]), 1);
      if (u(rng) < p_gain[arm]) r.record_gain(arm, gain[arm]);
    }
    r.end_iteration(0);
  }
  EXPECT_GT(calls[1], calls[0]);
  EXPECT_GT(calls[1], calls[2]);
  EXPECT_GT(calls[1], 600) << "mid got " << calls[1] << " of 1200 calls";
  EXPECT_LT(calls[2], 120) << "expensive got " << calls[2];
  const json j = r.to_json();
  EXPECT_EQ(j["policy"], "bandit");
  EXPECT_EQ(j["arms"][1]["calls"], calls[1]);
  EXPECT_GT(j["arms"][1]["gain_per_usd"].get<double>(), j["arms"][2]["gain_per_usd"].get<double>());
}

TEST(Router, BanditTriesEveryModelCheapestFirst) {
  fleet f;
  f.add("pricey", 1.0);
  f.add("cheap", 0.01);
  auto arms = f.arms();
  arms[0].cost_per_call_usd = 1.0;
  arms[1].cost_per_call_usd = 0.01;
  llm::router r(std::move(arms), llm::selection_policy::bandit);
  const auto first = r.choose(2);
  EXPECT_EQ(first, (std::vector<std::size_t>{1, 0}));
}

TEST(Router, EscalationMovesToStrongerModelsAndAGainResetsIt) {
  fleet f;
  f.add("small", 0.01, 0);
  f.add("large", 0.50, 1);
  f.add("largest", 2.00, 2);
  llm::escalation_rule esc;
  esc.after_stagnant_iterations = 2;
  llm::router r(f.arms(), llm::selection_policy::fixed, 1.0, esc);
  EXPECT_EQ(r.choose(1), std::vector<std::size_t>{0});
  r.end_iteration(0);
  EXPECT_EQ(r.choose(1), std::vector<std::size_t>{0});
  r.end_iteration(0);  // two without gain: one step up
  EXPECT_EQ(r.escalation_level(), 1);
  EXPECT_EQ(r.choose(1), std::vector<std::size_t>{1});
  r.end_iteration(0);
  r.end_iteration(0);
  EXPECT_EQ(r.choose(1), std::vector<std::size_t>{2});
  r.end_iteration(0);
  r.end_iteration(0);  // already at the top: stays there
  EXPECT_EQ(r.choose(1), std::vector<std::size_t>{2});
  r.end_iteration(0.05);
  EXPECT_EQ(r.escalation_level(), 0);
  EXPECT_EQ(r.choose(1), std::vector<std::size_t>{0});
  // The campaign loop's own escalation also moves up one tier.
  EXPECT_EQ(r.choose(1, true), std::vector<std::size_t>{1});
}

TEST(Router, ConfigParsing) {
  const json section = json::parse(R"({
    "provider": "openai", "base_url": "http://127.0.0.1:9/v1", "max_tokens": 4000,
    "models": [
      {"model": "gpt-4.1-mini", "name": "mini", "weight": 3, "cost_per_call_usd": 0.002},
      {"model": "o3", "api": "responses", "reasoning_effort": "high", "tier": 1},
      {"provider": "anthropic", "model": "claude-sonnet-4-5", "base_url": "http://127.0.0.1:9",
       "thinking": {"budget_tokens": 8000}, "tier": 1}],
    "selection": {"policy": "bandit", "exploration": 0.7},
    "escalation": {"after_stagnant_iterations": 4},
    "diversity": {"hints": true, "call_dropout_p": 0.25}})");
  const auto rc = llm::parse_router_config(section);
  ASSERT_EQ(rc.models.size(), 3u);
  EXPECT_EQ(rc.models[0].label, "mini");
  EXPECT_EQ(rc.models[0].weight, 3);
  EXPECT_EQ(rc.models[0].cost_per_call_usd, 0.002);
  EXPECT_EQ(rc.models[0].cfg.max_tokens, 4000);  // inherited from the section
  EXPECT_EQ(rc.models[1].label, "openai/o3");
  EXPECT_EQ(rc.models[1].cfg.api, "responses");
  EXPECT_EQ(rc.models[1].tier, 1);
  EXPECT_EQ(rc.models[2].cfg.kind, "anthropic");
  EXPECT_EQ(rc.models[2].cfg.thinking_budget_tokens, 8000);
  EXPECT_EQ(rc.policy, llm::selection_policy::bandit);
  EXPECT_DOUBLE_EQ(rc.exploration, 0.7);
  EXPECT_EQ(rc.escalation.after_stagnant_iterations, 4);
  EXPECT_DOUBLE_EQ(rc.diversity.call_dropout_p, 0.25);
  // The section alone is one model.
  EXPECT_EQ(
      llm::parse_router_config(json{{"provider", "openai"}, {"model", "gpt-4o"}}).models.size(),
      1u);
  // Mistakes are named.
  auto bad = [&](json j) {
    EXPECT_THROW(llm::parse_router_config(j), kopt::config_error) << j.dump();
  };
  bad({{"provider", "openai"}, {"models", json::array()}});
  bad({{"provider", "openai"},
       {"models", {{{"model", "a"}}, {{"model", "a"}}}}});  // same label twice
  bad({{"provider", "openai"}, {"models", {{{"model", "a"}, {"weight", 0}}}}});
  bad({{"provider", "openai"}, {"models", {{{"model", "a"}, {"selection", json::object()}}}}});
  bad({{"provider", "openai"}, {"model", "a"}, {"selection", {{"policy", "ucb"}}}});
  bad({{"provider", "openai"}, {"model", "a"}, {"diversity", {{"call_dropout_p", 1.5}}}});
  bad({{"provider", "openai"}, {"models", {{{"model", "a"}, {"reasoning_effort", "hgih"}}}}});
}

TEST(LlmSource, TheKCallsDifferAndEachRecordsWhatItShowed) {
  fleet f;
  f.add("m", 0.01);
  llm::diversity_options d;
  d.hints = true;
  d.call_dropout_p = 0.5;
  campaign::llm_source src(*f.clients[0], 1000, std::nullopt, d);
  const auto a = src.propose(context(3, 4));
  EXPECT_EQ(a.llm_errors, 0) << (a.problems.empty() ? "" : a.problems[0]);
  ASSERT_EQ(a.proposals.size(), 4u);
  const auto& reqs = f.models[0]->requests;
  ASSERT_EQ(reqs.size(), 4u);
  std::set<std::string> prompts;
  for (const auto& r : reqs) prompts.insert(r.messages.at(0).content);
  EXPECT_EQ(prompts.size(), 4u) << "the K prompts must differ";
  const auto recs = f.recorder.records();
  ASSERT_EQ(recs.size(), 4u);
  std::set<std::string> hints;
  int dropped_any = 0;
  for (const auto& rec : recs) {
    const json& m = rec.meta;
    EXPECT_EQ(m["iteration"], 3);
    EXPECT_EQ(m["calls"], 4);
    EXPECT_EQ(m["model"], "fake/m");  // provider/model, as llm.models labels it
    const auto call = m["call"].get<std::size_t>();
    if (call == 0) {
      EXPECT_TRUE(m["hint"].is_null());  // call 0: the iteration's own prompt
      EXPECT_TRUE(m["call_dropped"].empty());
      EXPECT_EQ(m["items"].size(), 4u);
    } else {
      hints.insert(m["hint"].get<std::string>());
    }
    // Protected items are never dropped by a call's own draw.
    EXPECT_NE(std::find(m["items"].begin(), m["items"].end(), "history:best"), m["items"].end());
    EXPECT_EQ(m["items"].size() + m["call_dropped"].size(), 4u);
    if (!m["call_dropped"].empty()) ++dropped_any;
    // The prompt says what the record says: a dropped item's text is absent.
    for (const auto& id : m["call_dropped"]) {
      if (id == "directive:smem") {
        EXPECT_EQ(rec.prompt.find("Stage data in shared memory"), std::string::npos);
      }
    }
  }
  EXPECT_EQ(hints.size(), 3u);
  EXPECT_GT(dropped_any, 0);
  for (const auto& p : a.proposals) EXPECT_EQ(p.note.rfind("fake/m call ", 0), 0u) << p.note;
  // The same iteration plans the same calls (a resumed iteration).
  fleet g;
  g.add("m", 0.01);
  campaign::llm_source again(*g.clients[0], 1000, std::nullopt, d);
  (void)again.propose(context(3, 4));
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& r1 = f.recorder.records();
    const auto& r2 = g.recorder.records();
    auto by_call = [](const std::vector<llm::call_record>& rs, std::size_t c) {
      for (const auto& r : rs)
        if (r.meta["call"] == c) return r.prompt;
      return std::string{};
    };
    EXPECT_EQ(by_call(r1, i), by_call(r2, i));
  }
}

TEST(LlmSource, HintsAloneKeepTheSharedPrefix) {
  fleet f;
  f.add("m", 0.01);
  campaign::llm_source src(*f.clients[0], 1000);  // default: hints, no per-call dropout
  (void)src.propose(context(5, 3));
  const auto& reqs = f.models[0]->requests;
  ASSERT_EQ(reqs.size(), 3u);
  // The calls run in parallel: call 1 (no hint) is not necessarily the
  // first request the model saw.
  std::string base;
  for (const auto& r : reqs)
    if (r.meta.value("call", -1) == 0) base = r.messages[0].content;
  ASSERT_FALSE(base.empty());
  for (const auto& r : reqs) {
    const std::string& p = r.messages[0].content;
    EXPECT_EQ(p.substr(0, base.size()), base) << "a hint only appends";
  }
  EXPECT_NE(reqs[1].messages[0].content, reqs[2].messages[0].content);
}

TEST(LlmSource, RouterSpreadsCallsAndNServesSeveralAnswersInOneCall) {
  fleet f;
  f.add("a", 0.01);
  f.add("b", 0.02, 0, 4);
  auto arms = f.arms();
  arms[1].answers_per_call = 4;
  llm::router r(std::move(arms), llm::selection_policy::round_robin);
  campaign::llm_source src(r, 1000, std::nullopt);
  EXPECT_EQ(src.name(), "fake");
  const auto a = src.propose(context(1, 6));  // a b a b a b -> no two b in a row
  EXPECT_EQ(a.proposals.size(), 6u);
  EXPECT_EQ(f.models[0]->requests.size(), 3u);
  EXPECT_EQ(f.models[1]->requests.size(), 3u);

  auto arms_b = f.arms();
  arms_b[1].answers_per_call = 4;
  std::swap(arms_b[0], arms_b[1]);  // b first: fixed picks it
  llm::router rb(std::move(arms_b), llm::selection_policy::fixed);
  campaign::llm_source sb(rb, 1000, std::nullopt);
  const std::size_t before = f.models[1]->requests.size();
  const auto b = sb.propose(context(2, 6));  // 6 answers: one call of n=4, one of n=2
  EXPECT_EQ(b.proposals.size(), 6u);
  ASSERT_EQ(f.models[1]->requests.size(), before + 2);
  EXPECT_EQ(f.models[1]->requests[before].n + f.models[1]->requests[before + 1].n, 6);
  int multi = 0;
  for (const auto& p : b.proposals) multi += p.note.find(" answer ") != std::string::npos;
  EXPECT_EQ(multi, 6);
  const auto st = rb.stats();
  EXPECT_EQ(st[0].calls, 2);
  EXPECT_EQ(st[0].proposals, 6);
}

TEST(LlmSource, ObserveCreditsTheModelWhoseCandidateWon) {
  fleet f;
  f.add("a", 0.01);
  f.add("b", 0.02);
  llm::router r(f.arms(), llm::selection_policy::round_robin);
  campaign::llm_source src(r, 1000, std::nullopt);
  const auto ans = src.propose(context(1, 2));
  ASSERT_EQ(ans.proposals.size(), 2u);
  // The proposal from model b wins.
  std::optional<std::string> winner;
  for (const auto& p : ans.proposals)
    if (p.note.rfind("b ", 0) == 0) winner = p.candidate.value("source", "");
  ASSERT_TRUE(winner);
  src.observe(1, winner, 0.2);
  src.observe(1, winner, 0.2);  // told twice: counted once
  const auto st = r.stats();
  EXPECT_EQ(st[0].promotions, 0);
  EXPECT_EQ(st[1].promotions, 1);
  EXPECT_DOUBLE_EQ(st[1].gain, 0.2);
  EXPECT_NEAR(st[1].cost_usd, 0.02, 1e-12);
}

TEST(LlmSource, OneModelStoppedIsNotFatalWhileAnotherAnswers) {
  class dead final : public llm::provider {
   public:
    dead() : provider("dead", "x") {}
    llm::capabilities caps() const override { return {true, false, false, false, false}; }
    llm::completion complete(const llm::request&) override {
      llm::completion c;
      c.status = llm::call_status::permanent;
      c.error = "HTTP 401: invalid key";
      return c;
    }
  };
  fleet f;
  f.add("a", 0.01);
  llm::llm_client dead_client(std::make_unique<dead>(), {});
  std::vector<llm::router::arm> arms = f.arms();
  arms.push_back({"dead", &dead_client, 1.0, std::nullopt, 0, 1});
  llm::router r(std::move(arms), llm::selection_policy::round_robin);
  campaign::llm_source src(r, 1000, std::nullopt);
  const auto a = src.propose(context(1, 2));
  EXPECT_EQ(a.proposals.size(), 1u);
  EXPECT_EQ(a.llm_errors, 1);
  EXPECT_FALSE(a.fatal) << *a.fatal;
  // With only the dead model left, the source gives up.
  llm::router only_dead({{"dead", &dead_client, 1.0, std::nullopt, 0, 1}});
  campaign::llm_source s2(only_dead, 1000, std::nullopt);
  EXPECT_TRUE(s2.propose(context(2, 1)).fatal);
}
