// Typed inserts and reads, CHECK constraints and foreign keys of the store.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "store/store.hpp"
#include "temp_dir.hpp"

namespace ks = kopt::store;
using nlohmann::json;

namespace {

class StoreRecords : public ::testing::Test {
 protected:
  void SetUp() override {
    s_.emplace(ks::store::open(dir_ / "kopt.db"));
    ks::operator_record op;
    op.name = "rmsnorm";
    op.op_type = "rmsnorm";
    op.config = json{{"name", "rmsnorm"}, {"op_type", "rmsnorm"}};
    op.content_hash = kopt::sha256_hex(op.config.dump());
    op.source_path = "/configs/rmsnorm.json";
    std::vector<ks::workload_record> wl(2);
    wl[0].key = "t16_h4096";
    wl[0].axes = json{{"tokens", 16}, {"hidden", 4096}};
    wl[0].weight = 0.2;
    wl[1].key = "t2500_h1024";
    wl[1].axes = json{{"tokens", 2500}, {"hidden", 1024}};
    wl[1].weight = 0.05;
    auto r = s().put_operator(op, wl);
    ASSERT_TRUE(r.created);
    op_id_ = r.operator_id;
    auto w = s().workloads_of(op_id_);
    ASSERT_EQ(w.size(), 2u);
    w0_ = w[0].id;
    w1_ = w[1].id;

    ks::campaign_record c;
    c.operator_id = op_id_;
    c.provider = "autotune";
    c.settings = json{{"dropout_p", 0.3}};
    c.budget.iterations = 20;
    c.budget.cost_usd = 12.5;
    c.priority = 3;
    c.team = "inference";
    campaign_ = s().create_campaign(c);
  }

  ks::store& s() { return *s_; }

  ks::row_id add_candidate(ks::candidate_origin origin, std::optional<ks::row_id> iteration,
                           std::string source) {
    ks::candidate_record c;
    c.campaign_id = campaign_;
    c.iteration_id = iteration;
    c.origin = origin;
    c.source = std::move(source);
    c.launch_plan = json{{"launches", json::array({{{"kernel", "k"}}})}};
    return s().add_candidate(c);
  }

  ks::row_id add_eval(ks::row_id cand, ks::row_id workload, ks::eval_status st, double sol) {
    ks::evaluation_record e;
    e.candidate_id = cand;
    e.workload_id = workload;
    e.status = st;
    if (st == ks::eval_status::ok) e.sol_fraction = sol;
    return s().add_evaluation(e);
  }

  kopt::test::temp_dir dir_;
  std::optional<ks::store> s_;
  ks::row_id op_id_ = 0, w0_ = 0, w1_ = 0, campaign_ = 0;
};

}  // namespace

TEST_F(StoreRecords, OperatorWithSameHashIsTheSameRow) {
  ks::operator_record again;
  again.name = "rmsnorm-renamed";  // the hash decides, not the name
  again.op_type = "rmsnorm";
  again.config = json::object();
  again.content_hash = s().find_operator(op_id_)->content_hash;
  const std::vector<ks::workload_record> more(3);
  auto r = s().put_operator(again, more);
  EXPECT_FALSE(r.created);
  EXPECT_EQ(r.operator_id, op_id_);
  EXPECT_EQ(s().workloads_of(op_id_).size(), 2u);

  auto op = s().find_operator(op_id_);
  ASSERT_TRUE(op);
  EXPECT_EQ(op->name, "rmsnorm");
  EXPECT_EQ(op->config["op_type"], "rmsnorm");
  EXPECT_EQ(op->source_path, "/configs/rmsnorm.json");
  EXPECT_GT(op->created_at, 1'700'000'000'000);
  auto w = s().workloads_of(op_id_);
  EXPECT_EQ(w[0].key, "t16_h4096");
  EXPECT_EQ(w[0].axes["hidden"], 4096);
  EXPECT_DOUBLE_EQ(w[1].weight, 0.05);
  EXPECT_EQ(w[1].position, 1);
  EXPECT_FALSE(s().find_operator(op_id_ + 100));
}

