// The wire formats for reasoning models, prompt caching and gateways,
// against a scripted loopback server (cpp-httplib) that answers as the
// vendors' public API references describe: OpenAI Chat Completions with
// max_completion_tokens, reasoning_effort, n and extra_body; OpenAI
// Responses, streamed and not, with reasoning and cached token usage,
// incomplete and failed responses; Anthropic Messages with extended
// thinking and cache_control breakpoints, usage with cache reads and
// writes. Each test checks what was sent and what kopt made of the answer.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/error.hpp"
#include "llm/client.hpp"
#include "llm/llm_cli.hpp"
#include "llm/provider.hpp"
#include "llm/router.hpp"

using namespace kopt::llm;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

const std::string key = "sk-test-providers-0123456789SECRET";

struct seen {
  std::string path;
  std::string body;
  std::string authorization;
};

// A loopback server: the answer to request N is script[N] (the last repeats).
class script_server {
 public:
  using step = std::function<void(const httplib::Request&, httplib::Response&)>;
  explicit script_server(std::vector<step> script) : script_(std::move(script)) {
    auto h = [this](const httplib::Request& req, httplib::Response& res) {
      std::size_t n = 0;
      {
        std::lock_guard lock(mu_);
        n = requests_.size();
        requests_.push_back({req.path, req.body, req.get_header_value("Authorization")});
      }
      script_[std::min(n, script_.size() - 1)](req, res);
    };
    svr_.Post("/v1/chat/completions", h);
    svr_.Post("/v1/responses", h);
    svr_.Post("/v1/messages", h);
    // Gemini's OpenAI-compatible endpoint lives under another prefix.
    svr_.Post("/v1beta/openai/chat/completions", h);
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
  json body(std::size_t i) const { return json::parse(requests().at(i).body); }

 private:
  std::vector<step> script_;
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<seen> requests_;
};

script_server::step reply(int status, std::string body) {
  return [=](const httplib::Request&, httplib::Response& res) {
    res.status = status;
    res.set_content(body, "application/json");
  };
}

// SSE frames: "event: NAME\ndata: JSON\n\n" (the event line left out when empty).
std::string sse(const std::string& event, const json& data) {
  std::string s;
  if (!event.empty()) s += "event: " + event + "\n";
  return s + "data: " + data.dump() + "\n\n";
}

script_server::step stream(std::vector<std::string> chunks) {
  return [=](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/event-stream",
                                     [=](std::size_t, httplib::DataSink& sink) {
                                       for (const std::string& c : chunks)
                                         if (!sink.write(c.data(), c.size())) return false;
                                       sink.done();
                                       return true;
                                     });
  };
}

provider_config config_for(const std::string& kind, const std::string& url,
                           const std::string& model) {
  provider_config c;
  c.kind = kind;
  c.model = model;
  c.base_url = url + "/v1";
  c.retry.max_attempts = 3;
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

  void make(const provider_config& cfg, price_table prices = {}) {
    std::unique_ptr<provider> p;
    if (cfg.kind == "openai")
      p = std::make_unique<openai_provider>(cfg, key, transport, clock);
    else
      p = std::make_unique<anthropic_provider>(cfg, key, transport, clock);
    client_options o;
    o.recorder = &recorder;
    o.prices = std::move(prices);
    client = std::make_unique<llm_client>(std::move(p), o);
  }
};

provider_config parse(const json& j) {
  return parse_provider_config(j);
}

}  // namespace

// ------------------------------------------------------------------ Chat Completions

