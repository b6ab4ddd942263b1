// Agent campaigns (provider "agent", campaign/agent_source.hpp) on the CPU:
// the loop waits (and says so in the store) while nothing is submitted,
// submissions are validated on entry, taken by the next iteration and go
// through screen, full sweep and promotion like any candidate, and a run
// killed after taking them serves the same ones again.
#include <gtest/gtest.h>

#include "campaign/agent_source.hpp"
#include "store/agent_submissions.hpp"
#include "support.hpp"

namespace kopt::test {
namespace {

void make_agent_campaign(fixture& f) {
  f.db.db()
      .prepare("UPDATE campaigns SET provider = 'agent' WHERE id = ?")
      .bind_all(f.campaign_id)
      .run();
}

std::string candidate_text(const std::string& name, const std::string& marker) {
  return kernel(name, marker).dump();
}

TEST(AgentCampaign, WaitsThenTakesSubmissionsThroughEveryStage) {
  fixture f;
  make_agent_campaign(f);
  campaign::fake_evaluator ev(default_model());
  {
    campaign::agent_source src(f.db, f.campaign_id);
    campaign::campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
    const auto r = loop.run();
    EXPECT_FALSE(r.finished);
    EXPECT_TRUE(r.waiting);
    EXPECT_NE(r.stop_reason.find("waits for an agent"), std::string::npos) << r.stop_reason;
  }
  EXPECT_EQ(store::campaign_waiting(f.db, f.campaign_id), "agent");
  EXPECT_EQ(store::waiting_campaigns(f.db).count(f.campaign_id), 1u);
  const auto brief = campaign::latest_agent_brief(f.db, f.campaign_id);
  ASSERT_TRUE(brief);
  EXPECT_EQ(brief->iteration, 1);
  EXPECT_EQ(brief->hash.size(), 64u);
  EXPECT_NE(brief->user.find("// speed 1.0"), std::string::npos);  // the seed is the parent
  const auto c0 = f.db.find_campaign(f.campaign_id);
  EXPECT_EQ(c0->spent_iterations, 0);  // waiting spends no iteration

  // Validation on entry.
  auto bad = campaign::submit_agent_candidate(f.db, f.campaign_id, R"({"source": "x"})", "bad",
                                              "alice", {}, {});
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status, "invalid_input");
  EXPECT_FALSE(bad.diagnostics.empty());
  EXPECT_EQ(
      campaign::submit_agent_candidate(f.db, 999, candidate_text("a", ""), "x", "alice", {}, {})
          .status,
      "not_found");
  EXPECT_EQ(campaign::submit_agent_candidate(f.db, f.campaign_id, candidate_text("a", ""), "x", "",
                                             {}, {})
                .status,
            "invalid_input");
  auto good = campaign::submit_agent_candidate(
      f.db, f.campaign_id, candidate_text("fast", "// speed 0.7"), "fast.json", "alice",
      std::string("one warp per row"), brief->hash);
  ASSERT_TRUE(good.ok()) << good.message;
  auto slow = campaign::submit_agent_candidate(
      f.db, f.campaign_id, candidate_text("slow", "// speed 3"), "slow.json", "bob", {}, {});
  ASSERT_TRUE(slow.ok());