TEST_F(StoreRecords, CampaignRoundTripAndStateChanges) {
  auto c = s().find_campaign(campaign_);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, ks::campaign_state::queued);
  EXPECT_EQ(c->operator_name, "rmsnorm");
  EXPECT_EQ(c->budget.iterations, 20);
  EXPECT_FALSE(c->budget.tokens);
  EXPECT_DOUBLE_EQ(*c->budget.cost_usd, 12.5);
  EXPECT_EQ(c->settings["dropout_p"], 0.3);
  EXPECT_EQ(c->priority, 3);
  EXPECT_EQ(c->team, "inference");
  EXPECT_FALSE(c->started_at);

  s().set_campaign_state(campaign_, ks::campaign_state::running);
  s().add_campaign_spend(campaign_, 1, 1500, 0.25);
  s().add_campaign_spend(campaign_, 1, 500, 0.5, 3.0);
  c = s().find_campaign(campaign_);
  EXPECT_EQ(c->state, ks::campaign_state::running);
  EXPECT_TRUE(c->started_at);
  EXPECT_FALSE(c->finished_at);
  EXPECT_EQ(c->spent_iterations, 2);
  EXPECT_EQ(c->spent_tokens, 2000);
  EXPECT_DOUBLE_EQ(c->spent_cost_usd, 0.75);
  EXPECT_DOUBLE_EQ(c->spent_wall_time_s, 3.0);

  s().set_campaign_state(campaign_, ks::campaign_state::done, "target reached");
  c = s().find_campaign(campaign_);
  EXPECT_TRUE(c->finished_at);
  EXPECT_EQ(c->stop_reason, "target reached");

  EXPECT_THROW(s().set_campaign_state(9999, ks::campaign_state::paused), kopt::not_found_error);

  ks::campaign_record second;
  second.operator_id = op_id_;
  second.provider = "openai";
  second.team = "training";
  const auto id2 = s().create_campaign(second);
  auto all = s().list_campaigns();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, id2);  // newest first
  EXPECT_EQ(s().list_campaigns(ks::campaign_state::done).size(), 1u);
  EXPECT_EQ(s().list_campaigns(std::nullopt, "training").at(0).id, id2);
  EXPECT_EQ(s().list_campaigns(std::nullopt, std::nullopt, 1).size(), 1u);
  auto counts = s().campaign_counts();
  EXPECT_EQ(counts["done"], 1);
  EXPECT_EQ(counts["queued"], 1);
  EXPECT_EQ(counts["failed"], 0);
}

