// The HTTP providers against a real HTTP server on loopback (cpp-httplib)
// that scripts what real APIs do at 3 a.m.: rate limits with each form of
// Retry-After, overload, server errors, resets, slow and stalled streams,
// cut streams, error events after a 200, malformed and huge bodies, quota
// errors. Each test checks what was sent, the attempts, the delays (on an
// injected clock, so nothing sleeps) and what was recorded.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "llm/client.hpp"
#include "llm/llm_cli.hpp"
#include "llm/provider.hpp"

using namespace kopt::llm;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

const std::string key = "sk-test-0123456789abcdefSECRET";

const std::string openai_ok =
    R"({"model":"m-1","choices":[{"message":{"content":"ok!"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}})";
const std::string anthropic_ok =
    R"({"type":"message","model":"c-1","content":[{"type":"text","text":"ok!"}],"stop_reason":"end_turn",
        "usage":{"input_tokens":10,"output_tokens":3}})";

struct seen {
  std::string body;
  httplib::Headers headers;
};

// A loopback server whose answer to request N is script[N] (the last one repeats).
class script_server {
 public:
  using step = std::function<void(const httplib::Request&, httplib::Response&)>;
  explicit script_server(std::vector<step> script) : script_(std::move(script)) {
    auto h = [this](const httplib::Request& req, httplib::Response& res) {
      std::size_t n = 0;
      {
        std::lock_guard lock(mu_);
        n = requests_.size();
        requests_.push_back({req.body, req.headers});
      }
      script_[std::min(n, script_.size() - 1)](req, res);
    };
    svr_.Post("/v1/chat/completions", h);
    svr_.Post("/v1/messages", h);
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~script_server() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<seen> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  std::vector<step> script_;
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<seen> requests_;
};

script_server::step reply(int status, std::string body, httplib::Headers headers = {}) {
  return [=](const httplib::Request&, httplib::Response& res) {
    res.status = status;
    for (const auto& [k, v] : headers) res.set_header(k.c_str(), v);
    res.set_content(body, "application/json");
  };
}

// Streams `chunks` with `gap` between them; `cut` closes the connection after them.
script_server::step stream(std::vector<std::string> chunks, std::chrono::milliseconds gap = 0ms,
                           bool cut = false) {
  return [=](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/event-stream",
                                     [=](std::size_t, httplib::DataSink& sink) {
                                       for (const std::string& c : chunks) {
                                         if (gap.count() > 0) std::this_thread::sleep_for(gap);
                                         if (!sink.write(c.data(), c.size())) return false;
                                       }
                                       if (cut) return false;
                                       sink.done();
                                       return true;
                                     });
  };
}

provider_config base_config(const std::string& kind, const std::string& url) {
  provider_config c;
  c.kind = kind;
  c.model = kind == "openai" ? "m-1" : "c-1";
  c.base_url = url + "/v1";
  c.retry.max_attempts = 4;
  c.timeouts.connect = 2000ms;
  c.timeouts.total = 10000ms;
  return c;
}

request small_request() {
  request r;
  r.system = "be brief";
  r.messages = {{"user", "hello"}};
  r.max_tokens = 50;
  r.tag = "t";
  return r;
}

struct fixture {
  manual_clock clock;
  curl_transport transport;
  memory_recorder recorder;
  std::unique_ptr<llm_client> client;

  void make(const provider_config& cfg, budget* b = nullptr) {
    std::unique_ptr<provider> p;
    if (cfg.kind == "openai")
      p = std::make_unique<openai_provider>(cfg, key, transport, clock);
    else
      p = std::make_unique<anthropic_provider>(cfg, key, transport, clock);
    client_options o;
    o.recorder = &recorder;
    o.campaign_budget = b;
    o.prices =
        price_table::from_json({{"m-1", {{"input", 1.0}, {"output", 2.0}, {"cached_input", 0.5}}}});
    o.max_concurrency = cfg.max_concurrency;
    client = std::make_unique<llm_client>(std::move(p), o);
  }
};

}  // namespace

