// The client's policies with the non-network providers: budget refusal and
// the one-call overrun bound, the command provider (no shell, time and
// output limits), replay of a recorded transcript, autotune, keys and
// environment scrubbing, and config parsing.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "llm/client.hpp"
#include "llm/command_output.hpp"
#include "llm/provider.hpp"
#include "llm/secrets.hpp"

using namespace kopt::llm;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("kopt_llm_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

request prompt(const std::string& text, std::int64_t max_tokens = 100) {
  request r;
  r.messages = {{"user", text}};
  r.max_tokens = max_tokens;
  return r;
}

}  // namespace

TEST(LlmClient, RecordedTranscriptReplays) {
  const fs::path t = temp_dir() / "transcript.jsonl";
  fs::remove(t);
  {
    jsonl_recorder rec(t);
    call_record r;
    r.prompt_sha256 = "";  // unmatched: served in order
    r.response = "first";
    r.tokens.prompt = 10;
    r.tokens.completion = 5;
    rec.record(r);
    call_record m;
    m.prompt_sha256 = kopt::sha256_hex(prompt_json(prompt("special")).dump());
    m.response = "for special";
    rec.record(m);
  }
  provider_config cfg;
  cfg.kind = "replay";
  cfg.transcript = t;
  memory_recorder mem;
  client_options o;
  o.recorder = &mem;
  llm_client c(make_provider(cfg), o);
  EXPECT_TRUE(c.backend().caps().deterministic);
  EXPECT_EQ(c.call(prompt("special")).text, "for special");
  const completion a = c.call(prompt("anything"));
  EXPECT_EQ(a.text, "first");
  EXPECT_EQ(a.tokens.completion, 5);
  const completion b = c.call(prompt("more"));
  EXPECT_EQ(b.status, call_status::bad_response);
  EXPECT_NE(b.error.find("no answer for this prompt"), std::string::npos);
  EXPECT_EQ(mem.records().size(), 3u);
}

TEST(LlmClient, BudgetStopsCallsBeforeSending) {
  const fs::path t = temp_dir() / "budget.jsonl";
  {
    std::ofstream f(t);
    for (int i = 0; i < 5; ++i)
      f << R"({"response":"r","usage":{"prompt":300,"completion":300}})"
        << "\n";
  }
  provider_config cfg;
  cfg.kind = "replay";
  cfg.transcript = t;
  budget b({1000, 1.0});
  memory_recorder mem;
  client_options o;
  o.recorder = &mem;
  o.campaign_budget = &b;
  o.prices = price_table::from_json({{"*", {{"input", 1000}, {"output", 1000}}}});
  llm_client c(make_provider(cfg), o);
  EXPECT_TRUE(c.call(prompt("a")).ok());  // 600 tokens, $0.6
  EXPECT_TRUE(c.call(prompt("b")).ok());  // alone in flight: may overrun, 1200 tokens
  const completion refused = c.call(prompt("c"));
  EXPECT_EQ(refused.status, call_status::budget_exceeded);
  EXPECT_EQ(refused.attempts, 0);
  EXPECT_EQ(b.spent_tokens(), 1200);
  EXPECT_LE(b.spent_tokens() - 1000, 600);  // overrun is at most one call
  EXPECT_EQ(mem.records().back().status, call_status::budget_exceeded);
}

TEST(LlmClient, AutotuneCallsNothing) {
  llm_client c(make_provider(provider_config{}), {});
  EXPECT_FALSE(c.backend().caps().calls_llm);
  EXPECT_EQ(c.call(prompt("x")).status, call_status::no_llm);
}

