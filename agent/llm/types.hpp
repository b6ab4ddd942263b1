// The vocabulary shared by every LLM provider: what a request carries, what
// an answer carries (text, stop reason, token usage), and how a call ended.
// Providers differ on the wire (OpenAI Chat Completions, Anthropic Messages,
// an agent CLI, a recorded transcript) but hand the campaign loop the same
// `completion`, so the loop, the budget and the store never look at JSON.
// A failed call is data (`call_status` plus a message), not an exception:
// an overnight campaign must record it and go on or stop cleanly.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kopt::llm {

struct message {
  std::string role;  // "user" or "assistant"
  std::string content;
  // Byte offsets into `content` where a stable prefix ends (the prompt
  // templates' {% cache_breakpoint %}). Anthropic gets a cache_control
  // breakpoint there; APIs that cache prefixes by themselves (OpenAI) see
  // the same bytes either way. Never part of the recorded prompt.
  std::vector<std::size_t> cache_breaks = {};
};

struct request {
  std::string system;              // system prompt; may be empty
  std::vector<message> messages;   // at least one, the last from "user"
  std::int64_t max_tokens = 4096;  // output cap sent to the API
  std::optional<double> temperature;
  // Answers wanted from this one call (OpenAI Chat Completions' `n`); 0:
  // the provider's configured `n`. A provider that cannot give several
  // answers gives one (completion::texts).
  int n = 0;
  std::string tag;  // free text for the record (campaign/iteration), never sent
  // What the caller wants recorded with the call (the items it showed, its
  // dropout draw, its strategy hint, the router's arm); never sent.
  nlohmann::json meta = nlohmann::json::object();
  // The store row of the campaign iteration this call serves, carried into
  // its record so that every call is linked to its iteration; never sent.
  std::optional<std::int64_t> iteration_id;
};

// Token counts normalised across APIs. `prompt` counts every input token,
// cached ones included (OpenAI's prompt_tokens; Anthropic's input_tokens +
// cache_read + cache_creation); `completion` includes reasoning tokens.
struct usage {
  std::int64_t prompt = 0;
  std::int64_t completion = 0;
  std::int64_t cached = 0;       // input tokens read from the provider's cache
  std::int64_t cache_write = 0;  // input tokens written to the cache (Anthropic)
  std::int64_t reasoning = 0;    // part of `completion`
  bool reported = false;         // false when the API gave no usage (we estimated)

  std::int64_t total() const noexcept { return prompt + completion; }
  usage& operator+=(const usage& o) noexcept;
};

enum class call_status {
  ok,
  transient,        // gave up after retries on errors that may pass (429, 5xx, network)
  permanent,        // an error retrying cannot fix (400, 401, 403, 404, quota); stops LLM use
  invalid_request,  // this request cannot be served (prompt too long): not retried, LLM use goes on
  timeout,          // connect, stall or total time limit, after retries
  budget_exceeded,  // refused before sending: the campaign's budget is spent
  disabled,         // refused before sending: an earlier permanent error stopped LLM use
  no_llm,           // the autotune provider: there is no model to ask
  bad_response,     // the server answered 2xx with something we cannot read
};

const char* call_status_name(call_status s) noexcept;

struct completion {
  call_status status = call_status::ok;
  std::string text;                // the answer (concatenated text blocks); the first when n > 1
  std::vector<std::string> texts;  // every answer of an `n` > 1 call, `text` first; else empty
  std::string reasoning;    // reasoning/thinking text when the API returns it separately
  std::string stop_reason;  // as the API names it: stop, length, end_turn, max_tokens, ...
  std::string model;        // as the API reports it
  usage tokens;             // summed over all attempts that the provider may bill
  double cost_usd = 0;
  int http_status = 0;  // of the last attempt; 0 when no HTTP response
  int attempts = 0;
  std::chrono::milliseconds latency{0};  // wall time of the whole call, retries included
  std::string error;                     // why it failed (redacted: never holds a key)
  // The row the recorder kept for this call (llm_calls.id in the store), so
  // that what the answer produced can name the call; empty without one.
  std::optional<std::int64_t> record_id;

  bool ok() const noexcept { return status == call_status::ok; }
  // True when the answer was cut by the output cap; the loop may say so to the LLM.
  // (Responses API: status "incomplete" with reason max_output_tokens.)
  bool truncated() const noexcept {
    return stop_reason == "length" || stop_reason == "max_tokens" ||
           stop_reason == "max_output_tokens";
  }
};

// What a provider can do, so the loop and `kopt llm check` can adapt.
struct capabilities {
  bool calls_llm = true;       // false for autotune
  bool network = false;        // talks HTTP (timeouts, retries, rate limits apply)
  bool streaming = false;      // can stream the answer
  bool reports_usage = false;  // the API reports token usage
  bool deterministic = false;  // same prompt, same answer (replay)
};

}  // namespace kopt::llm
