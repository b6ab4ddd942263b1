// The two HTTP wire formats kopt speaks: OpenAI Chat Completions (which
// vLLM, llama.cpp server, Ollama and most gateways also serve) and Anthropic
// Messages. Request bodies are built here; responses, stream events and
// error bodies are parsed here. Parsers take untrusted bytes from the network
// and never throw: anything unexpected becomes a message in the result
// (these functions are fuzzed, see tests/fuzz/).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "llm/sse.hpp"
#include "llm/types.hpp"

namespace kopt::llm {

struct parsed_answer {
  std::string text;
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

nlohmann::json openai_request_body(const request& r, const std::string& model, bool stream);
nlohmann::json anthropic_request_body(const request& r, const std::string& model, bool stream);

parse_result parse_openai_response(std::string_view body);
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

class openai_stream_accumulator final : public stream_accumulator {
 public:
  void on_event(const sse_event& e) override;
};

class anthropic_stream_accumulator final : public stream_accumulator {
 public:
  void on_event(const sse_event& e) override;
};

}  // namespace kopt::llm