TEST_F(StoreRecords, CandidateCompilationEvaluationRoundTrip) {
  const auto ref = add_candidate(ks::candidate_origin::reference, std::nullopt, "__global__ r(){}");
  auto cand = s().find_candidate(ref);
  ASSERT_TRUE(cand);
  EXPECT_EQ(cand->origin, ks::candidate_origin::reference);
  EXPECT_EQ(cand->source_hash, kopt::sha256_hex("__global__ r(){}"));
  EXPECT_EQ(cand->launch_plan["launches"][0]["kernel"], "k");
  EXPECT_FALSE(cand->iteration_id);

  ks::compilation_record k;
  k.candidate_id = ref;
  k.parameter_values = json{{"BLOCK", 256}};
  k.arch = "sm_90a";
  k.options = json::array({"--use_fast_math"});
  k.log = "ptxas info";
  k.registers = 32;
  k.shared_bytes = 1024;
  k.spill_bytes = 0;
  k.duration_ms = 120.5;
  k.cubin_hash = "abc";
  const auto kid = s().add_compilation(k);
  auto ks_ = s().compilations_of(ref);
  ASSERT_EQ(ks_.size(), 1u);
  EXPECT_EQ(ks_[0].parameter_values["BLOCK"], 256);
  EXPECT_EQ(ks_[0].registers, 32);
  EXPECT_EQ(ks_[0].options[0], "--use_fast_math");

  ks::evaluation_record e;
  e.candidate_id = ref;
  e.compilation_id = kid;
  e.workload_id = w1_;
  e.status = ks::eval_status::ok;
  e.max_abs_err = 1e-3;
  e.matched_ratio = 1.0;
  e.timing.median_ns = 5100.0;
  e.timing.q1_ns = 5000.0;
  e.timing.samples = 40;
  e.timing.stop_reason = "rel_stdev";
  e.timing.discarded = 2;
  e.timing.detail = json{{"event_median_ns", 5300}};
  e.counters = json{{"dram__bytes_read.sum", 1 << 20}};
  e.device = json{{"name", "NVIDIA H200"}, {"sm_clock_mhz", 1980}};
  e.seeds = json::array({1, 2, 3});
  e.sol_fraction = 0.61;
  s().add_evaluation(e);
  add_eval(ref, w0_, ks::eval_status::timeout, 0);
  auto evals = s().evaluations_of(ref);
  ASSERT_EQ(evals.size(), 2u);
  EXPECT_EQ(evals[0].workload_key, "t16_h4096");  // config order
  EXPECT_EQ(evals[0].status, ks::eval_status::timeout);
  EXPECT_TRUE(evals[0].timing.detail.is_null());
  const auto& ok = evals[1];
  EXPECT_EQ(ok.compilation_id, kid);
  EXPECT_DOUBLE_EQ(*ok.timing.median_ns, 5100.0);
  EXPECT_EQ(ok.timing.samples, 40);
  EXPECT_EQ(ok.timing.stop_reason, "rel_stdev");
  EXPECT_EQ(ok.timing.detail["event_median_ns"], 5300);
  EXPECT_EQ(ok.device["name"], "NVIDIA H200");
  EXPECT_EQ(ok.seeds.size(), 3u);
  EXPECT_FALSE(ok.timing.min_ns);
  EXPECT_EQ(ok.stage, "full");
}