TEST(ChatCompletions, ReasoningModelGetsMaxCompletionTokensAndEffort) {
  // What OpenAI answers a reasoning model sent max_tokens: a 400 that would
  // stop LLM use for the campaign. The server checks the field.
  const std::string ok =
      R"({"id":"chatcmpl-1","object":"chat.completion","model":"o3-mini-2025-01-31",
          "choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],
          "usage":{"prompt_tokens":1200,"completion_tokens":900,"total_tokens":2100,
                   "prompt_tokens_details":{"cached_tokens":1024},
                   "completion_tokens_details":{"reasoning_tokens":832}}})";
  script_server srv({[&](const httplib::Request& req, httplib::Response& res) {
    const json b = json::parse(req.body);
    if (b.contains("max_tokens")) {
      res.status = 400;
      res.set_content(
          R"({"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}})",
          "application/json");
      return;
    }
    res.set_content(ok, "application/json");
  }});
  fixture f;
  provider_config cfg = config_for("openai", srv.url(), "o3-mini");
  cfg.reasoning_effort = "high";
  cfg.temperature = 0.3;  // refused by reasoning models: must not be sent
  f.make(cfg, price_table::from_json(
                  {{"o3-mini", {{"input", 1.1}, {"output", 4.4}, {"cached_input", 0.55}}}}));
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  const json b = srv.body(0);
  EXPECT_EQ(b["max_completion_tokens"], 50);
  EXPECT_FALSE(b.contains("max_tokens"));
  EXPECT_EQ(b["reasoning_effort"], "high");
  EXPECT_FALSE(b.contains("temperature"));
  EXPECT_EQ(c.tokens.prompt, 1200);
  EXPECT_EQ(c.tokens.cached, 1024);
  EXPECT_EQ(c.tokens.reasoning, 832);
  EXPECT_EQ(c.tokens.completion, 900);
  EXPECT_NEAR(c.cost_usd, (176 * 1.1 + 1024 * 0.55 + 900 * 4.4) / 1e6, 1e-12);

  // A non-reasoning model keeps max_tokens unless the config says otherwise.
  EXPECT_EQ(openai_provider::options_for(parse({{"provider", "openai"}, {"model", "gpt-4o"}}))
                .max_tokens_field,
            "max_tokens");
  EXPECT_EQ(openai_provider::options_for(parse({{"provider", "openai"},
                                                {"model", "gpt-4o"},
                                                {"max_tokens_field", "max_completion_tokens"}}))
                .max_tokens_field,
            "max_completion_tokens");
  EXPECT_EQ(openai_provider::options_for(
                parse({{"provider", "openai"}, {"model", "openrouter/openai/gpt-5-mini"}}))
                .max_tokens_field,
            "max_completion_tokens");
  EXPECT_EQ(
      openai_provider::options_for(parse({{"provider", "openai"}, {"model", "gpt-5-chat-latest"}}))
          .max_tokens_field,
      "max_tokens");
  // A local server with reasoning_effort set: the new field, and its temperature stays.
  const auto local = openai_provider::options_for(parse({{"provider", "openai"},
                                                         {"model", "qwen3-32b"},
                                                         {"base_url", "http://127.0.0.1:8000/v1"},
                                                         {"reasoning_effort", "low"}}));
  EXPECT_EQ(local.max_tokens_field, "max_completion_tokens");
  EXPECT_TRUE(local.send_temperature);
}

TEST(ChatCompletions, ExtraBodyIsMergedAndOwnedFieldsAreRefused) {
  script_server srv({reply(
      200, R"({"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]})")});
  fixture f;
  const provider_config cfg = parse({{"provider", "openai"},
                                     {"model", "Qwen/Qwen3-32B"},
                                     {"base_url", srv.url() + "/v1"},
                                     {"temperature", 0.6},
                                     {"extra_body",
                                      {{"top_k", 20},
                                       {"chat_template_kwargs", {{"enable_thinking", true}}},
                                       {"provider", {{"sort", "price"}}}}}});
  f.make(cfg);
  ASSERT_TRUE(f.client->call(small_request()).ok());
  const json b = srv.body(0);
  EXPECT_EQ(b["top_k"], 20);
  EXPECT_EQ(b["chat_template_kwargs"]["enable_thinking"], true);
  EXPECT_EQ(b["provider"]["sort"], "price");
  EXPECT_EQ(b["temperature"], 0.6);
  EXPECT_EQ(b["max_tokens"], 50);
  for (const char* owned : {"model", "messages", "stream", "n", "max_tokens"}) {
    SCOPED_TRACE(owned);
    EXPECT_THROW(parse({{"provider", "openai"}, {"model", "m"}, {"extra_body", {{owned, 1}}}}),
                 kopt::config_error);
  }
  EXPECT_THROW(parse({{"provider", "openai"}, {"model", "m"}, {"extra_body", "top_k=20"}}),
               kopt::config_error);
}