TEST(LlmClient, CommandProviderRunsWithoutShell) {
  provider_config cfg;
  cfg.kind = "command";
  cfg.command = {"/bin/sh", "-c", "read line; echo \"got:$line\"; echo \"arg:$0\"",
                 "$(touch /tmp/kopt_never)"};
  memory_recorder mem;
  client_options o;
  o.recorder = &mem;
  llm_client c(make_provider(cfg), o);
  const completion r = c.call(prompt("hello agent"));
  ASSERT_TRUE(r.ok()) << r.error;
  // The argument reached the program verbatim: nothing interpreted it.
  EXPECT_EQ(r.text, "got:hello agent\narg:$(touch /tmp/kopt_never)\n");
  EXPECT_FALSE(fs::exists("/tmp/kopt_never"));
  EXPECT_EQ(mem.records().at(0).response, r.text);
}

TEST(LlmClient, CommandProviderLimits) {
  provider_config cfg;
  cfg.kind = "command";
  cfg.command = {"sleep", "5"};
  cfg.command_timeout = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  const completion slow = make_provider(cfg)->complete(prompt("x"));
  EXPECT_EQ(slow.status, call_status::timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);

  cfg.command = {"yes"};
  cfg.command_timeout = 10s;
  cfg.max_output_bytes = 10000;
  const completion big = make_provider(cfg)->complete(prompt("x"));
  EXPECT_EQ(big.status, call_status::bad_response);
  EXPECT_NE(big.error.find("max_output_bytes"), std::string::npos);

  cfg.command = {"/bin/sh", "-c", "echo broken >&2; exit 3"};
  const completion failed = make_provider(cfg)->complete(prompt("x"));
  EXPECT_EQ(failed.status, call_status::transient);
  EXPECT_NE(failed.error.find("exited with status 3: broken"), std::string::npos) << failed.error;

  cfg.command = {"/nonexistent/agent"};
  EXPECT_EQ(make_provider(cfg)->complete(prompt("x")).status, call_status::permanent);
}

// Agent CLIs' JSON: the answer, usage and cost are read (the formats of
// `claude -p --output-format json` and `codex exec --json`), and with them
// the client's cost reaches the campaign budget without a price table.
TEST(LlmClient, CommandProviderReadsAgentCliUsage) {
  const auto dir = temp_dir();
  const auto claude = dir / "claude.json";
  {
    std::ofstream(claude)
        << R"({"type":"result","subtype":"success","is_error":false,"duration_ms":1998,)"
        << R"("num_turns":1,"result":"```cuda\nkernel\n```","stop_reason":"end_turn",)"
        << R"("session_id":"s","total_cost_usd":0.0125,)"
        << R"("usage":{"input_tokens":3,"cache_read_input_tokens":1500,)"
        << R"("cache_creation_input_tokens":200,"output_tokens":60}})";
  }
  provider_config cfg;
  cfg.kind = "command";
  cfg.command = {"/bin/sh", "-c", "cat >/dev/null; cat " + claude.string()};
  budget b(budget_limits{std::nullopt, 1.0});
  client_options o;
  o.campaign_budget = &b;
  llm_client c(make_provider(cfg), o);
  const completion r = c.call(prompt("write a kernel"));
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.text, "```cuda\nkernel\n```");
  EXPECT_TRUE(r.tokens.reported);
  EXPECT_EQ(r.tokens.prompt, 1703);
  EXPECT_EQ(r.tokens.cached, 1500);
  EXPECT_EQ(r.tokens.cache_write, 200);
  EXPECT_EQ(r.tokens.completion, 60);
  EXPECT_DOUBLE_EQ(r.cost_usd, 0.0125);
  EXPECT_EQ(r.stop_reason, "end_turn");

  const auto codex = dir / "codex.jsonl";
  {
    std::ofstream(codex)
        << R"({"type":"thread.started","thread_id":"t1"})"
        << "\n"
        << R"({"type":"turn.started"})"
        << "\n"
        << R"({"type":"item.completed","item":{"id":"i0","type":"reasoning","text":"thinking"}})"
        << "\n"
        << R"({"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"first"}})"
        << "\n"
        << R"({"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"the answer"}})"
        << "\n"
        << R"({"type":"turn.completed","usage":{"input_tokens":900,"cached_input_tokens":400,"output_tokens":120}})"
        << "\n";
  }
  cfg.command = {"/bin/sh", "-c", "cat >/dev/null; cat " + codex.string()};
  const completion x = make_provider(cfg)->complete(prompt("write a kernel"));
  ASSERT_TRUE(x.ok()) << x.error;
  EXPECT_EQ(x.text, "the answer");
  EXPECT_TRUE(x.tokens.reported);
  EXPECT_EQ(x.tokens.prompt, 900);
  EXPECT_EQ(x.tokens.cached, 400);
  EXPECT_EQ(x.tokens.completion, 120);

  // A failed turn is a failed call; plain text stays the answer, estimated.
  EXPECT_FALSE(parse_agent_cli_output(R"({"type":"turn.failed","error":{"message":"quota"}})")
                   .error.empty());
  EXPECT_FALSE(parse_agent_cli_output(
                   R"({"type":"result","is_error":true,"subtype":"error_max_turns","result":""})")
                   .error.empty());
  EXPECT_TRUE(parse_agent_cli_output("```cuda\nx\n```\n").format.empty());
  EXPECT_TRUE(parse_agent_cli_output("{\"a\": 1}\n").format.empty());
  EXPECT_TRUE(parse_agent_cli_output(R"({"type":"other"})").format.empty());
  cfg.command = {"/bin/sh", "-c", "cat >/dev/null; echo plain answer"};
  const completion p = make_provider(cfg)->complete(prompt("x"));
  EXPECT_EQ(p.text, "plain answer\n");
  EXPECT_FALSE(p.tokens.reported);
}

