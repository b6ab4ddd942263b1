// Parsers and pure policies of kopt::llm: SSE, wire JSON, candidate
// extraction, retry classification and delays, prices, budget, rate limits.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "llm/accounting.hpp"
#include "llm/extract.hpp"
#include "llm/retry.hpp"
#include "llm/sse.hpp"
#include "llm/wire.hpp"

using namespace kopt::llm;
using namespace std::chrono_literals;

TEST(Sse, SplitAnywhereGivesSameEvents) {
  const std::string s = "event: a\r\ndata: x\r\ndata: y\r\n\r\n: keepalive\n\ndata:z\rid: 3\r\r";
  for (std::size_t cut = 0; cut <= s.size(); ++cut) {
    sse_parser p;
    std::vector<sse_event> ev;
    p.feed(std::string_view(s).substr(0, cut), ev);
    p.feed(std::string_view(s).substr(cut), ev);
    ASSERT_EQ(ev.size(), 2u) << cut;
    EXPECT_EQ(ev[0].event, "a");
    EXPECT_EQ(ev[0].data, "x\ny");
    EXPECT_EQ(ev[1].event, "message");
    EXPECT_EQ(ev[1].data, "z");
    EXPECT_EQ(ev[1].id, "3");
    EXPECT_TRUE(p.finish());
  }
}

TEST(Sse, PartialEventIsNotDispatchedAndOverflowStops) {
  sse_parser p;
  std::vector<sse_event> ev;
  p.feed("data: half", ev);
  EXPECT_TRUE(ev.empty());
  EXPECT_FALSE(p.finish());
  sse_parser small(16);
  EXPECT_FALSE(small.feed(std::string(100, 'a'), ev));
  EXPECT_TRUE(small.overflowed());
}

TEST(Wire, OpenAiResponseWithCachedAndReasoningTokens) {
  const auto r = parse_openai_response(
      R"({"model":"gpt-x","choices":[{"message":{"content":"hi","reasoning_content":"hmm"},"finish_reason":"length"}],
         "usage":{"prompt_tokens":100,"completion_tokens":40,"prompt_tokens_details":{"cached_tokens":60},
                  "completion_tokens_details":{"reasoning_tokens":30}}})");
  ASSERT_TRUE(r.ok) << r.problem;
  EXPECT_EQ(r.answer.text, "hi");
  EXPECT_EQ(r.answer.reasoning, "hmm");
  EXPECT_EQ(r.answer.stop_reason, "length");
  EXPECT_EQ(r.answer.tokens.prompt, 100);
  EXPECT_EQ(r.answer.tokens.cached, 60);
  EXPECT_EQ(r.answer.tokens.reasoning, 30);
  EXPECT_EQ(r.answer.tokens.completion, 40);
}

TEST(Wire, AnthropicResponseSumsCacheIntoPrompt) {
  const auto r = parse_anthropic_response(
      R"({"type":"message","model":"c","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"a"},{"type":"text","text":"b"}],
         "stop_reason":"max_tokens","usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":20}})");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.answer.text, "ab");
  EXPECT_EQ(r.answer.reasoning, "t");
  EXPECT_EQ(r.answer.tokens.prompt, 130);
  EXPECT_EQ(r.answer.tokens.cached, 100);
  EXPECT_EQ(r.answer.tokens.cache_write, 20);
  EXPECT_EQ(r.answer.tokens.completion, 5);
}

TEST(Wire, MalformedAndErrorBodies) {
  EXPECT_FALSE(parse_openai_response("{not json").ok);
  EXPECT_EQ(parse_openai_response("[1]").problem, "response body is not a JSON object");
  const auto e = parse_api_error(
      R"({"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}})");
  EXPECT_EQ(e.code, "insufficient_quota");
  const auto a = parse_api_error(
      R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})");
  EXPECT_EQ(a.type, "overloaded_error");
  EXPECT_TRUE(parse_api_error("<html>").empty());
}

TEST(Wire, RequestBodies) {
  request r;
  r.system = "sys";
  r.messages = {{"user", "u"}};
  r.max_tokens = 7;
  const auto o = openai_request_body(r, "m", true);
  EXPECT_EQ(o["messages"][0]["role"], "system");
  EXPECT_EQ(o["stream_options"]["include_usage"], true);
  const auto a = anthropic_request_body(r, "m", false);
  EXPECT_EQ(a["system"], "sys");
  EXPECT_EQ(a["messages"].size(), 1u);
  EXPECT_EQ(a["max_tokens"], 7);
  EXPECT_FALSE(a.contains("stream"));
}