TEST(ChatCompletions, NGivesSeveralAnswersFromOneCall) {
  // Choices in a different order than their index: the index decides.
  script_server srv(
      {reply(200, R"({"model":"gpt-4.1-mini","choices":[
        {"index":2,"message":{"role":"assistant","content":"third"},"finish_reason":"stop"},
        {"index":0,"message":{"role":"assistant","content":"first"},"finish_reason":"stop"},
        {"index":1,"message":{"role":"assistant","content":"second"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":100,"completion_tokens":30}})"),
       stream({sse("", {{"choices",
                         {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", "a"}}}}}}}),
               sse("", {{"choices", {{{"index", 1}, {"delta", {{"content", "B"}}}}}}}),
               sse("", {{"choices", {{{"index", 0}, {"delta", {{"content", "a2"}}}}}}}),
               sse("",
                   {{"choices",
                     {{{"index", 1}, {"delta", {{"content", "B2"}}}, {"finish_reason", "stop"}}}}}),
               sse("", {{"choices",
                         {{{"index", 0}, {"delta", json::object()}, {"finish_reason", "stop"}}}}}),
               sse("", {{"choices", json::array()},
                        {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 4}}}}),
               "data: [DONE]\n\n"})});
  fixture f;
  provider_config cfg = config_for("openai", srv.url(), "gpt-4.1-mini");
  cfg.n = 3;
  f.make(cfg);
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(srv.body(0)["n"], 3);
  EXPECT_EQ(c.texts, (std::vector<std::string>{"first", "second", "third"}));
  EXPECT_EQ(c.text, "first");
  EXPECT_EQ(f.recorder.records().at(0).texts.size(), 3u);

  fixture g;
  provider_config scfg = config_for("openai", srv.url(), "gpt-4.1-mini");
  scfg.stream = true;
  g.make(scfg);
  request r = small_request();
  r.n = 2;
  const completion s = g.client->call(r);
  ASSERT_TRUE(s.ok()) << s.error;
  EXPECT_EQ(srv.body(1)["n"], 2);
  EXPECT_EQ(s.texts, (std::vector<std::string>{"aa2", "BB2"}));
  EXPECT_EQ(s.tokens.completion, 4);
  // n is only where the API has it.
  EXPECT_THROW(parse({{"provider", "anthropic"}, {"model", "c"}, {"n", 2}}), kopt::config_error);
  EXPECT_THROW(parse({{"provider", "openai"}, {"model", "o3"}, {"api", "responses"}, {"n", 2}}),
               kopt::config_error);
}

// ------------------------------------------------------------------ Responses API

const char* responses_ok = R"({
  "id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,
  "status":"completed","error":null,"incomplete_details":null,"model":"o4-mini-2025-04-16",
  "output":[
    {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Fuse the two passes."}]},
    {"type":"message","id":"msg_1","status":"completed","role":"assistant",
     "content":[{"type":"output_text","text":"```cuda\n// kernel\n```","annotations":[]}]}],
  "usage":{"input_tokens":2048,"input_tokens_details":{"cached_tokens":1536},
           "output_tokens":700,"output_tokens_details":{"reasoning_tokens":512},"total_tokens":2748}})";

TEST(Responses, NonStreamedRequestAndAnswer) {
  script_server srv({reply(200, responses_ok)});
  fixture f;
  const provider_config cfg = parse({{"provider", "openai"},
                                     {"model", "o4-mini"},
                                     {"api", "responses"},
                                     {"base_url", srv.url() + "/v1"},
                                     {"reasoning_effort", "medium"},
                                     {"extra_body", {{"reasoning", {{"summary", "auto"}}}}}});
  EXPECT_EQ(endpoint_url(cfg), srv.url() + "/v1/responses");
  f.make(cfg, price_table::from_json(
                  {{"o4-mini", {{"input", 1.1}, {"output", 4.4}, {"cached_input", 0.275}}}}));
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  const auto reqs = srv.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].path, "/v1/responses");
  const json b = json::parse(reqs[0].body);
  EXPECT_EQ(b["instructions"], "be brief");
  EXPECT_EQ(b["input"], json::parse(R"([{"role":"user","content":"hello"}])"));
  EXPECT_EQ(b["max_output_tokens"], 50);
  EXPECT_EQ(b["reasoning"],
            json::parse(R"({"effort":"medium","summary":"auto"})"));  // merged, not replaced
  EXPECT_EQ(b["store"], false);
  EXPECT_FALSE(b.contains("messages"));
  EXPECT_FALSE(b.contains("max_tokens"));
  EXPECT_FALSE(b.contains("max_completion_tokens"));
  EXPECT_EQ(c.text, "```cuda\n// kernel\n```");
  EXPECT_EQ(c.reasoning, "Fuse the two passes.");
  EXPECT_EQ(c.stop_reason, "completed");
  EXPECT_EQ(c.model, "o4-mini-2025-04-16");
  EXPECT_EQ(c.tokens.prompt, 2048);
  EXPECT_EQ(c.tokens.cached, 1536);
  EXPECT_EQ(c.tokens.completion, 700);
  EXPECT_EQ(c.tokens.reasoning, 512);
  EXPECT_NEAR(c.cost_usd, (512 * 1.1 + 1536 * 0.275 + 700 * 4.4) / 1e6, 1e-12);
}

TEST(Responses, IncompleteAndFailedResponses) {
  script_server srv(
      {reply(
           200,
           R"({"object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},
                      "model":"o3","output":[{"type":"reasoning","id":"rs","summary":[]}],
                      "usage":{"input_tokens":900,"output_tokens":50,"output_tokens_details":{"reasoning_tokens":50}}})"),
       reply(200, R"({"object":"response","status":"failed","model":"o3","output":[],
                      "error":{"code":"server_error","message":"The model failed to generate a response."}})"),
       reply(
           400,
           R"({"error":{"message":"Unsupported value: 'reasoning.effort' does not support 'minimal' with this model.","type":"invalid_request_error","param":"reasoning.effort","code":"unsupported_value"}})")});
  fixture f;
  provider_config cfg = config_for("openai", srv.url(), "o3");
  cfg.api = "responses";
  cfg.retry.max_attempts = 1;
  f.make(cfg);
  const completion cut = f.client->call(small_request());
  ASSERT_TRUE(cut.ok()) << cut.error;
  EXPECT_EQ(cut.stop_reason, "max_output_tokens");
  EXPECT_TRUE(cut.truncated());
  EXPECT_TRUE(cut.text.empty());
  EXPECT_EQ(cut.tokens.reasoning, 50);
  const completion failed = f.client->call(small_request());
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.error.find("The model failed to generate a response"), std::string::npos)
      << failed.error;
  const completion refused = f.client->call(small_request());
  EXPECT_EQ(refused.status, call_status::permanent);
  EXPECT_NE(refused.error.find("unsupported_value"), std::string::npos) << refused.error;
}

