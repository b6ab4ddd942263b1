// Providers: one interface over every way kopt gets an answer. `openai`
// (Chat Completions at any base URL: OpenAI, vLLM, llama.cpp server, Ollama,
// Gemini's OpenAI-compatible endpoint, gateways; or OpenAI's Responses API), `anthropic` (Messages
// API), `command` (an agent CLI fed the prompt on stdin, no shell), `replay` (a recorded JSONL
// transcript) and `autotune` (no model at all; the default, so kopt runs without a key). A provider
// makes one logical call, with its own retries for the network ones; budget, concurrency, cost and
// recording are the client's (client.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "llm/accounting.hpp"
#include "llm/clock.hpp"
#include "llm/http.hpp"
#include "llm/retry.hpp"
#include "llm/secrets.hpp"
#include "llm/types.hpp"
#include "llm/wire.hpp"

namespace kopt::llm {

// The "llm" section of a campaign or daemon config (docs/providers.md).
struct provider_config {
  std::string kind = "autotune";  // openai | anthropic | command | replay | autotune
  std::string model;
  std::string base_url;      // empty: the vendor's
  std::string api_key_env;   // name of the variable holding the key
  std::string api_key_file;  // or a file readable only by its owner
  std::string anthropic_version = "2023-06-01";
  bool stream = false;
  std::int64_t max_tokens = 8192;
  std::optional<double> temperature;
  // openai: which API (chat: /chat/completions; responses: /responses).
  std::string api = "chat";
  // openai chat: auto sends max_completion_tokens to reasoning models (and
  // whenever reasoning_effort is set), max_tokens to the others.
  std::string max_tokens_field = "auto";  // auto | max_tokens | max_completion_tokens
  std::string reasoning_effort;           // none | minimal | low | medium | high | xhigh
  nlohmann::json extra_body = nlohmann::json::object();  // merged into every request body
  int n = 1;  // openai chat: answers per call (the server must support `n`)
  // anthropic
  std::int64_t thinking_budget_tokens = 0;  // > 0: extended thinking with this budget
  bool prompt_cache = true;                 // cache_control breakpoints on the stable prefix
  std::string cache_ttl;                    // "" (5 minutes) or "1h"
  http_timeouts timeouts;
  retry_policy retry;
  std::size_t max_response_bytes = 8u << 20;
  std::string ca_bundle;
  int max_concurrency = 4;
  rate_limits rate;
  price_table prices;
  // command
  std::vector<std::string> command;
  std::chrono::milliseconds command_timeout{900'000};
  std::size_t max_output_bytes = 4u << 20;
  // replay
  std::filesystem::path transcript;
};

// Parses and checks the section; throws kopt::config_error naming the field.
// Relative paths are resolved against `base_dir`.
provider_config parse_provider_config(const nlohmann::json& j,
                                      const std::filesystem::path& base_dir = {});

class provider {
 public:
  virtual ~provider() = default;
  const std::string& name() const noexcept { return name_; }
  const std::string& model() const noexcept { return model_; }
  virtual capabilities caps() const = 0;
  // One logical call; never throws for what the remote side does.
  virtual completion complete(const request& r) = 0;
  // Secrets this provider holds, for redaction and environment scrubbing.
  virtual std::vector<std::string> secrets() const { return {}; }
  // The most output tokens one call may bill (the budget's worst case):
  // more than max_tokens with n answers or a thinking budget.
  virtual std::int64_t worst_case_output_tokens(const request& r) const { return r.max_tokens; }
  // How many answers one call gives when the request leaves n at 0.
  virtual int answers_per_call() const { return 1; }

 protected:
  provider(std::string name, std::string model)
      : name_(std::move(name)), model_(std::move(model)) {}

 private:
  std::string name_;
  std::string model_;
};

// What network providers share: the retry loop, timeouts, rate limits and
// redaction. Subclasses say how to build the request and read the answer.
class http_provider : public provider {
 public:
  capabilities caps() const override;
  completion complete(const request& r) override;
  std::vector<std::string> secrets() const override;
  const std::string& endpoint() const noexcept { return endpoint_; }

