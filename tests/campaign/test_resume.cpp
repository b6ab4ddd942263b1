// Resume: the loop object is destroyed at every stage of an iteration (a
// simulated kill thrown from a hook, from inside the evaluator's GPU work,
// or while its result is being stored), the store is reopened and a new
// loop continues. The campaign must end with the same best as an
// uninterrupted run, never evaluate the same thing twice, and never ask
// the source twice for the same iteration.
#include <gtest/gtest.h>

#include "support.hpp"

namespace kopt::campaign {
namespace {

using json = nlohmann::json;

std::vector<std::vector<std::string>> script() {
  return {{"0.9", "1.2", "0.95"}, {"0.7", "0.72", "1.5"}, {"0.69"}, {"0.6", "0.62"}, {"1.3"}};
}

struct outcome {
  std::string best_key;
  std::size_t evaluation_rows = 0;
  std::size_t source_calls = 0;
  std::vector<fake_evaluator::call> calls;
  std::string state;
};

std::size_t evaluation_rows(store::store& db, store::row_id campaign_id, bool check_unique) {
  std::size_t n = 0;
  std::set<std::tuple<store::row_id, std::string, store::row_id, std::string>> seen;
  for (const auto& c : db.candidates_of(campaign_id))
    for (const auto& e : db.evaluations_of(c.id)) {
      ++n;
      if (check_unique) {
        EXPECT_TRUE(seen.insert({e.candidate_id, e.stage, e.workload_id, e.seeds.dump()}).second)
            << "evaluated twice: candidate " << e.candidate_id << " " << e.stage << " " << e.workload_key;
      }
    }
  return n;
}

outcome uninterrupted() {
  test::fixture f(test::operator_json(), {{"loop", {{"explore_p", 0.3}}}}, {5, {}, {}, {}});
  fake_evaluator ev(test::default_model(), 0.01);
  scripted_source src(test::speeds_script(script()));
  campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
  loop.run();
  outcome o;
  o.best_key = content_key(candidate_json(*f.db.find_candidate(*f.db.find_campaign(f.campaign_id)->best_candidate_id)));
  o.evaluation_rows = evaluation_rows(f.db, f.campaign_id, true);
  o.source_calls = src.contexts().size();
  o.calls = ev.calls();
  o.state = std::string(store::to_string(f.db.find_campaign(f.campaign_id)->state));
  return o;
}

struct kill_plan {
  std::string point;         // hook point, or "" for evaluator faults
  std::int64_t iteration = 2;
  std::size_t kill_evaluate = 0, kill_record = 0;
};

outcome with_kill(const kill_plan& k, bool* killed) {
  test::fixture f(test::operator_json(), {{"loop", {{"explore_p", 0.3}}}}, {5, {}, {}, {}});
  std::vector<fake_evaluator::call> calls;
  std::size_t source_calls = 0;
  *killed = false;
  {
    fake_evaluator ev(test::default_model(), 0.01);
    ev.kill_on_evaluate(k.kill_evaluate);
    ev.kill_on_record(k.kill_record);
    scripted_source src(test::speeds_script(script()));
    loop_hooks hooks;
    hooks.at = [&](std::string_view point, std::int64_t n) {
      if (point == k.point && n == k.iteration) throw simulated_kill(std::string(point));
    };
    auto loop = std::make_unique<campaign_loop>(f.db, f.campaign_id, f.op, src, ev, f.settings(), hooks);
    try {
      loop->run();
    } catch (const simulated_kill&) {
      *killed = true;
    }
    loop.reset();
    // What the killed process finished, it keeps; the call in flight is lost.
    calls = ev.calls();
    source_calls = src.contexts().size();
  }
  store::store db = f.reopen();
  fake_evaluator ev(test::default_model(), 0.01);
  scripted_source src(test::speeds_script(script()));
  campaign_loop loop(db, f.campaign_id, f.op, src, ev, f.settings());
  loop.run();
  outcome o;
  o.best_key = content_key(candidate_json(*db.find_candidate(*db.find_campaign(f.campaign_id)->best_candidate_id)));
  o.evaluation_rows = evaluation_rows(db, f.campaign_id, true);
  o.source_calls = source_calls + src.contexts().size();
  o.calls = calls;
  for (const auto& c : ev.calls()) o.calls.push_back(c);
  o.state = std::string(store::to_string(db.find_campaign(f.campaign_id)->state));
  return o;
}

std::multiset<std::string> call_set(const std::vector<fake_evaluator::call>& calls) {
  std::multiset<std::string> s;
  for (const auto& c : calls)
    for (const auto& k : c.keys) {
      std::string wl;
      for (const auto& w : c.workloads) wl += w + ",";
      s.insert(c.stage + "|" + std::to_string(c.base_seed) + "|" + wl + "|" + k);
    }
  return s;
}

TEST(Resume, KillAtEveryStageKeepsTheResultAndRepeatsNothing) {
  const outcome ref = uninterrupted();
  ASSERT_EQ(ref.state, "done");
  ASSERT_EQ(ref.source_calls, 5u);
  const auto ref_calls = call_set(ref.calls);
  for (const auto& k : ref_calls) EXPECT_EQ(ref_calls.count(k), 1u) << k;

  std::vector<kill_plan> plans;
  for (const char* p : {"iteration_started", "after_proposals", "after_screen", "after_full", "after_compare",
                        "before_finish", "after_iteration"})
    plans.push_back({p, 2});
  plans.push_back({"after_setup", 0});
  plans.push_back({"after_full", 0});
  plans.push_back({"after_verify", 5});
  for (std::size_t n : {1u, 2u, 3u, 5u, 7u}) plans.push_back({"", 0, n, 0});  // during GPU work
  for (std::size_t n : {1u, 3u, 6u}) plans.push_back({"", 0, 0, n});         // while storing

  for (const auto& k : plans) {
    SCOPED_TRACE(k.point.empty() ? "evaluate " + std::to_string(k.kill_evaluate) + " record " +
                                       std::to_string(k.kill_record)
                                 : k.point + " @" + std::to_string(k.iteration));
    bool killed = false;
    const outcome o = with_kill(k, &killed);
    EXPECT_TRUE(killed) << "the fault never fired";
    EXPECT_EQ(o.state, "done");
    EXPECT_EQ(o.best_key, ref.best_key);
    EXPECT_EQ(o.evaluation_rows, ref.evaluation_rows);
    EXPECT_EQ(o.source_calls, ref.source_calls) << "the source was asked again for a stored iteration";
    // Every evaluation the uninterrupted run made, and nothing more, except
    // the one whose result was lost with the kill (in flight or rolled back).
    const auto got = call_set(o.calls);
    std::size_t extra = 0;
    for (const auto& key : got) {
      EXPECT_TRUE(ref_calls.count(key)) << "not in the uninterrupted run: " << key;
      if (got.count(key) > 1) ++extra;
    }
    const bool lost_in_flight = k.kill_record > 0;
    EXPECT_LE(extra, lost_in_flight ? 8u : 0u);
    for (const auto& key : ref_calls) EXPECT_TRUE(got.count(key)) << "missing: " << key;
  }
}

TEST(Resume, CacheHitsOnResumeAndPausedCampaignContinues) {
  test::fixture f;  // autotune on the seed: 20 points
  std::size_t first_calls = 0;
  {
    fake_evaluator ev(test::default_model(), 0.01);
    autotune_source src;
    campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
    const auto r = loop.run({1});
    EXPECT_FALSE(r.finished);
    first_calls = ev.calls().size();
  }
  EXPECT_EQ(f.db.find_campaign(f.campaign_id)->state, store::campaign_state::paused);
  const auto rows_before = evaluation_rows(f.db, f.campaign_id, true);
  fake_evaluator ev(test::default_model(), 0.01);
  autotune_source src;
  campaign_loop loop(f.db, f.campaign_id, f.op, src, ev, f.settings());
  const auto r = loop.run();
  EXPECT_TRUE(r.finished);
  EXPECT_GT(loop.cache_hits(), 0u);  // parent screen and full results come from the store
  // The second run only evaluated what the first had not: its screen calls
  // hold no key the first run screened.
  std::set<std::string> screened_again;
  for (const auto& c : ev.calls())
    if (c.stage == "screen" || c.stage == "full") {
      for (const auto& k : c.keys) {
        EXPECT_TRUE(screened_again.insert(c.stage + k).second);
      }
    }
  EXPECT_GT(evaluation_rows(f.db, f.campaign_id, true), rows_before);
  EXPECT_GT(first_calls, 0u);
  EXPECT_GE(f.count_events("resumed"), 1);
  // Running a finished campaign again does nothing.
  fake_evaluator idle(test::default_model(), 0.01);
  campaign_loop again(f.db, f.campaign_id, f.op, src, idle, f.settings());
  EXPECT_TRUE(again.run().finished);
  EXPECT_TRUE(idle.calls().empty());
}

}  // namespace
}  // namespace kopt::campaign
