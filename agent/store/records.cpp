#include "store/records.hpp"

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace kopt::store {

namespace {

template <typename E, std::size_t N>
std::optional<E> parse_enum(const std::array<std::string_view, N>& names, std::string_view s) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == s) return static_cast<E>(i);
  }
  return std::nullopt;
}

constexpr std::array<std::string_view, 6> state_names{"queued", "running", "paused",
                                                      "done",   "failed",  "cancelled"};
constexpr std::array<std::string_view, 5> origin_names{"reference", "baseline", "seed", "llm",
                                                       "tuned"};
constexpr std::array<std::string_view, 11> status_names{"ok",
                                                        "compile_error",
                                                        "incorrect",
                                                        "crashed",
                                                        "timeout",
                                                        "rejected_integrity",
                                                        "launch_error",
                                                        "skipped",
                                                        "compile_timeout",
                                                        "rejected_format",
                                                        "reference_failed"};

}  // namespace

std::int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string format_time(std::int64_t unix_ms) {
  std::int64_t secs = unix_ms / 1000;
  std::int64_t millis = unix_ms % 1000;
  if (millis < 0) {
    millis += 1000;
    secs -= 1;
  }
  const auto t = static_cast<std::time_t>(secs);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return std::to_string(unix_ms);
  char buf[40];
  const int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                              tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                              tm.tm_sec, static_cast<int>(millis));
  if (n <= 0) return std::to_string(unix_ms);
  return std::string(buf, static_cast<std::size_t>(n));
}

std::string_view to_string(campaign_state s) noexcept {
  return state_names[static_cast<std::size_t>(s)];
}
std::optional<campaign_state> parse_campaign_state(std::string_view s) noexcept {
  return parse_enum<campaign_state>(state_names, s);
}
const std::vector<std::string_view>& campaign_state_names() noexcept {
  static const std::vector<std::string_view> names(state_names.begin(), state_names.end());
  return names;
}
bool is_terminal(campaign_state s) noexcept {
  return s == campaign_state::done || s == campaign_state::failed || s == campaign_state::cancelled;
}

std::string_view to_string(candidate_origin o) noexcept {
  return origin_names[static_cast<std::size_t>(o)];
}
std::optional<candidate_origin> parse_candidate_origin(std::string_view s) noexcept {
  return parse_enum<candidate_origin>(origin_names, s);
}

std::string_view to_string(eval_status s) noexcept {
  return status_names[static_cast<std::size_t>(s)];
}
std::optional<eval_status> parse_eval_status(std::string_view s) noexcept {
  return parse_enum<eval_status>(status_names, s);
}
const std::vector<std::string_view>& eval_status_names() noexcept {
  static const std::vector<std::string_view> names(status_names.begin(), status_names.end());
  return names;
}

}  // namespace kopt::store