 protected:
  http_provider(std::string name, const provider_config& cfg, std::string endpoint, std::string key,
                http_transport& transport, time_source& time);
  virtual std::vector<std::string> headers() const = 0;
  virtual nlohmann::json body(const request& r) const = 0;
  virtual parse_result parse(std::string_view body) const = 0;
  virtual std::unique_ptr<stream_accumulator> make_accumulator() const = 0;
  const provider_config& config() const noexcept { return cfg_; }
  const std::string& key() const noexcept { return key_; }

 private:
  provider_config cfg_;
  std::string endpoint_;
  std::string key_;
  http_transport& transport_;
  time_source& time_;
  rate_limiter limiter_;
  redactor redact_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_{std::random_device{}()};
};

class openai_provider final : public http_provider {
 public:
  openai_provider(const provider_config& cfg, std::string key, http_transport& transport,
                  time_source& time);
  // What this config sends besides the prompt (max_tokens field resolved).
  static openai_options options_for(const provider_config& cfg);
  std::int64_t worst_case_output_tokens(const request& r) const override;
  int answers_per_call() const override;

 protected:
  std::vector<std::string> headers() const override;
  nlohmann::json body(const request& r) const override;
  parse_result parse(std::string_view body) const override;
  std::unique_ptr<stream_accumulator> make_accumulator() const override;
};

class anthropic_provider final : public http_provider {
 public:
  anthropic_provider(const provider_config& cfg, std::string key, http_transport& transport,
                     time_source& time);
  static anthropic_options options_for(const provider_config& cfg);
  std::int64_t worst_case_output_tokens(const request& r) const override;

 protected:
  std::vector<std::string> headers() const override;
  nlohmann::json body(const request& r) const override;
  parse_result parse(std::string_view body) const override;
  std::unique_ptr<stream_accumulator> make_accumulator() const override;
};

// Runs argv (no shell), writes the prompt to its stdin, takes stdout as the
// answer. Killed (with its process group) past the time or output limit.
class command_provider final : public provider {
 public:
  explicit command_provider(const provider_config& cfg);
  capabilities caps() const override { return {true, false, false, false, false}; }
  completion complete(const request& r) override;

 private:
  provider_config cfg_;
};

// Answers from a transcript: JSON lines with "response" and optionally
// "prompt_sha256" (answer only that prompt), "usage", "status",
// "stop_reason". Lines with a hash are matched by prompt; the others are
// served in order. jsonl_recorder writes this format.
class replay_provider final : public provider {
 public:
  explicit replay_provider(const provider_config& cfg);  // throws kopt::config_error
  capabilities caps() const override { return {true, false, false, true, true}; }
  completion complete(const request& r) override;

 private:
  std::mutex mu_;
  std::map<std::string, std::vector<nlohmann::json>> by_prompt_;
  std::map<std::string, std::size_t> next_by_prompt_;
  std::vector<nlohmann::json> in_order_;
  std::size_t next_ = 0;
};

class autotune_provider final : public provider {
 public:
  autotune_provider() : provider("autotune", "") {}
  capabilities caps() const override { return {false, false, false, false, true}; }
  completion complete(const request&) override;
};

// Builds the configured provider; reads the API key (throws
// kopt::config_error if it is missing or unsafe). `transport` and `time`
// must outlive the provider; defaults are process-wide.
std::unique_ptr<provider> make_provider(const provider_config& cfg,
                                        http_transport* transport = nullptr,
                                        time_source* time = nullptr);

// The URL a config posts to (base URL plus the API's path).
std::string endpoint_url(const provider_config& cfg);

// Rough token count for accounting when an API reports none (4 bytes a token).
std::int64_t estimate_tokens(std::size_t bytes) noexcept;
// Upper bound of a request's input tokens (a token is at least one byte).
std::int64_t worst_case_prompt_tokens(const request& r) noexcept;

}  // namespace kopt::llm