TEST(Wire, AnthropicStreamErrorAfterStart) {
  anthropic_stream_accumulator acc;
  acc.on_event(
      {"message_start",
       R"({"type":"message_start","message":{"model":"c","usage":{"input_tokens":9,"output_tokens":1}}})",
       ""});
  acc.on_event({"content_block_delta",
                R"({"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}})", ""});
  acc.on_event({"error",
                R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})",
                ""});
  EXPECT_TRUE(acc.failed());
  EXPECT_EQ(acc.error().type, "overloaded_error");
  EXPECT_EQ(acc.answer().tokens.prompt, 9);
  EXPECT_EQ(classify_stream_error(acc.error()), failure_kind::retryable);
}

TEST(Retry, Classification) {
  const header_map none;
  EXPECT_EQ(classify_http_failure(429, none, {}), failure_kind::retryable);
  EXPECT_EQ(classify_http_failure(529, none, {"overloaded_error", "", "Overloaded"}),
            failure_kind::retryable);
  EXPECT_EQ(classify_http_failure(408, none, {}), failure_kind::retryable);
  EXPECT_EQ(classify_http_failure(409, none, {}), failure_kind::retryable);
  EXPECT_EQ(classify_http_failure(503, none, {}), failure_kind::retryable);
  for (int s : {400, 401, 403, 404})
    EXPECT_EQ(classify_http_failure(s, none, {}), failure_kind::fatal) << s;
  EXPECT_EQ(classify_http_failure(
                429, none,
                {"insufficient_quota", "insufficient_quota", "You exceeded your current quota"}),
            failure_kind::fatal);
  EXPECT_EQ(
      classify_http_failure(
          429, none, {"rate_limit_error", "", "You have reached your specified API usage limits."}),
      failure_kind::fatal);
  EXPECT_EQ(classify_http_failure(429, {{"x-should-retry", "true"}},
                                  {"insufficient_quota", "insufficient_quota", "quota"}),
            failure_kind::fatal);
  EXPECT_EQ(classify_http_failure(500, {{"x-should-retry", "false"}}, {}), failure_kind::give_up);
  EXPECT_EQ(classify_http_failure(400, {{"x-should-retry", "true"}}, {}), failure_kind::retryable);
  EXPECT_EQ(classify_http_failure(400, none,
                                  {"invalid_request_error", "context_length_exceeded", "too long"}),
            failure_kind::invalid_request);
}

