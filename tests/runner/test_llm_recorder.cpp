// The store-backed LLM call recorder: every call becomes an llm_calls row
// with its tokens, cost and status, a permanent error also becomes an event
// that says why LLM use stopped, and nothing resembling a key is stored.
#include <gtest/gtest.h>

#include "../common/test_util.hpp"
#include "runner/llm_recorder.hpp"
#include "store/store.hpp"

namespace {

using namespace kopt;

struct fixture {
  test::scratch_dir dir;
  store::store db = store::store::open(dir / "k.db");
  store::row_id campaign = 0;
  fixture() {
    store::operator_record op;
    op.name = "op";
    op.op_type = "elementwise";
    op.config = {{"name", "op"}};
    op.content_hash = "h1";
    const auto id = db.put_operator(op, {}).operator_id;
    store::campaign_record c;
    c.operator_id = id;
    c.provider = "openai";
    campaign = db.create_campaign(c);
  }
};

llm::call_record call(llm::call_status st) {
  llm::call_record r;
  r.provider = "openai";
  r.model = "m";
  r.prompt = R"({"messages":[{"role":"user","content":"write a kernel"}]})";
  r.response = st == llm::call_status::ok ? "```cuda\n...\n```" : "";
  r.status = st;
  r.http_status = st == llm::call_status::ok ? 200 : 401;
  r.attempts = st == llm::call_status::ok ? 2 : 1;
  r.tokens.prompt = 120;
  r.tokens.completion = 80;
  r.tokens.cached = 20;
  r.tokens.reasoning = 30;
  r.cost_usd = 0.0125;
  r.latency = std::chrono::milliseconds(850);
  if (st != llm::call_status::ok) r.error = "HTTP 401: invalid API key (key redacted)";
  return r;
}

TEST(StoreCallRecorder, RecordsEveryFieldOfACall) {
  fixture f;
  runner::store_call_recorder rec(f.db, f.campaign);
  rec.record(call(llm::call_status::ok));
  const auto rows = f.db.llm_calls_of(f.campaign);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, "ok");
  EXPECT_EQ(rows[0].http_status.value_or(0), 200);
  EXPECT_EQ(rows[0].attempts, 2);
  EXPECT_EQ(rows[0].prompt_tokens, 120);
  EXPECT_EQ(rows[0].completion_tokens, 80);
  EXPECT_EQ(rows[0].cached_tokens, 20);
  EXPECT_EQ(rows[0].reasoning_tokens, 30);
  EXPECT_DOUBLE_EQ(rows[0].cost_usd, 0.0125);
  EXPECT_DOUBLE_EQ(rows[0].latency_ms.value_or(0), 850.0);
  EXPECT_EQ(rows[0].request.value("llm_status", ""), "ok");
  EXPECT_TRUE(f.db.events_of(f.campaign).empty());
  EXPECT_EQ(rec.failures(), 0u);
}

TEST(StoreCallRecorder, PermanentErrorStopsLlmUseWithAReasonInTheStore) {
  fixture f;
  runner::store_call_recorder rec(f.db, f.campaign);
  rec.record(call(llm::call_status::permanent));
  const auto rows = f.db.llm_calls_of(f.campaign);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, "http_error");
  EXPECT_EQ(rows[0].request.value("llm_status", ""), llm::call_status_name(llm::call_status::permanent));
  const auto events = f.db.events_of(f.campaign);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "llm_disabled");
  EXPECT_NE(events[0].message.find("invalid API key"), std::string::npos);
}

TEST(StoreCallRecorder, RefusedCallsAreStoredAsRefused) {
  fixture f;
  runner::store_call_recorder rec(f.db, f.campaign);
  rec.record(call(llm::call_status::budget_exceeded));
  rec.record(call(llm::call_status::disabled));
  for (const auto& r : f.db.llm_calls_of(f.campaign)) EXPECT_EQ(r.status, "refused");
}

TEST(StoreCallRecorder, AStoreFailureIsCountedNotThrown) {
  fixture f;
  runner::store_call_recorder rec(f.db, f.campaign + 1000);  // no such campaign: FK violation
  EXPECT_NO_THROW(rec.record(call(llm::call_status::ok)));
  EXPECT_EQ(rec.failures(), 1u);
}

}  // namespace