TEST(LlmSecrets, KeysFromEnvOrPrivateFileOnly) {
  ::setenv("KOPT_TEST_KEY", "sk-abcdefghijklmnopqrstuvwxyz", 1);
  EXPECT_EQ(load_api_key("KOPT_TEST_KEY", ""), "sk-abcdefghijklmnopqrstuvwxyz");
  try {
    load_api_key("KOPT_TEST_MISSING", "");
    FAIL();
  } catch (const kopt::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("KOPT_TEST_MISSING"), std::string::npos);
  }
  const fs::path f = temp_dir() / "key";
  { std::ofstream(f) << "sk-fromfile-123456789012345\n"; }
  ::chmod(f.c_str(), 0644);
  try {
    load_api_key("", f.string());
    FAIL();
  } catch (const kopt::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find("sk-fromfile"), std::string::npos);
  }
  ::chmod(f.c_str(), 0600);
  EXPECT_EQ(load_api_key("", f.string()), "sk-fromfile-123456789012345");

  const auto env = scrubbed_environment({"KOPT_TEST_KEY"}, {});
  for (const auto& e : env) EXPECT_EQ(e.find("sk-abcdefghijklmnopqrstuvwxyz"), std::string::npos);
  EXPECT_FALSE(env.empty());
  EXPECT_EQ(redact("key sk-abcdefghijklmnopqrstuvwxyz and sk-unknownkeyunknownkey1 here",
                   {"sk-abcdefghijklmnopqrstuvwxyz"}),
            "key [REDACTED] and [REDACTED] here");
  ::unsetenv("KOPT_TEST_KEY");
}