  {
    campaign::agent_source src(f.db, f.campaign_id);
    campaign::campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
    const auto r = loop.run();
    EXPECT_TRUE(r.waiting);  // iteration 1 done, iteration 2 waits
    EXPECT_EQ(r.iterations_run, 1);
    ASSERT_TRUE(r.best_id);
    const auto best = f.db.find_candidate(*r.best_id);
    EXPECT_EQ(best->provider, "agent");
    EXPECT_NE(best->note->find("agent alice (submission " + std::to_string(*good.submission_id)),
              std::string::npos)
        << *best->note;
    EXPECT_NE(best->note->find(brief->hash.substr(0, 12)), std::string::npos);
    EXPECT_NE(best->note->find("one warp per row"), std::string::npos);
    EXPECT_NE(best->source.find("// speed 0.7"), std::string::npos);
  }
  for (const auto& s : store::agent_submissions_of(f.db, f.campaign_id)) {
    EXPECT_EQ(s.status, "taken");
    EXPECT_EQ(s.iteration, 1);
    EXPECT_TRUE(s.candidate_key);
  }
  EXPECT_EQ(f.count_events("promoted"), 1);
  EXPECT_EQ(f.db.find_campaign(f.campaign_id)->spent_iterations, 1);
  const auto b2 = campaign::latest_agent_brief(f.db, f.campaign_id);
  ASSERT_TRUE(b2);
  EXPECT_EQ(b2->iteration, 2);
  EXPECT_NE(b2->hash, brief->hash);
}

TEST(AgentCampaign, AKilledRunServesTheSameSubmissionsAgain) {
  fixture f;
  make_agent_campaign(f);
  campaign::fake_evaluator ev(default_model());
  auto run = [&](campaign::loop_hooks hooks = {}) {
    campaign::agent_source src(f.db, f.campaign_id);
    campaign::campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings(),
                                 std::move(hooks));
    return loop.run();
  };
  EXPECT_TRUE(run().waiting);
  ASSERT_TRUE(campaign::submit_agent_candidate(
                  f.db, f.campaign_id, candidate_text("k", "// speed 0.8"), "k", "carol", {}, {})
                  .ok());
  campaign::loop_hooks kill;
  kill.at = [](std::string_view point, std::int64_t) {
    if (point == "after_proposals") throw campaign::simulated_kill("kill -9");
  };
  // Killed after the proposals are stored: the resumed run evaluates them
  // without taking anything new.
  EXPECT_THROW(run(kill), campaign::simulated_kill);
  const auto r = run();
  EXPECT_TRUE(r.waiting);
  EXPECT_EQ(f.db.find_campaign(f.campaign_id)->spent_iterations, 1);
  std::int64_t agent_rows = 0;
  for (const auto& c : f.db.candidates_of(f.campaign_id))
    agent_rows += c.note && c.note->rfind("agent carol", 0) == 0;
  EXPECT_EQ(agent_rows, 1);  // one candidate row, not two
}

TEST(AgentCampaign, TakenButNotProposedIsServedAgain) {
  fixture f;
  make_agent_campaign(f);
  campaign::fake_evaluator ev(default_model());
  {
    campaign::agent_source src(f.db, f.campaign_id);
    campaign::campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
    EXPECT_TRUE(loop.run().waiting);
  }
  ASSERT_TRUE(campaign::submit_agent_candidate(
                  f.db, f.campaign_id, candidate_text("k", "// speed 0.8"), "k", "dan", {}, {})
                  .ok());
  // A source that takes the submissions and then dies before the loop stores
  // the proposals (a kill between the two transactions).
  struct dying : campaign::candidate_source {
    campaign::agent_source inner;
    dying(store::store& db, store::row_id id) : inner(db, id) {}
    std::string name() const override { return "agent"; }
    bool calls_llm() const override { return true; }
    campaign::source_answer propose(const campaign::prompt_context& ctx) override {
      (void)inner.propose(ctx);
      throw campaign::simulated_kill("killed after taking");
    }
  };
  {
    dying src(f.db, f.campaign_id);
    campaign::campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
    EXPECT_THROW(loop.run(), campaign::simulated_kill);
  }
  ASSERT_EQ(store::agent_submissions_of(f.db, f.campaign_id, "pending").size(), 0u);
  campaign::agent_source src(f.db, f.campaign_id);
  campaign::campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
  const auto r = loop.run();
  EXPECT_TRUE(r.waiting);
  EXPECT_EQ(f.db.find_campaign(f.campaign_id)->spent_iterations, 1);  // iteration 1 ran with it
  bool found = false;
  for (const auto& c : f.db.candidates_of(f.campaign_id))
    found = found || (c.note && c.note->rfind("agent dan", 0) == 0);
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace kopt::test