TEST(Responses, StreamedEventsWithUsage) {
  // The semantic event sequence of a streamed response (no [DONE] line).
  const json created = {{"type", "response.created"},
                        {"sequence_number", 0},
                        {"response",
                         {{"id", "resp_1"},
                          {"object", "response"},
                          {"status", "in_progress"},
                          {"model", "gpt-5-2025-08-07"},
                          {"output", json::array()}}}};
  json done_response = json::parse(responses_ok);
  done_response["model"] = "gpt-5-2025-08-07";
  script_server srv({stream({
      sse("response.created", created),
      sse("response.in_progress", {{"type", "response.in_progress"},
                                   {"sequence_number", 1},
                                   {"response", created["response"]}}),
      sse("response.output_item.added",
          {{"type", "response.output_item.added"},
           {"sequence_number", 2},
           {"output_index", 0},
           {"item", {{"type", "reasoning"}, {"id", "rs_1"}, {"summary", json::array()}}}}),
      sse("response.reasoning_summary_text.delta",
          {{"type", "response.reasoning_summary_text.delta"},
           {"item_id", "rs_1"},
           {"output_index", 0},
           {"summary_index", 0},
           {"delta", "Fuse the "},
           {"sequence_number", 3}}),
      sse("response.reasoning_summary_text.delta",
          {{"type", "response.reasoning_summary_text.delta"},
           {"item_id", "rs_1"},
           {"output_index", 0},
           {"summary_index", 0},
           {"delta", "two passes."},
           {"sequence_number", 4}}),
      sse("response.output_item.added", {{"type", "response.output_item.added"},
                                         {"sequence_number", 5},
                                         {"output_index", 1},
                                         {"item",
                                          {{"type", "message"},
                                           {"id", "msg_1"},
                                           {"role", "assistant"},
                                           {"content", json::array()}}}}),
      sse("response.content_part.added",
          {{"type", "response.content_part.added"},
           {"sequence_number", 6},
           {"item_id", "msg_1"},
           {"output_index", 1},
           {"content_index", 0},
           {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}}),
      sse("response.output_text.delta", {{"type", "response.output_text.delta"},
                                         {"sequence_number", 7},
                                         {"item_id", "msg_1"},
                                         {"output_index", 1},
                                         {"content_index", 0},
                                         {"delta", "```cuda\n"}}),
      sse("response.output_text.delta", {{"type", "response.output_text.delta"},
                                         {"sequence_number", 8},
                                         {"item_id", "msg_1"},
                                         {"output_index", 1},
                                         {"content_index", 0},
                                         {"delta", "// kernel\n```"}}),
      sse("response.output_text.done", {{"type", "response.output_text.done"},
                                        {"sequence_number", 9},
                                        {"item_id", "msg_1"},
                                        {"output_index", 1},
                                        {"content_index", 0},
                                        {"text", "```cuda\n// kernel\n```"}}),
      sse("response.completed",
          {{"type", "response.completed"}, {"sequence_number", 10}, {"response", done_response}}),
  })});
  fixture f;
  provider_config cfg = config_for("openai", srv.url(), "gpt-5");
  cfg.api = "responses";
  cfg.stream = true;
  f.make(cfg);
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(srv.body(0)["stream"], true);
  EXPECT_FALSE(srv.body(0).contains("stream_options"));  // a Chat Completions field
  EXPECT_EQ(c.text, "```cuda\n// kernel\n```");
  EXPECT_EQ(c.reasoning, "Fuse the two passes.");
  EXPECT_EQ(c.model, "gpt-5-2025-08-07");
  EXPECT_TRUE(c.tokens.reported);
  EXPECT_EQ(c.tokens.cached, 1536);
  EXPECT_EQ(c.tokens.reasoning, 512);
}