TEST(LlmHttp, OpenAiSuccessSendsTheRightRequest) {
  script_server srv({reply(200, openai_ok)});
  fixture f;
  f.make(base_config("openai", srv.url()));
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(c.text, "ok!");
  EXPECT_EQ(c.attempts, 1);
  EXPECT_EQ(c.http_status, 200);
  EXPECT_EQ(c.tokens.prompt, 12);
  EXPECT_EQ(c.tokens.cached, 4);
  EXPECT_DOUBLE_EQ(c.cost_usd, (8 * 1.0 + 4 * 0.5 + 3 * 2.0) / 1e6);
  const auto reqs = srv.requests();
  ASSERT_EQ(reqs.size(), 1u);
  const json body = json::parse(reqs[0].body);
  EXPECT_EQ(body["model"], "m-1");
  EXPECT_EQ(body["max_tokens"], 50);
  EXPECT_EQ(body["messages"][0], (json{{"role", "system"}, {"content", "be brief"}}));
  EXPECT_EQ(body["messages"][1], (json{{"role", "user"}, {"content", "hello"}}));
  EXPECT_EQ(reqs[0].headers.find("Authorization")->second, "Bearer " + key);
  const auto recs = f.recorder.records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].status, call_status::ok);
  EXPECT_EQ(recs[0].response, "ok!");
  EXPECT_EQ(recs[0].tokens.completion, 3);
  EXPECT_EQ(to_json(recs[0]).dump().find(key), std::string::npos);
  EXPECT_TRUE(f.clock.sleeps().empty());
}

TEST(LlmHttp, AnthropicHeadersAndBody) {
  script_server srv({reply(200, anthropic_ok)});
  fixture f;
  f.make(base_config("anthropic", srv.url()));
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(c.stop_reason, "end_turn");
  const auto reqs = srv.requests();
  EXPECT_EQ(reqs[0].headers.find("x-api-key")->second, key);
  EXPECT_EQ(reqs[0].headers.find("anthropic-version")->second, "2023-06-01");
  EXPECT_EQ(reqs[0].headers.count("Authorization"), 0u);
  // prompt_cache is on by default: the system prompt is a cached block.
  EXPECT_EQ(json::parse(reqs[0].body)["system"][0]["text"], "be brief");
  EXPECT_TRUE(json::parse(reqs[0].body)["system"][0].contains("cache_control"));
}

TEST(LlmHttp, RateLimitHonoursEachRetryAfterForm) {
  // retry-after in seconds, in milliseconds, as an HTTP date; then success.
  const std::string date =
      "Tue, 14 Nov 2023 22:13:29 GMT";  // manual_clock's wall is 22:13:20 (+ sleeps)
  script_server srv({reply(429, R"({"error":{"type":"rate_limit_error","message":"slow down"}})",
                           {{"retry-after", "3"}}),
                     reply(429, "{}", {{"retry-after-ms", "250"}}),
                     reply(429, "{}", {{"retry-after", date}}), reply(200, openai_ok)});
  fixture f;
  f.make(base_config("openai", srv.url()));
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(c.attempts, 4);
  EXPECT_EQ(srv.requests().size(), 4u);
  // 22:13:29 - (22:13:20 + 3 s + 0.25 s) = 5.75 s.
  EXPECT_EQ(f.clock.sleeps(), (std::vector<std::chrono::milliseconds>{3000ms, 250ms, 5750ms}));
  EXPECT_EQ(f.recorder.records()[0].attempts, 4);
}

TEST(LlmHttp, Anthropic529ThenSuccessBacksOffWithJitter) {
  script_server srv(
      {reply(529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"),
       reply(200, anthropic_ok)});
  fixture f;
  f.make(base_config("anthropic", srv.url()));
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(c.attempts, 2);
  ASSERT_EQ(f.clock.sleeps().size(), 1u);
  EXPECT_GT(f.clock.sleeps()[0], 375ms - 1ms);
  EXPECT_LE(f.clock.sleeps()[0], 500ms);
}

TEST(LlmHttp, ServerErrorsThenSuccessAndGivingUp) {
  {
    script_server srv({reply(500, "oops"), reply(502, "bad gateway"), reply(200, openai_ok)});
    fixture f;
    f.make(base_config("openai", srv.url()));
    const completion c = f.client->call(small_request());
    ASSERT_TRUE(c.ok()) << c.error;
    EXPECT_EQ(c.attempts, 3);
    const auto s = f.clock.sleeps();
    ASSERT_EQ(s.size(), 2u);
    EXPECT_LE(s[0], 500ms);
    EXPECT_GT(s[1], 749ms);
    EXPECT_LE(s[1], 1000ms);
  }
  {
    script_server srv({reply(503, "down")});
    fixture f;
    f.make(base_config("openai", srv.url()));
    const completion c = f.client->call(small_request());
    EXPECT_EQ(c.status, call_status::transient);
    EXPECT_EQ(c.attempts, 4);
    EXPECT_EQ(srv.requests().size(), 4u);
    EXPECT_NE(c.error.find("gave up after 4 attempts"), std::string::npos) << c.error;
    EXPECT_FALSE(f.client->stopped());  // transient failures do not stop LLM use
  }
}

TEST(LlmHttp, ShouldRetryFalseIsObeyed) {
  script_server srv({reply(500, "{}", {{"x-should-retry", "false"}})});
  fixture f;
  f.make(base_config("openai", srv.url()));
  const completion c = f.client->call(small_request());
  EXPECT_EQ(c.status, call_status::transient);
  EXPECT_EQ(c.attempts, 1);
}

TEST(LlmHttp, QuotaErrorsAreNeverRetriedAndStopLlmUse) {
  script_server srv({reply(
      429,
      R"({"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}})",
      {{"retry-after", "1"}})});
  fixture f;
  f.make(base_config("openai", srv.url()));
  const completion c = f.client->call(small_request());
  EXPECT_EQ(c.status, call_status::permanent);
  EXPECT_EQ(c.attempts, 1);
  EXPECT_TRUE(f.clock.sleeps().empty());
  ASSERT_TRUE(f.client->stopped());
  EXPECT_NE(f.client->stopped()->find("insufficient_quota"), std::string::npos);
  const completion again = f.client->call(small_request());
  EXPECT_EQ(again.status, call_status::disabled);
  EXPECT_EQ(srv.requests().size(), 1u);  // the second call never left
  const auto recs = f.recorder.records();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].status, call_status::permanent);
  EXPECT_EQ(recs[0].http_status, 429);
  EXPECT_EQ(recs[1].status, call_status::disabled);
  EXPECT_NE(recs[1].error.find("quota"), std::string::npos);
}

