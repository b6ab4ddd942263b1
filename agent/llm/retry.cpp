#include "llm/retry.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>

namespace kopt::llm {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

const std::string* header(const header_map& h, const char* name) {
  const auto it = h.find(name);
  return it == h.end() ? nullptr : &it->second;
}

// Non-negative decimal number of seconds or milliseconds, as the SDKs accept.
std::optional<double> parse_number(const std::string& s) {
  const std::string t = trimmed(s);
  if (t.empty() || t.size() > 32) return std::nullopt;
  double v = 0;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc{} || p != t.data() + t.size() || !std::isfinite(v) || v < 0)
    return std::nullopt;
  return v;
}

bool mentions(const std::string& text, std::initializer_list<const char*> needles) {
  const std::string l = lower(text);
  return std::any_of(needles.begin(), needles.end(),
                     [&](const char* n) { return l.find(n) != std::string::npos; });
}

bool is_context_overflow(const api_error& e) {
  return e.code == "context_length_exceeded" || e.type == "request_too_large" ||
         mentions(e.message, {"maximum context length", "prompt is too long", "context window",
                              "too many tokens", "context_length_exceeded"});
}

}  // namespace

bool is_quota_error(const api_error& e) {
  return e.code == "insufficient_quota" || e.type == "insufficient_quota" ||
         e.code == "billing_hard_limit_reached" || e.type == "billing_error" ||
         mentions(e.message, {"exceeded your current quota", "credit balance", "spend limit",
                              "spending limit", "usage limit", "billing"});
}

failure_kind classify_http_failure(int status, const header_map& headers, const api_error& err) {
  // Money first: no header and no status makes an exhausted quota worth
  // another call.
  if (is_quota_error(err)) return failure_kind::fatal;
  if (const std::string* s = header(headers, "x-should-retry")) {
    const std::string v = lower(trimmed(*s));
    if (v == "true") return failure_kind::retryable;
    if (v == "false") {
      if (status == 401 || status == 403 || status == 404) return failure_kind::fatal;
      return is_context_overflow(err) ? failure_kind::invalid_request : failure_kind::give_up;
    }
  }
  if (status == 408 || status == 409 || status == 429 || status >= 500)
    return failure_kind::retryable;
  if (status == 413 || ((status == 400 || status == 422) && is_context_overflow(err))) {
    return failure_kind::invalid_request;
  }
  return failure_kind::fatal;
}

failure_kind classify_stream_error(const api_error& err) {
  if (is_quota_error(err)) return failure_kind::fatal;
  if (err.type == "overloaded_error" || err.type == "api_error" || err.type == "rate_limit_error" ||
      err.type == "server_error" || err.type == "timeout_error" || err.type.empty()) {
    return failure_kind::retryable;
  }
  if (err.type == "authentication_error" || err.type == "permission_error" ||
      err.type == "not_found_error") {
    return failure_kind::fatal;
  }
  if (is_context_overflow(err)) return failure_kind::invalid_request;
  return failure_kind::give_up;
}

std::optional<std::chrono::system_clock::time_point> parse_http_date(const std::string& s) {
  static constexpr const char* formats[] = {"%a, %d %b %Y %H:%M:%S GMT",
                                            "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"};
  const std::string t = trimmed(s);
  for (const char* f : formats) {
    std::tm tm{};
    const char* end = strptime(t.c_str(), f, &tm);
    if (end != nullptr && *end == '\0') {
      const std::time_t secs = timegm(&tm);
      if (secs == static_cast<std::time_t>(-1)) return std::nullopt;
      return std::chrono::system_clock::from_time_t(secs);
    }
  }
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> server_retry_delay(
    const header_map& headers, std::chrono::system_clock::time_point now) {
  using std::chrono::milliseconds;
  if (const std::string* ms = header(headers, "retry-after-ms")) {
    if (const auto v = parse_number(*ms); v && *v < 1e12)
      return milliseconds{static_cast<std::int64_t>(std::ceil(*v))};
  }
  if (const std::string* ra = header(headers, "retry-after")) {
    if (const auto v = parse_number(*ra); v && *v < 1e9) {
      return milliseconds{static_cast<std::int64_t>(std::ceil(*v * 1000.0))};
    }
    if (const auto when = parse_http_date(*ra)) {
      const auto d = std::chrono::duration_cast<milliseconds>(*when - now);
      return std::max(d, milliseconds{0});
    }
  }
  return std::nullopt;
}

std::chrono::milliseconds backoff_delay(const retry_policy& p, int retry, double unit) {
  const int exponent = std::clamp(retry - 1, 0, 30);
  const double base = static_cast<double>(p.initial_delay.count()) * std::ldexp(1.0, exponent);
  const double capped = std::min(base, static_cast<double>(p.max_delay.count()));
  const double factor = 1.0 - p.jitter * std::clamp(unit, 0.0, 1.0);
  return std::chrono::milliseconds{static_cast<std::int64_t>(capped * factor)};
}

std::chrono::milliseconds retry_delay(const retry_policy& p, int retry, double unit,
                                      const header_map& headers,
                                      std::chrono::system_clock::time_point now) {
  if (const auto d = server_retry_delay(headers, now)) return std::min(*d, p.max_retry_after);
  return backoff_delay(p, retry, unit);
}

}  // namespace kopt::llm