TEST(Responses, StreamedErrorEventIsRetriedAndStreamWithoutTerminalEventIsCut) {
  json done_response = json::parse(responses_ok);
  script_server srv({stream({sse("response.created",
                                 {{"type", "response.created"},
                                  {"response", {{"model", "o3"}, {"output", json::array()}}}}),
                             sse("error", {{"type", "error"},
                                           {"code", "server_error"},
                                           {"message", "upstream overloaded"},
                                           {"param", nullptr},
                                           {"sequence_number", 1}})}),
                     stream({sse("response.output_text.delta",
                                 {{"type", "response.output_text.delta"}, {"delta", "partial"}})}),
                     stream({sse("response.completed",
                                 {{"type", "response.completed"}, {"response", done_response}})})});
  fixture f;
  provider_config cfg = config_for("openai", srv.url(), "o3");
  cfg.api = "responses";
  cfg.stream = true;
  f.make(cfg);
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(c.attempts, 3);
  // No deltas but a final response object: its text is the answer.
  EXPECT_EQ(c.text, "```cuda\n// kernel\n```");
}

// ------------------------------------------------------------------ Anthropic

const char* anthropic_thinking = R"({
  "id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",
  "content":[
    {"type":"thinking","thinking":"The row is read twice; fuse.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
    {"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
    {"type":"text","text":"```cuda\n// fused\n```"}],
  "stop_reason":"end_turn","stop_sequence":null,
  "usage":{"input_tokens":120,"cache_creation_input_tokens":0,"cache_read_input_tokens":3000,"output_tokens":900}})";

TEST(Anthropic, ThinkingAndCacheBreakpoints) {
  script_server srv({reply(200, anthropic_thinking)});
  fixture f;
  const provider_config cfg = parse({{"provider", "anthropic"},
                                     {"model", "claude-sonnet-4-5"},
                                     {"base_url", srv.url()},
                                     {"temperature", 0.5},
                                     {"thinking", {{"type", "enabled"}, {"budget_tokens", 4096}}}});
  EXPECT_TRUE(cfg.prompt_cache);  // on by default
  f.make(cfg,
         price_table::from_json(
             {{"claude-sonnet-4-5",
               {{"input", 3.0}, {"output", 15.0}, {"cached_input", 0.3}, {"cache_write", 3.75}}}}));
  request r;
  r.system = "SYSTEM RULES";
  const std::string stable = "## Operator\nspec\n\n## Target GPU\nH200\n";
  const std::string rest = "\n## Current kernel\n...\n## Your task\nImprove it.\n";
  message m{"user", stable + rest};
  m.cache_breaks = {stable.size()};
  r.messages.push_back(m);
  r.max_tokens = 8000;
  const completion c = f.client->call(r);
  ASSERT_TRUE(c.ok()) << c.error;
  const json b = srv.body(0);
  EXPECT_EQ(b["thinking"], json::parse(R"({"type":"enabled","budget_tokens":4096})"));
  EXPECT_EQ(b["max_tokens"], 8000 + 4096);  // the answer keeps its cap on top of the budget
  EXPECT_FALSE(b.contains("temperature"));  // not accepted with thinking
  // Breakpoint 1: the system prompt as a block with cache_control.
  EXPECT_EQ(b["system"],
            json::parse(
                R"([{"type":"text","text":"SYSTEM RULES","cache_control":{"type":"ephemeral"}}])"));
  // Breakpoint 2: the user message cut where the stable prefix ends.
  const json& content = b["messages"][0]["content"];
  ASSERT_TRUE(content.is_array());
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["text"], stable);
  EXPECT_EQ(content[0]["cache_control"], json::parse(R"({"type":"ephemeral"})"));
  EXPECT_EQ(content[1]["text"], rest);
  EXPECT_FALSE(content[1].contains("cache_control"));
  // Thinking is kept apart; the answer is the text block only.
  EXPECT_EQ(c.text, "```cuda\n// fused\n```");
  EXPECT_EQ(c.reasoning, "The row is read twice; fuse.");
  EXPECT_EQ(f.recorder.records().at(0).reasoning, "The row is read twice; fuse.");
  EXPECT_EQ(c.tokens.prompt, 120 + 3000);
  EXPECT_EQ(c.tokens.cached, 3000);
  EXPECT_NEAR(c.cost_usd, (120 * 3.0 + 3000 * 0.3 + 900 * 15.0) / 1e6, 1e-12);
}