TEST(Retry, DelaysFromHeadersAndBackoff) {
  const auto now = std::chrono::system_clock::from_time_t(1'700'000'000);
  retry_policy p;
  EXPECT_EQ(*server_retry_delay({{"retry-after-ms", "1500"}}, now), 1500ms);
  EXPECT_EQ(*server_retry_delay({{"retry-after", "2.5"}}, now), 2500ms);
  // 1700000000 is Tue, 14 Nov 2023 22:13:20 GMT.
  EXPECT_EQ(*server_retry_delay({{"retry-after", "Tue, 14 Nov 2023 22:13:27 GMT"}}, now), 7000ms);
  EXPECT_EQ(*server_retry_delay({{"retry-after", "Tue, 14 Nov 2023 22:00:00 GMT"}}, now), 0ms);
  EXPECT_FALSE(server_retry_delay({{"retry-after", "soon"}}, now));
  EXPECT_EQ(retry_delay(p, 1, 0.0, {{"retry-after", "100000"}}, now), p.max_retry_after);
  EXPECT_EQ(backoff_delay(p, 1, 0.0), 500ms);
  EXPECT_EQ(backoff_delay(p, 2, 0.0), 1000ms);
  EXPECT_EQ(backoff_delay(p, 3, 1.0), 1500ms);  // 2000 * 0.75
  EXPECT_EQ(backoff_delay(p, 20, 0.0), p.max_delay);
}

TEST(Accounting, PricesAndCost) {
  const auto t =
      price_table::from_json({{"gpt-4o", {{"input", 2.5}, {"output", 10}, {"cached_input", 1.25}}},
                              {"claude-*", {{"input", 3}, {"output", 15}}}});
  ASSERT_TRUE(t.find("gpt-4o"));
  ASSERT_TRUE(t.find("claude-sonnet-4"));
  EXPECT_FALSE(t.find("other"));
  usage u;
  u.prompt = 1'000'000;
  u.cached = 400'000;
  u.completion = 100'000;
  EXPECT_DOUBLE_EQ(cost_usd(u, *t.find("gpt-4o")), 0.6 * 2.5 + 0.4 * 1.25 + 0.1 * 10);
  EXPECT_THROW(price_table::from_json({{"m", {{"input", -1}, {"output", 1}}}}), kopt::config_error);
  EXPECT_THROW(price_table::from_json({{"m", {{"inp", 1}, {"output", 1}}}}), kopt::config_error);
}

TEST(Accounting, BudgetOverrunsByAtMostOneCall) {
  budget b({1000, std::nullopt});
  // Two calls whose worst cases fit go together; a third that would not fit waits.
  EXPECT_FALSE(b.try_begin(400, 0));
  EXPECT_FALSE(b.try_begin(400, 0));
  EXPECT_TRUE(b.try_begin(400, 0));
  b.end(400, 0, 300, 0);
  b.end(400, 0, 300, 0);
  // 600 spent, nothing in flight: one call goes even if its worst case does not fit.
  EXPECT_FALSE(b.try_begin(900, 0));
  EXPECT_TRUE(b.try_begin(10, 0));  // ...but not a second one alongside it
  b.end(900, 0, 700, 0);
  EXPECT_EQ(b.spent_tokens(), 1300);
  const auto refusal = b.try_begin(1, 0);
  ASSERT_TRUE(refusal);
  EXPECT_NE(refusal->find("token budget spent"), std::string::npos);
}

TEST(Accounting, RateLimiterWaitsOnInjectedClock) {
  manual_clock clock;
  rate_limiter rl({2, 1000}, clock);
  rl.acquire(100);
  rl.acquire(100);
  EXPECT_TRUE(clock.sleeps().empty());
  rl.acquire(100);  // third request in the minute
  ASSERT_EQ(clock.sleeps().size(), 1u);
  EXPECT_EQ(clock.sleeps()[0], 60000ms);
  clock.advance(1000ms);
  rl.acquire(950);  // 100 (the third request) + 950 > 1000 tokens: wait until it leaves
  ASSERT_EQ(clock.sleeps().size(), 2u);
  EXPECT_EQ(clock.sleeps()[1], 59000ms);
}

// ------------------------------------------------------------ extraction

const char* good_answer = R"X(Let me think. <think>```cuda
__global__ void draft() {}
```</think>
Here is my improved kernel.

```cuda
// uses a __global__ kernel below
extern "C" __global__ void __launch_bounds__(256) rms(const float* x, float* y, int n) { }
```

```json
{"launches": [{"kernel": "rms", "grid": ["ceil_div(tokens, BLOCK)"], "block": ["BLOCK"],
  "args": [{"tensor": "x"}, {"tensor": "out"}, {"int": "tokens", "type": "int32"}]}],
 "parameters": {"BLOCK": {"values": [128, 256], "default": 256}},
 "workspaces": {"tmp": {"bytes": "tokens * 4"}}}
```
)X";

TEST(Extract, GoodAnswerWithReasoning) {
  const auto x = extract_candidate(good_answer);
  ASSERT_TRUE(x.ok()) << x.feedback();
  EXPECT_NE((*x.candidate)["source"].get<std::string>().find("rms"), std::string::npos);
  EXPECT_EQ((*x.candidate)["launches"][0]["kernel"], "rms");
  EXPECT_EQ((*x.candidate)["parameters"]["BLOCK"]["default"], 256);
  EXPECT_FALSE(x.notes.empty());  // the <think> section was dropped
}

TEST(Extract, SeveralBlocksWrongTagAndBareDims) {
  const std::string a =
      "```cpp\nextern \"C\" __global__ void v1(float* o) {}\n```\nBetter:\n```c++\nextern \"C\" "
      "{\n__global__ void v2(float* o) {}\n}\n```\n"
      "```\n{\"launches\": [{\"kernel\": \"v2\", \"grid\": 4, \"block\": \"BLOCK\", \"args\": "
      "[{\"tensor\": \"out\"}]}]}\n```\n";
  const auto x = extract_candidate(a);
  ASSERT_TRUE(x.ok()) << x.feedback();
  EXPECT_EQ((*x.candidate)["launches"][0]["grid"], nlohmann::json::array({4}));
  EXPECT_NE((*x.candidate)["source"].get<std::string>().find("v2"), std::string::npos);
  EXPECT_GE(x.notes.size(), 3u);
}

