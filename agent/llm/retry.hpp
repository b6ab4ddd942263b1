// When to retry an LLM call and how long to wait, following the official
// OpenAI and Anthropic SDKs: retry 408, 409, 429, 5xx (Anthropic's 529
// "overloaded" included) and network failures; let the server decide with
// `x-should-retry`; wait what `retry-after-ms` or `retry-after` (seconds or
// an HTTP date) says, else back off exponentially with jitter up to a cap.
// Errors that retrying cannot fix are never retried: bad requests, bad keys,
// unknown models, and above all exhausted quota or a spend limit (a 429 that
// the SDK-style "retry all 429s" would turn into a night of futile calls).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "llm/wire.hpp"

namespace kopt::llm {

struct retry_policy {
  int max_attempts = 5;  // first try included
  std::chrono::milliseconds initial_delay{500};
  std::chrono::milliseconds max_delay{30'000};
  // A server's Retry-After is honoured up to this; longer waits are clamped
  // to it (the attempt after may fail again and count as one more try).
  std::chrono::milliseconds max_retry_after{120'000};
  double jitter = 0.25;  // the delay is scaled by a factor in (1 - jitter, 1]
};

enum class failure_kind {
  retryable,        // may pass: retry if attempts remain
  invalid_request,  // this request is wrong (prompt too long): fail the call, keep using the LLM
  give_up,          // the server said not to retry (x-should-retry: false): fail this call only
  fatal,            // credentials, model, quota, spend limit: stop all LLM use of the campaign
};

using header_map = std::map<std::string, std::string>;  // lower-case names

// Classifies an HTTP error response (status >= 300, or 200 whose body is an
// error). `err` is the parsed error body (may be empty).
failure_kind classify_http_failure(int status, const header_map& headers, const api_error& err);
// Classifies an error event received inside a 200 stream.
failure_kind classify_stream_error(const api_error& err);
// True for OpenAI's insufficient_quota and Anthropic's spend/credit limits.
bool is_quota_error(const api_error& err);

// The server's requested delay, if any and if parsable: retry-after-ms,
// then retry-after as seconds (may be fractional) or as an HTTP date.
std::optional<std::chrono::milliseconds> server_retry_delay(
    const header_map& headers, std::chrono::system_clock::time_point now);

// Backoff before retry number `retry` (1 for the first retry); `unit` in
// [0, 1) picks the jitter so that tests can fix it.
std::chrono::milliseconds backoff_delay(const retry_policy& p, int retry, double unit);

// The delay to use: the server's, clamped to max_retry_after, else backoff.
std::chrono::milliseconds retry_delay(const retry_policy& p, int retry, double unit,
                                      const header_map& headers,
                                      std::chrono::system_clock::time_point now);

// Parses an IMF-fixdate / RFC 850 / asctime HTTP date.
std::optional<std::chrono::system_clock::time_point> parse_http_date(const std::string& s);

}  // namespace kopt::llm