TEST(Anthropic, BreakpointLimitTtlBlankBlocksAndCacheOff) {
  message m{"user", "A\n  \nB\nC\nD\nE\nF"};
  // Offsets: after "A\n" (2), after the blank line (5: would make a blank
  // block, dropped), after B (7), C (9), D (11), E (13).
  m.cache_breaks = {2, 5, 7, 9, 11, 13, 0, 999};
  request r;
  r.system = "S";
  r.messages = {m};
  anthropic_options o;
  o.prompt_cache = true;
  o.cache_ttl = "1h";
  const json b = anthropic_request_body(r, "claude", false, o);
  const json& content = b["messages"][0]["content"];
  int marked = 0;
  std::string joined;
  for (const json& block : content) {
    joined += block["text"].get<std::string>();
    EXPECT_NE(block["text"].get<std::string>().find_first_not_of(" \n"), std::string::npos)
        << "blank block";
    if (block.contains("cache_control")) {
      ++marked;
      EXPECT_EQ(block["cache_control"], json::parse(R"({"type":"ephemeral","ttl":"1h"})"));
    }
  }
  EXPECT_EQ(joined, m.content);  // the blocks are the message, cut
  EXPECT_EQ(marked, 3);          // with the system breakpoint: the API's four
  // The latest breaks are kept (9, 11, 13): ... "D\n" | "E\n" | "F".
  ASSERT_EQ(content.size(), 4u);
  EXPECT_EQ(content[0]["text"], "A\n  \nB\nC\n");
  EXPECT_EQ(content[2]["text"], "E\n");
  EXPECT_EQ(content[3]["text"], "F");
  EXPECT_FALSE(content[3].contains("cache_control"));
  EXPECT_TRUE(b["system"][0].contains("cache_control"));

  o.prompt_cache = false;
  const json plain = anthropic_request_body(r, "claude", false, o);
  EXPECT_EQ(plain["system"], "S");
  EXPECT_EQ(plain["messages"][0]["content"], m.content);

  EXPECT_THROW(
      parse({{"provider", "anthropic"}, {"model", "c"}, {"thinking", {{"budget_tokens", 512}}}}),
      kopt::config_error);
  EXPECT_THROW(
      parse({{"provider", "openai"}, {"model", "o3"}, {"thinking", {{"budget_tokens", 2048}}}}),
      kopt::config_error);
  EXPECT_THROW(parse({{"provider", "anthropic"}, {"model", "c"}, {"reasoning_effort", "high"}}),
               kopt::config_error);
  EXPECT_THROW(parse({{"provider", "openai"}, {"model", "o3"}, {"reasoning_effort", "hgih"}}),
               kopt::config_error);
  EXPECT_THROW(parse({{"provider", "anthropic"}, {"model", "c"}, {"cache_ttl", "2h"}}),
               kopt::config_error);
  EXPECT_THROW(parse({{"provider", "anthropic"}, {"model", "c"}, {"api", "responses"}}),
               kopt::config_error);
}

TEST(Anthropic, StreamedThinkingAndCacheWriteUsage) {
  auto ev = [](const std::string& type, json data) {
    data["type"] = type;
    return sse(type, data);
  };
  script_server srv({stream({
      ev("message_start", {{"message",
                            {{"id", "msg_1"},
                             {"type", "message"},
                             {"role", "assistant"},
                             {"model", "claude-opus-4-1"},
                             {"content", json::array()},
                             {"stop_reason", nullptr},
                             {"usage",
                              {{"input_tokens", 50},
                               {"cache_creation_input_tokens", 2500},
                               {"cache_read_input_tokens", 0},
                               {"output_tokens", 1}}}}}}),
      ev("content_block_start",
         {{"index", 0}, {"content_block", {{"type", "thinking"}, {"thinking", ""}}}}),
      ev("content_block_delta",
         {{"index", 0}, {"delta", {{"type", "thinking_delta"}, {"thinking", "Two passes; "}}}}),
      ev("content_block_delta",
         {{"index", 0}, {"delta", {{"type", "thinking_delta"}, {"thinking", "fuse them."}}}}),
      ev("content_block_delta",
         {{"index", 0}, {"delta", {{"type", "signature_delta"}, {"signature", "EqQBCgIYAh"}}}}),
      ev("content_block_stop", {{"index", 0}}),
      ev("content_block_start",
         {{"index", 1}, {"content_block", {{"type", "text"}, {"text", ""}}}}),
      ev("content_block_delta",
         {{"index", 1}, {"delta", {{"type", "text_delta"}, {"text", "answer"}}}}),
      ev("content_block_stop", {{"index", 1}}),
      ev("ping", json::object()),
      ev("message_delta", {{"delta", {{"stop_reason", "end_turn"}, {"stop_sequence", nullptr}}},
                           {"usage", {{"output_tokens", 420}}}}),
      ev("message_stop", json::object()),
  })});
  fixture f;
  provider_config cfg = config_for("anthropic", srv.url(), "claude-opus-4-1");
  cfg.stream = true;
  cfg.thinking_budget_tokens = 2048;
  f.make(
      cfg,
      price_table::from_json(
          {{"claude-opus-4-1",
            {{"input", 15.0}, {"output", 75.0}, {"cached_input", 1.5}, {"cache_write", 18.75}}}}));
  const completion c = f.client->call(small_request());
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(c.text, "answer");
  EXPECT_EQ(c.reasoning, "Two passes; fuse them.");
  EXPECT_EQ(c.tokens.prompt, 2550);
  EXPECT_EQ(c.tokens.cache_write, 2500);
  EXPECT_EQ(c.tokens.completion, 420);
  EXPECT_NEAR(c.cost_usd, (50 * 15.0 + 2500 * 18.75 + 420 * 75.0) / 1e6, 1e-12);
  // The budget's worst case counts the thinking budget.
  request r = small_request();
  EXPECT_EQ(f.client->backend().worst_case_output_tokens(r), 50 + 2048);
}