TEST(Extract, PreciseProblems) {
  {
    const auto x = extract_candidate("```cuda\nextern \"C\" __global__ void k() {}\n```\n");
    ASSERT_FALSE(x.ok());
    EXPECT_NE(x.problems[0].find("no launch plan"), std::string::npos);
  }
  {
    const auto x = extract_candidate(
        "```cuda\nextern \"C\" __global__ void k() {}\n```\n```json\n{\"launches\": [}\n```\n");
    ASSERT_EQ(x.problems.size(), 1u);
    EXPECT_NE(x.problems[0].find("not valid JSON at line 1, column 15"), std::string::npos)
        << x.problems[0];
  }
  {
    const auto x = extract_candidate(
        "```cuda\n__global__ void k(float* a) {}\n```\n```json\n{\"launches\": [{\"kernel\": "
        "\"q\", \"grid\": [1,2,3,4], "
        "\"block\": [32], \"args\": [{\"tensor\": \"a\", \"int\": 3}, {\"int\": \"n\"}]}], "
        "\"parameters\": {\"B\": {\"values\": [1], \"default\": 2}}}\n```\n");
    ASSERT_FALSE(x.ok());
    const std::string fb = x.feedback();
    EXPECT_NE(fb.find("launches[0].kernel is \"q\", which is not a __global__ function of the "
                      "```cuda block (it declares: k)"),
              std::string::npos)
        << fb;
    EXPECT_NE(fb.find("launches[0].grid must be a list of 1 to 3"), std::string::npos);
    EXPECT_NE(fb.find("launches[0].args[0] must have exactly one of"), std::string::npos);
    EXPECT_NE(fb.find("launches[0].args[1] needs \"type\": \"int32\" or \"int64\""),
              std::string::npos);
    EXPECT_NE(fb.find("parameters.B.default is not one of its values"), std::string::npos);
  }
  {
    const auto x = extract_candidate(
        "```cuda\n__global__ void k() {}\n```\n```json\n{\"launches\": [{\"kernel\": \"k\", "
        "\"grid\": [1], \"block\": [1], \"args\": []}]}\n```");
    ASSERT_FALSE(x.ok());
    EXPECT_NE(x.problems[0].find("extern \"C\""), std::string::npos);
  }
  {
    const auto x = extract_candidate("```cuda\nextern \"C\" __global__ void k() {\n  int i = 0;\n");
    ASSERT_FALSE(x.ok());
    EXPECT_NE(x.problems[0].find("never closed"), std::string::npos);
  }
  {
    const auto x = extract_candidate("I cannot help with that.");
    ASSERT_FALSE(x.ok());
    EXPECT_NE(x.problems[0].find("no ```cuda block"), std::string::npos);
  }
}

TEST(Extract, NumberOverflowInPlanIsAProblemNotACrash) {
  // Found by fuzz_extract: nlohmann throws out_of_range (not parse_error) here.
  const auto x = extract_candidate(
      "```cuda\nextern \"C\" __global__ void k() {}\n```\n```json\n{\"launches\": "
      "1E4444444}\n```\n");
  ASSERT_FALSE(x.ok());
  ASSERT_EQ(x.problems.size(), 1u);
  EXPECT_NE(x.problems[0].find("cannot be read"), std::string::npos) << x.problems[0];
}

TEST(Extract, InvalidUtf8SourceIsAProblemNotACrash) {
  // Found by fuzz_extract: a source with invalid UTF-8 made json::dump throw.
  const auto x = extract_candidate(
      "```cuda\nextern \"C\" __global__ void k() { /* \x8c */ }\n```\n```json\n{\"launches\": "
      "[{\"kernel\": \"k\", "
      "\"grid\": [1], \"block\": [1], \"args\": []}]}\n```\n");
  ASSERT_FALSE(x.ok());
  EXPECT_NE(x.problems.at(0).find("not valid UTF-8 (at line 1, column 37"), std::string::npos)
      << x.problems[0];
  // Valid multi-byte text is fine.
  EXPECT_TRUE(extract_candidate(
                  "```cuda\nextern \"C\" __global__ void k() { /* \u00e9\u4e2d */ }\n```\n```json\n"
                  "{\"launches\": [{\"kernel\": \"k\", \"grid\": [1], \"block\": [1], \"args\": "
                  "[]}]}\n```\n")
                  .ok());
}

TEST(Extract, GlobalNames) {
  const auto n = global_function_names(
      "// __global__ void commented()\nextern \"C\" __global__ void __launch_bounds__(128, 2) "
      "a(int x) {}\n"
      "template <int N> __global__ void b() {}\nextern \"C\" __global__ __cluster_dims__(2,1,1) "
      "void c(float*) {}");
  EXPECT_EQ(n, (std::vector<std::string>{"a", "b", "c"}));
}