TEST(LlmHttp, AnthropicSpendLimitAndBadKeyAreRedacted) {
  {
    script_server srv({reply(
        429,
        R"({"type":"error","error":{"type":"rate_limit_error","message":"You have reached your specified workspace API usage limits."}})")});
    fixture f;
    f.make(base_config("anthropic", srv.url()));
    const completion c = f.client->call(small_request());
    EXPECT_EQ(c.status, call_status::permanent);
    EXPECT_EQ(c.attempts, 1);
  }
  {
    script_server srv({reply(
        401,
        R"({"error":{"message":"Incorrect API key provided: )" + key +
            R"(. You can find your API key at ...","type":"invalid_request_error","code":"invalid_api_key"}})")});
    fixture f;
    f.make(base_config("openai", srv.url()));
    const completion c = f.client->call(small_request());
    EXPECT_EQ(c.status, call_status::permanent);
    EXPECT_EQ(c.attempts, 1);
    EXPECT_EQ(c.error.find(key), std::string::npos) << c.error;
    EXPECT_NE(c.error.find("[REDACTED]"), std::string::npos);
    for (const auto& r : f.recorder.records())
      EXPECT_EQ(to_json(r).dump().find(key), std::string::npos);
    EXPECT_EQ(f.client->stopped()->find(key), std::string::npos);
  }
}

TEST(LlmHttp, ContextOverflowFailsTheCallButNotTheCampaign) {
  script_server srv({reply(
      400,
      R"({"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}})")});
  fixture f;
  f.make(base_config("openai", srv.url()));
  EXPECT_EQ(f.client->call(small_request()).status, call_status::invalid_request);
  EXPECT_FALSE(f.client->stopped());
}