// ------------------------------------------------------------------ kopt llm check

namespace {
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

TEST(LlmCheckOptions, EachNewOptionReachesTheWire) {
  script_server srv(
      {reply(
           200,
           R"({"model":"o3","choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"},
                                   {"index":1,"message":{"content":"ok"},"finish_reason":"stop"}]})"),
       reply(200, responses_ok), reply(200, anthropic_thinking), reply(200, anthropic_thinking),
       reply(200, anthropic_thinking)});
  const std::string url = srv.url() + "/v1";
  ASSERT_EQ(
      run_check({"--provider", "openai", "--model", "o3", "--base-url", url, "--reasoning-effort",
                 "low", "--n", "2", "--extra-body", R"({"seed": 7})", "--json"}),
      check_exit_ok);
  json b = srv.body(0);
  EXPECT_EQ(b["reasoning_effort"], "low");
  EXPECT_EQ(b["max_completion_tokens"], 256);
  EXPECT_EQ(b["n"], 2);
  EXPECT_EQ(b["seed"], 7);
  ASSERT_EQ(run_check({"--provider", "openai", "--model", "o4-mini", "--base-url", url, "--api",
                       "responses"}),
            check_exit_ok);
  EXPECT_EQ(srv.requests().at(1).path, "/v1/responses");
  ASSERT_EQ(run_check({"--provider", "anthropic", "--model", "c", "--base-url", srv.url(),
                       "--thinking-budget", "1024", "--no-prompt-cache"}),
            check_exit_ok);
  b = srv.body(2);
  EXPECT_EQ(b["thinking"]["budget_tokens"], 1024);
  EXPECT_EQ(b["max_tokens"], 256 + 1024);
  EXPECT_TRUE(b["messages"][0]["content"].is_string());
  // --cache-probe: two identical long calls, breakpoints on system and prefix.
  ASSERT_EQ(run_check({"--provider", "anthropic", "--model", "c", "--base-url", srv.url(),
                       "--cache-probe"}),
            check_exit_ok);
  ASSERT_EQ(srv.requests().size(), 5u);
  EXPECT_EQ(srv.requests().at(3).body, srv.requests().at(4).body);
  b = srv.body(3);
  EXPECT_TRUE(b["system"][0].contains("cache_control"));
  EXPECT_TRUE(b["messages"][0]["content"][0].contains("cache_control"));
  EXPECT_GT(b["messages"][0]["content"][0]["text"].get<std::string>().size(), 4096u);
  // Bad values are configuration problems, before anything is sent.
  EXPECT_EQ(run_check({"--provider", "openai", "--model", "o3", "--base-url", url, "--extra-body",
                       "[1]"}),
            check_exit_config);
  EXPECT_EQ(run_check({"--provider", "anthropic", "--model", "c", "--base-url", srv.url(),
                       "--thinking-budget", "100"}),
            check_exit_config);
  EXPECT_EQ(srv.requests().size(), 5u);
}