// systemd's LoadCredential=: "$CREDENTIALS_DIRECTORY/NAME" is expanded when
// the key is read, and a credential readable through systemd's ACL (mode
// 0440 here, as an ACL mask shows) is accepted; one others can write is not.
TEST(LlmSecrets, KeyFromSystemdCredentialsDirectory) {
  const fs::path dir = temp_dir() / "credentials";
  fs::create_directories(dir);
  { std::ofstream(dir / "openai") << "sk-credential-1234567890\n"; }
  ::chmod((dir / "openai").c_str(), 0440);
  ::unsetenv("CREDENTIALS_DIRECTORY");
  try {
    load_api_key("", "$CREDENTIALS_DIRECTORY/openai");
    FAIL() << "an unset CREDENTIALS_DIRECTORY must be an error";
  } catch (const kopt::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("LoadCredential="), std::string::npos) << e.what();
  }
  ::setenv("CREDENTIALS_DIRECTORY", dir.c_str(), 1);
  EXPECT_EQ(load_api_key("", "$CREDENTIALS_DIRECTORY/openai"), "sk-credential-1234567890");
  EXPECT_EQ(load_api_key("", "${CREDENTIALS_DIRECTORY}/openai"), "sk-credential-1234567890");
  ::chmod((dir / "openai").c_str(), 0460);
  EXPECT_THROW(load_api_key("", "$CREDENTIALS_DIRECTORY/openai"), kopt::config_error);
  // The same mode outside the credentials directory is refused as before.
  ::chmod((dir / "openai").c_str(), 0440);
  EXPECT_THROW(load_api_key("", (dir / "openai").string()), kopt::config_error);
  // The config keeps the placeholder (it is not relative to the config file).
  const auto c = parse_provider_config(nlohmann::json::parse(
                                           R"({"provider": "openai", "model": "m", "api_key_file": "$CREDENTIALS_DIRECTORY/openai"})"),
                                       "/etc/kopt");
  EXPECT_EQ(c.api_key_file, "$CREDENTIALS_DIRECTORY/openai");
  ::unsetenv("CREDENTIALS_DIRECTORY");
}

TEST(LlmConfig, ParsesAndRejectsPrecisely) {
  const auto c = parse_provider_config(nlohmann::json::parse(R"({
    "provider": "openai", "model": "qwen", "base_url": "http://localhost:8000/v1", "stream": true,
    "timeouts": {"connect_s": 5, "stall_s": 30, "total_s": 900},
    "retry": {"max_attempts": 6, "initial_delay_s": 1, "max_delay_s": 20},
    "limits": {"concurrency": 8, "requests_per_minute": 100, "tokens_per_minute": 50000},
    "prices": {"qwen": {"input": 0, "output": 0}}})"));
  EXPECT_EQ(c.kind, "openai");
  EXPECT_TRUE(c.stream);
  EXPECT_EQ(c.timeouts.stall, 30s);
  EXPECT_EQ(c.retry.max_attempts, 6);
  EXPECT_EQ(*c.rate.tokens_per_minute, 50000);
  EXPECT_EQ(c.max_concurrency, 8);
  EXPECT_EQ(endpoint_url(c), "http://localhost:8000/v1/chat/completions");
  // A local server without a key: no key is read, no header sent.
  EXPECT_NO_THROW(make_provider(c));

  auto bad = [](const char* text) {
    try {
      parse_provider_config(nlohmann::json::parse(text));
    } catch (const kopt::config_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(bad(R"({"provider": "gpt"})").find("expected openai"), std::string::npos);
  EXPECT_NE(bad(R"({"provider": "openai"})").find("llm.model is required"), std::string::npos);
  EXPECT_NE(bad(R"({"provider": "openai", "model": "m", "api_key": "sk-x"})").find("api_key_env"),
            std::string::npos);
  EXPECT_NE(bad(R"({"provider": "openai", "model": "m", "timeouts": {"stal_s": 1}})")
                .find("llm.timeouts.stal_s"),
            std::string::npos);
  EXPECT_NE(bad(R"({"provider": "command", "command": "claude -p"})").find("list of strings"),
            std::string::npos);

  provider_config a;
  a.kind = "anthropic";
  a.model = "claude";
  EXPECT_EQ(endpoint_url(a), "https://api.anthropic.com/v1/messages");
  ::unsetenv("ANTHROPIC_API_KEY");
  EXPECT_THROW(make_provider(a), kopt::config_error);  // vendor URL needs a key
}
