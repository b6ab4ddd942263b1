#include "daemon/logging.hpp"

#include <fmt/format.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace kopt::daemon {

namespace {

std::string iso_time(spdlog::log_clock::time_point tp) {
  using namespace std::chrono;
  const auto ms = duration_cast<milliseconds>(tp.time_since_epoch()).count();
  const std::time_t s = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
}

const char* level_name(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warning";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "info";
  }
}

// syslog priorities as sd-daemon.h's SD_* prefixes.
int syslog_priority(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return 7;
    case spdlog::level::info:
      return 6;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::err:
      return 3;
    case spdlog::level::critical:
      return 2;
    default:
      return 6;
  }
}

class json_formatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::json j = {{"ts", iso_time(msg.time)},
                        {"level", level_name(msg.level)},
                        {"logger", std::string(msg.logger_name.data(), msg.logger_name.size())},
                        {"msg", std::string(msg.payload.data(), msg.payload.size())},
                        {"thread", msg.thread_id}};
    // replace: a message with invalid UTF-8 (a compiler log, a worker's
    // stderr) still gives one valid JSON line.
    const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(line.data(), line.data() + line.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<json_formatter>();
  }
};

class text_formatter final : public spdlog::formatter {
 public:
  explicit text_formatter(bool journald) : journald_(journald) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string payload(msg.payload.data(), msg.payload.size());
    // One record per line: a message with newlines would otherwise become
    // several journal entries with the wrong priority.
    for (auto& c : payload)
      if (c == '\n' || c == '\r') c = ' ';
    const std::string line = journald_ ? fmt::format("<{}>{}: {}\n", syslog_priority(msg.level),
                                                     level_name(msg.level), payload)
                                       : fmt::format("{} kopt {}: {}\n", iso_time(msg.time),
                                                     level_name(msg.level), payload);
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<text_formatter>(journald_);
  }

 private:
  bool journald_;
};

}  // namespace

std::unique_ptr<spdlog::formatter> make_json_formatter() {
  return std::make_unique<json_formatter>();
}
std::unique_ptr<spdlog::formatter> make_text_formatter(bool journald) {
  return std::make_unique<text_formatter>(journald);
}

void configure_logging(const std::string& format, const std::string& level) {
  const auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    throw kopt::config_error("unknown log level " + level);
  if (format == "json") {
    spdlog::set_formatter(make_json_formatter());
  } else if (format == "text") {
    const char* js = std::getenv("JOURNAL_STREAM");
    spdlog::set_formatter(make_text_formatter(js != nullptr && js[0] != '\0'));
  } else {
    throw kopt::config_error("unknown log format " + format + " (text or json)");
  }
  spdlog::set_level(lvl);
  spdlog::flush_on(spdlog::level::trace);  // a killed daemon loses no line
}

}  // namespace kopt::daemon