TEST(LlmCheckOptions, EveryModelOfLlmModelsIsChecked) {
  script_server srv(
      {reply(200, R"({"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]})"),
       reply(200, responses_ok)});
  const auto dir =
      std::filesystem::temp_directory_path() / ("kopt-check-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "llm.json";
  std::ofstream(file) << json{{"llm",
                               {{"provider", "openai"},
                                {"base_url", srv.url() + "/v1"},
                                {"models",
                                 {{{"model", "gpt-4.1-mini"}, {"name", "cheap"}},
                                  {{"model", "o3"}, {"api", "responses"}, {"tier", 1}}}},
                                {"selection", {{"policy", "bandit"}}}}}}
                             .dump();
  EXPECT_EQ(run_check({"--config", file.string(), "--json"}), check_exit_ok);
  const auto reqs = srv.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].path, "/v1/chat/completions");
  EXPECT_EQ(reqs[1].path, "/v1/responses");
  std::filesystem::remove_all(dir);
}

// The remaining options of `kopt llm check`: --max-tokens-field both ways,
// a streamed Responses call, and a service behind an OpenAI-compatible
// endpoint with its own prefix and key variable (Gemini's, as
// docs/providers.md shows it).
TEST(LlmCheckOptions, MaxTokensFieldStreamedResponsesAndGeminiEndpoint) {
  json done_response = json::parse(responses_ok);
  script_server srv(
      {reply(200, R"({"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]})"),
       reply(200, R"({"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]})"),
       stream({sse("response.created",
                   {{"type", "response.created"},
                    {"response", {{"model", "o4-mini"}, {"output", json::array()}}}}),
               sse("response.output_text.delta",
                   {{"type", "response.output_text.delta"}, {"delta", "ok"}}),
               sse("response.completed",
                   {{"type", "response.completed"}, {"response", done_response}})}),
       reply(200, R"({"model":"gemini-2.5-pro","choices":[{"index":0,"message":{"content":"ok"},
                      "finish_reason":"stop"}],
                      "usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}})")});
  const std::string url = srv.url() + "/v1";
  // A non-reasoning model told to use max_completion_tokens ...
  ASSERT_EQ(run_check({"--provider", "openai", "--model", "gpt-4.1", "--base-url", url,
                       "--max-tokens-field", "max_completion_tokens", "--max-tokens", "64"}),
            check_exit_ok);
  json b = srv.body(0);
  EXPECT_EQ(b["max_completion_tokens"], 64);
  EXPECT_FALSE(b.contains("max_tokens"));
  // ... and a reasoning model told to send max_tokens (a server that wants it).
  ASSERT_EQ(run_check({"--provider", "openai", "--model", "o3", "--base-url", url,
                       "--max-tokens-field", "max_tokens", "--max-tokens", "64"}),
            check_exit_ok);
  b = srv.body(1);
  EXPECT_EQ(b["max_tokens"], 64);
  EXPECT_FALSE(b.contains("max_completion_tokens"));
  EXPECT_FALSE(b.contains("temperature"));  // still a reasoning model
  // Responses, streamed.
  ASSERT_EQ(run_check({"--provider", "openai", "--model", "o4-mini", "--base-url", url, "--api",
                       "responses", "--stream", "--reasoning-effort", "low", "--json"}),
            check_exit_ok);
  EXPECT_EQ(srv.requests().at(2).path, "/v1/responses");
  b = srv.body(2);
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["reasoning"]["effort"], "low");
  EXPECT_TRUE(b.contains("max_output_tokens"));
  // Gemini's endpoint: its prefix, its key variable, reasoning_effort, and
  // max_tokens as the docs' example sets it.
  setenv("KOPT_TEST_GEMINI_KEY", "gm-test-not-a-key", 1);
  ASSERT_EQ(run_check({"--provider", "openai", "--base-url", srv.url() + "/v1beta/openai",
                       "--model", "gemini-2.5-pro", "--api-key-env", "KOPT_TEST_GEMINI_KEY",
                       "--reasoning-effort", "low", "--max-tokens-field", "max_tokens"}),
            check_exit_ok);
  const auto reqs = srv.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[3].path, "/v1beta/openai/chat/completions");
  EXPECT_EQ(reqs[3].authorization, "Bearer gm-test-not-a-key");
  b = srv.body(3);
  EXPECT_EQ(b["model"], "gemini-2.5-pro");
  EXPECT_EQ(b["reasoning_effort"], "low");
  EXPECT_TRUE(b.contains("max_tokens"));
  EXPECT_FALSE(b.contains("max_completion_tokens"));
  // A bad field name is a configuration problem, before anything is sent.
  EXPECT_EQ(run_check({"--provider", "openai", "--model", "o3", "--base-url", url,
                       "--max-tokens-field", "max_output"}),
            check_exit_config);
  EXPECT_EQ(srv.requests().size(), 4u);
  unsetenv("KOPT_TEST_GEMINI_KEY");
}
