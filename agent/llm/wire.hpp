// The HTTP wire formats kopt speaks: OpenAI Chat Completions (which vLLM,
// llama.cpp server, Ollama, Gemini's OpenAI endpoint and most gateways also
// serve), OpenAI Responses (`POST /v1/responses`, what OpenAI's reasoning
// models are built around) and Anthropic Messages (with extended thinking
// and prompt-cache breakpoints). Request bodies are built here; responses,
// stream events and error bodies are parsed here. Parsers take untrusted bytes from the network
// and never throw: anything unexpected becomes a message in the result
// (these functions are fuzzed, see tests/fuzz/).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "llm/sse.hpp"
#include "llm/types.hpp"

namespace kopt::llm {

struct parsed_answer {
  std::string text;
  std::vector<std::string> texts;  // every choice of an n > 1 answer (text is texts[0])
  std::string reasoning;
  std::string stop_reason;
  std::string model;
  usage tokens;
};

// An error as the API describes it in a JSON body or an `error` stream event.
struct api_error {
  std::string type;  // invalid_request_error, rate_limit_error, overloaded_error, ...
  std::string code;  // OpenAI's code: insufficient_quota, context_length_exceeded, ...
  std::string message;
  bool empty() const noexcept { return type.empty() && code.empty() && message.empty(); }
};

struct parse_result {
  bool ok = false;
  parsed_answer answer;
  api_error error;      // set when the body is an error object
  std::string problem;  // why the body could not be read (malformed JSON, missing field)
};

// What the OpenAI formats send besides the prompt (from provider_config).
struct openai_options {
  // "max_tokens" or "max_completion_tokens" (Chat Completions only; the
  // Responses API always says max_output_tokens).
  std::string max_tokens_field = "max_tokens";
  std::string reasoning_effort;  // empty: not sent
  bool send_temperature = true;  // reasoning models refuse a temperature
  // Merged last (RFC 7386 merge patch), for gateway- and vendor-specific
  // fields; config parsing refuses the fields kopt itself must control.
  nlohmann::json extra_body = nlohmann::json::object();
};

struct anthropic_options {
  std::int64_t thinking_budget_tokens = 0;  // 0: no extended thinking
  bool prompt_cache = false;                // cache_control breakpoints on the stable prefix
  std::string cache_ttl;                    // empty: the API's default (5 minutes); or "1h"
  nlohmann::json extra_body = nlohmann::json::object();
};

// OpenAI's reasoning models (o1, o3, o4-mini, gpt-5, ...): they take
// max_completion_tokens, not max_tokens, and refuse a temperature.
bool is_openai_reasoning_model(std::string_view model) noexcept;

nlohmann::json openai_request_body(const request& r, const std::string& model, bool stream,
                                   const openai_options& o = {});
nlohmann::json responses_request_body(const request& r, const std::string& model, bool stream,
                                      const openai_options& o = {});
// Breakpoints: one on the system prompt, then the last user message's
// cache_breaks (the latest three, the API allows four in all).
nlohmann::json anthropic_request_body(const request& r, const std::string& model, bool stream,
                                      const anthropic_options& o = {});

parse_result parse_openai_response(std::string_view body);
parse_result parse_responses_response(std::string_view body);
parse_result parse_anthropic_response(std::string_view body);
// Reads an error body of either API; empty when the body is not one.
api_error parse_api_error(std::string_view body);

// Folds stream events into an answer. `done()` once the terminal event came
// ([DONE] or message_stop); `failed()` once the stream carried an error.
class stream_accumulator {
 public:
  virtual ~stream_accumulator() = default;
  virtual void on_event(const sse_event& e) = 0;
  bool done() const noexcept { return done_; }
  bool failed() const noexcept { return !error_.empty() || !problem_.empty(); }
  const parsed_answer& answer() const noexcept { return answer_; }
  const api_error& error() const noexcept { return error_; }
  const std::string& problem() const noexcept { return problem_; }
  bool usage_seen() const noexcept { return usage_seen_; }

 protected:
  parsed_answer answer_;
  api_error error_;
  std::string problem_;
  bool done_ = false;
  bool usage_seen_ = false;
};

// Chat Completions chunks; with n > 1 the deltas of each choice index are
// kept apart (answer().texts).
class openai_stream_accumulator final : public stream_accumulator {
 public:
  void on_event(const sse_event& e) override;
};

// Responses API semantic events (response.output_text.delta, ...,
// response.completed | response.incomplete | response.failed); there is no
// [DONE] line.
class responses_stream_accumulator final : public stream_accumulator {
 public:
  void on_event(const sse_event& e) override;
};

class anthropic_stream_accumulator final : public stream_accumulator {
 public:
  void on_event(const sse_event& e) override;
};

}  // namespace kopt::llm