TEST_F(StoreRecords, IterationsDropoutAndSummaries) {
  ks::iteration_record it;
  it.campaign_id = campaign_;
  it.number = 1;
  it.strategy = "improve";
  it.dropout_p = 0.3;
  it.prompt_info = json{{"template", "improve.md"}};
  const auto iter = s().add_iteration(it);
  EXPECT_THROW(s().add_iteration(it), kopt::store_error);  // UNIQUE (campaign, number)

  const std::vector<ks::dropout_decision> d{{0, 0, "directive:vectorize", "directive", true, 0.3},
                                            {0, 0, "history:7", "history", false, 0.3}};
  s().add_dropout_decisions(iter, d);
  auto back = s().dropout_decisions_of(iter);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_FALSE(back[1].kept);
  EXPECT_EQ(back[1].item_kind, "history");

  ks::llm_call_record call;
  call.campaign_id = campaign_;
  call.iteration_id = iter;
  call.provider = "openai";
  call.model = "gpt-x";
  call.prompt = "make it fast";
  call.response = "```cuda ...```";
  call.request = json{{"temperature", 0.7}};
  call.prompt_tokens = 1000;
  call.completion_tokens = 300;
  call.cost_usd = 0.02;
  s().add_llm_call(call);
  auto calls = s().llm_calls_of(campaign_);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].request["temperature"], 0.7);
  EXPECT_EQ(calls[0].response, "```cuda ...```");

  const auto a = add_candidate(ks::candidate_origin::llm, iter, "a");
  const auto b = add_candidate(ks::candidate_origin::llm, iter, "b");
  const auto c = add_candidate(ks::candidate_origin::llm, iter, "c");
  add_eval(a, w0_, ks::eval_status::ok, 0.5);
  add_eval(a, w1_, ks::eval_status::ok, 0.9);  // weighted (0.2*0.5+0.05*0.9)/0.25 = 0.58
  add_eval(b, w0_, ks::eval_status::ok, 0.7);
  add_eval(b, w1_, ks::eval_status::incorrect, 0);  // not eligible for best
  ks::compilation_record failed;
  failed.candidate_id = c;
  failed.arch = "sm_90a";
  failed.status = "error";
  s().add_compilation(failed);
  add_eval(c, w0_, ks::eval_status::compile_error, 0);
  s().finish_iteration(iter, "done", "3 candidates");

  auto sums = s().iteration_summaries(campaign_);
  ASSERT_EQ(sums.size(), 1u);
  const auto& sum = sums[0];
  EXPECT_EQ(sum.iteration.status, "done");
  EXPECT_TRUE(sum.iteration.finished_at);
  EXPECT_EQ(sum.iteration.note, "3 candidates");
  EXPECT_EQ(sum.candidates, 3);
  EXPECT_EQ(sum.compile_errors, 1);
  EXPECT_EQ(sum.evaluations, 5);
  EXPECT_EQ(sum.outcomes.at("ok"), 3);
  EXPECT_EQ(sum.outcomes.at("incorrect"), 1);
  EXPECT_EQ(sum.outcomes.at("compile_error"), 1);
  EXPECT_EQ(sum.llm_calls, 1);
  EXPECT_EQ(sum.tokens, 1300);
  EXPECT_DOUBLE_EQ(sum.cost_usd, 0.02);
  ASSERT_TRUE(sum.best_candidate_id);
  EXPECT_EQ(*sum.best_candidate_id, a);
  EXPECT_NEAR(*sum.best_score, 0.58, 1e-12);
}

TEST_F(StoreRecords, CheckConstraintsRejectUnknownEnums) {
  auto& db = s().db();
  EXPECT_THROW(db.exec("UPDATE campaigns SET state = 'sleeping'"), kopt::store_error);
  const auto cand = add_candidate(ks::candidate_origin::seed, std::nullopt, "s");
  try {
    auto st = db.prepare(
        "INSERT INTO evaluations(candidate_id, workload_id, status, created_at) VALUES (?, ?, "
        "'fast', 0)");
    st.bind_all(cand, w0_).run();
    FAIL() << "status 'fast' was accepted";
  } catch (const kopt::store_error& e) {
    EXPECT_NE(std::string(e.what()).find("CHECK constraint failed"), std::string::npos) << e.what();
  }
  EXPECT_THROW(db.exec("UPDATE candidates SET origin = 'magic'"), kopt::store_error);
  EXPECT_THROW(db.exec("UPDATE workloads SET weight = 0"), kopt::store_error);
  EXPECT_THROW(db.exec("UPDATE operators SET config_json = '{not json'"), kopt::store_error);
  ks::event_record ev;
  ev.kind = "x";
  ev.level = "loud";
  ev.message = "m";
  EXPECT_THROW(s().add_event(ev), kopt::store_error);
  // The enums as the C++ side names them are exactly what the CHECKs accept.
  for (auto name : ks::eval_status_names()) {
    auto st = db.prepare(
        "INSERT INTO evaluations(candidate_id, workload_id, status, created_at) VALUES (?, ?, ?, "
        "0)");
    st.bind_all(cand, w0_, name).run();
  }
  for (auto name : ks::campaign_state_names()) {
    auto st = db.prepare("UPDATE campaigns SET state = ? WHERE id = ?");
    st.bind_all(name, campaign_).run();
    EXPECT_EQ(ks::to_string(s().find_campaign(campaign_)->state), name);
  }
}