TEST(LlmHttp, ConnectionResetIsRetried) {
  // A raw listener that accepts and resets (SO_LINGER 0) every connection.
  const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(ls, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(ls, 8), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::atomic<int> accepted{0};
  std::thread t([&] {
    for (int i = 0; i < 3; ++i) {
      const int c = ::accept(ls, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      (void)::recv(c, buf, sizeof buf, 0);
      linger lg{1, 0};
      ::setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      ::close(c);
      ++accepted;
    }
  });
  provider_config cfg =
      base_config("openai", "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)));
  cfg.retry.max_attempts = 3;
  fixture f;
  f.make(cfg);
  const completion c = f.client->call(small_request());
  t.join();
  ::close(ls);
  EXPECT_EQ(c.status, call_status::transient);
  EXPECT_EQ(c.attempts, 3);
  EXPECT_EQ(accepted.load(), 3);
  EXPECT_EQ(f.clock.sleeps().size(), 2u);
  EXPECT_EQ(c.http_status, 0);
}

TEST(LlmHttp, SlowStreamSucceedsWithUsage) {
  script_server srv({stream(
      {"data: {\"model\":\"m-1\",\"choices\":[{\"delta\":{\"content\":\"he\"}}]}\n\n",
       "data: {\"choices\":[{\"delta\":{\"content\":\"llo\"},\"finish_reason\":\"stop\"}]}\n\n",
       "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":2,"
       "\"completion_tokens_details\":{\"reasoning_tokens\":1}}}\n\n",
       "data: [DONE]\n\n"},
      150ms)});
  provider_config cfg = base_config("openai", srv.url());
  cfg.stream = true;
  cfg.timeouts.stall = 1000ms;
  fixture f;
  f.make(cfg);
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(c.text, "hello");
  EXPECT_EQ(c.tokens.prompt, 20);
  EXPECT_EQ(c.tokens.reasoning, 1);
  EXPECT_TRUE(c.tokens.reported);
  const json body = json::parse(srv.requests()[0].body);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
}

TEST(LlmHttp, StalledStreamTimesOut) {
  script_server stall_srv({[](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/event-stream", [](std::size_t, httplib::DataSink& sink) {
      const std::string first = "data: {\"choices\":[{\"delta\":{\"content\":\"he\"}}]}\n\n";
      sink.write(first.data(), first.size());
      std::this_thread::sleep_for(3s);
      return false;
    });
  }});
  provider_config cfg = base_config("openai", stall_srv.url());
  cfg.stream = true;
  cfg.timeouts.stall = 400ms;
  cfg.retry.max_attempts = 1;
  fixture f;
  f.make(cfg);
  const auto t0 = std::chrono::steady_clock::now();
  const completion c = f.client->call(small_request());
  EXPECT_EQ(c.status, call_status::timeout) << c.error;
  EXPECT_NE(c.error.find("stall"), std::string::npos) << c.error;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2900ms);
  EXPECT_EQ(c.attempts, 1);
  EXPECT_GT(c.tokens.completion, 0);  // the cut attempt's output counts against the budget
}

TEST(LlmHttp, StreamCutBeforeUsageIsRetried) {
  script_server srv(
      {stream({"data: {\"choices\":[{\"delta\":{\"content\":\"partial answer\"}}]}\n\n"}, 0ms,
              true),
       stream(
           {"data: "
            "{\"choices\":[{\"delta\":{\"content\":\"full\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":1}}\n\n",
            "data: [DONE]\n\n"})});
  provider_config cfg = base_config("openai", srv.url());
  cfg.stream = true;
  fixture f;
  f.make(cfg);
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(c.text, "full");
  EXPECT_EQ(c.attempts, 2);
  // 1 completion token reported plus the estimate for the cut attempt's 14 bytes.
  EXPECT_EQ(c.tokens.completion, 1 + 4);
}

TEST(LlmHttp, StreamWithoutUsageIsEstimated) {
  script_server srv({stream(
      {"data: "
       "{\"choices\":[{\"delta\":{\"content\":\"12345678\"},\"finish_reason\":\"stop\"}]}\n\n",
       "data: [DONE]\n\n"})});
  provider_config cfg = base_config("openai", srv.url());
  cfg.stream = true;
  fixture f;
  f.make(cfg);
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_FALSE(c.tokens.reported);
  EXPECT_EQ(c.tokens.completion, 2);
  EXPECT_GT(c.tokens.prompt, 0);
}

TEST(LlmHttp, AnthropicErrorEventAfter200IsRetried) {
  const std::string start =
      "event: message_start\ndata: "
      "{\"type\":\"message_start\",\"message\":{\"model\":\"c-1\",\"usage\":{\"input_tokens\":10,"
      "\"output_tokens\":1}}}\n\n";
  script_server srv({stream({start,
                             "event: content_block_delta\ndata: "
                             "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
                             "\"text_delta\",\"text\":\"x\"}}\n\n",
                             "event: error\ndata: "
                             "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                             "\"message\":\"Overloaded\"}}\n\n"}),
                     stream({start, "event: ping\ndata: {\"type\": \"ping\"}\n\n",
                             "event: content_block_start\ndata: "
                             "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{"
                             "\"type\":\"text\",\"text\":\"\"}}\n\n",
                             "event: content_block_delta\ndata: "
                             "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
                             "\"text_delta\",\"text\":\"done\"}}\n\n",
                             "event: message_delta\ndata: "
                             "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},"
                             "\"usage\":{\"output_tokens\":7}}\n\n",
                             "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"})});
  provider_config cfg = base_config("anthropic", srv.url());
  cfg.stream = true;
  fixture f;
  f.make(cfg);
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(c.text, "done");
  EXPECT_EQ(c.attempts, 2);
  EXPECT_EQ(c.stop_reason, "end_turn");
  // Both attempts' input tokens count (the first may be billed).
  EXPECT_EQ(c.tokens.prompt, 20);
  EXPECT_EQ(c.tokens.completion, 1 + 7);
  EXPECT_EQ(json::parse(srv.requests()[0].body)["stream"], true);
}