TEST_F(StoreRecords, ForeignKeysAreEnforced) {
  ks::campaign_record orphan;
  orphan.operator_id = op_id_ + 1000;
  orphan.provider = "autotune";
  try {
    s().create_campaign(orphan);
    FAIL() << "a campaign without an operator was accepted";
  } catch (const kopt::store_error& e) {
    EXPECT_NE(std::string(e.what()).find("FOREIGN KEY"), std::string::npos) << e.what();
  }
  const auto cand = add_candidate(ks::candidate_origin::seed, std::nullopt, "s");
  EXPECT_THROW(add_eval(cand, w1_ + 1000, ks::eval_status::ok, 0.1), kopt::store_error);
  EXPECT_THROW(add_eval(cand + 1000, w0_, ks::eval_status::ok, 0.1), kopt::store_error);
  EXPECT_THROW(s().set_best_candidate(campaign_, cand + 1000, 0.5), kopt::store_error);
  s().set_best_candidate(campaign_, cand, 0.5);
  EXPECT_EQ(s().find_campaign(campaign_)->best_candidate_id, cand);
  // Deleting a campaign removes what hangs off it.
  add_eval(cand, w0_, ks::eval_status::ok, 0.1);
  s().db().exec("UPDATE campaigns SET best_candidate_id = NULL");
  s().db().exec("DELETE FROM campaigns");
  EXPECT_FALSE(s().find_candidate(cand));
  EXPECT_TRUE(s().evaluations_of(cand).empty());
}

TEST_F(StoreRecords, EventsKeepOrderAndLimit) {
  for (int i = 0; i < 5; ++i) {
    ks::event_record e;
    e.campaign_id = campaign_;
    e.kind = "tick";
    e.message = "event " + std::to_string(i);
    e.data = json{{"i", i}};
    s().add_event(e);
  }
  s().add_event({.kind = "daemon", .message = "daemon-wide"});
  auto last2 = s().events_of(campaign_, 2);
  ASSERT_EQ(last2.size(), 2u);
  EXPECT_EQ(last2[0].message, "event 3");
  EXPECT_EQ(last2[1].data["i"], 4);
  EXPECT_EQ(s().events_of(campaign_).size(), 5u);
  auto global = s().events_of(std::nullopt);
  ASSERT_EQ(global.size(), 1u);
  EXPECT_EQ(global[0].message, "daemon-wide");
}

TEST_F(StoreRecords, NeverStoresCredentials) {
  ks::llm_call_record call;
  call.campaign_id = campaign_;
  call.provider = "openai";
  call.prompt = "p";
  call.request = json{{"headers", {{"Authorization", "Bearer sk-123"}}}};
  EXPECT_THROW(s().add_llm_call(call), kopt::store_error);
  call.request = json{{"api_key", "sk-123"}};
  EXPECT_THROW(s().add_llm_call(call), kopt::store_error);
  EXPECT_TRUE(s().llm_calls_of(campaign_).empty());
}

TEST_F(StoreRecords, NestedTransactionsRollBackTogether) {
  {
    ks::transaction outer(s().db());
    // put_operator opens its own (nested) transaction and commits it.
    ks::operator_record op;
    op.name = "other";
    op.op_type = "other";
    op.content_hash = "h2";
    const std::vector<ks::workload_record> none;
    auto r = s().put_operator(op, none);
    EXPECT_TRUE(r.created);
    EXPECT_TRUE(s().find_operator_by_hash("h2"));
  }  // outer not committed
  EXPECT_FALSE(s().find_operator_by_hash("h2"));
  EXPECT_FALSE(s().db().in_transaction());
}

TEST(StoreTime, FormatsIsoUtc) {
  EXPECT_EQ(ks::format_time(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(ks::format_time(1'796'075'300'123), "2026-11-30T21:48:20.123Z");
  EXPECT_EQ(ks::parse_campaign_state("paused"), ks::campaign_state::paused);
  EXPECT_FALSE(ks::parse_campaign_state("Paused"));
  EXPECT_EQ(ks::to_string(ks::eval_status::rejected_integrity), "rejected_integrity");
}