TEST(LlmHttp, MalformedJsonAndHugeBody) {
  {
    script_server srv({reply(200, "{\"choices\": [ {\"message\": ")});
    provider_config cfg = base_config("openai", srv.url());
    cfg.retry.max_attempts = 2;
    fixture f;
    f.make(cfg);
    const completion c = f.client->call(small_request());
    EXPECT_EQ(c.status, call_status::bad_response);
    EXPECT_EQ(c.attempts, 2);
    EXPECT_NE(c.error.find("not valid JSON"), std::string::npos) << c.error;
  }
  {
    script_server srv({reply(200, std::string(3u << 20, 'x'))});
    provider_config cfg = base_config("openai", srv.url());
    cfg.max_response_bytes = 1u << 20;
    fixture f;
    f.make(cfg);
    const completion c = f.client->call(small_request());
    EXPECT_EQ(c.status, call_status::bad_response);
    EXPECT_EQ(c.attempts, 1);
    EXPECT_NE(c.error.find("too large"), std::string::npos) << c.error;
    EXPECT_EQ(f.recorder.records().at(0).status, call_status::bad_response);
  }
}

TEST(LlmHttp, ConcurrencyIsBounded) {
  std::atomic<int> now{0}, peak{0};
  script_server srv({[&](const httplib::Request&, httplib::Response& res) {
    const int n = ++now;
    int p = peak.load();
    while (n > p && !peak.compare_exchange_weak(p, n)) {
    }
    std::this_thread::sleep_for(150ms);
    --now;
    res.set_content(openai_ok, "application/json");
  }});
  provider_config cfg = base_config("openai", srv.url());
  cfg.max_concurrency = 2;
  fixture f;
  f.make(cfg);
  std::vector<std::future<completion>> fs;
  for (int i = 0; i < 5; ++i) fs.push_back(f.client->submit(small_request()));
  for (auto& x : fs) EXPECT_TRUE(x.get().ok());
  EXPECT_EQ(peak.load(), 2);
  EXPECT_EQ(srv.requests().size(), 5u);
  EXPECT_EQ(f.recorder.records().size(), 5u);
}

TEST(LlmHttp, ConnectFailureIsTransient) {
  // Bind a port without listening: connections to it are refused.
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  provider_config cfg = base_config("openai", "http://127.0.0.1:" + std::to_string(port));
  cfg.retry.max_attempts = 2;
  fixture f;
  f.make(cfg);
  const completion c = f.client->call(small_request());
  ::close(s);
  EXPECT_EQ(c.status, call_status::transient);
  EXPECT_EQ(c.attempts, 2);
  EXPECT_EQ(c.http_status, 0);
  EXPECT_NE(c.error.find("connect"), std::string::npos) << c.error;
}

namespace {
// Runs `kopt llm check ARGS` through register_llm_cli; returns the exit code.
int run_check(std::vector<std::string> args) {
  CLI::App app("kopt");
  register_llm_cli(app);
  args.insert(args.begin(), {"kopt", "llm", "check"});
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code();
  }
  return 0;
}
}  // namespace

TEST(LlmCheck, ReportsSuccessFailureAndConfigProblems) {
  script_server srv(
      {reply(200, openai_ok),
       reply(
           404,
           R"({"error":{"message":"The model `nope` does not exist","type":"invalid_request_error","code":"model_not_found"}})")});
  ::setenv("KOPT_CHECK_KEY", key.c_str(), 1);
  EXPECT_EQ(run_check({"--provider", "openai", "--model", "m-1", "--base-url", srv.url() + "/v1",
                       "--api-key-env", "KOPT_CHECK_KEY", "--json"}),
            check_exit_ok);
  EXPECT_EQ(srv.requests().at(0).headers.find("Authorization")->second, "Bearer " + key);
  EXPECT_EQ(run_check({"--provider", "openai", "--model", "nope", "--base-url", srv.url() + "/v1"}),
            check_exit_call_failed);
  EXPECT_EQ(srv.requests().size(), 2u);  // a 404 is not retried
  EXPECT_EQ(
      run_check({"--provider", "anthropic", "--model", "c", "--api-key-env", "KOPT_CHECK_UNSET"}),
      check_exit_config);
  EXPECT_EQ(run_check({"--provider", "autotune"}), check_exit_config);
  ::unsetenv("KOPT_CHECK_KEY");
}
