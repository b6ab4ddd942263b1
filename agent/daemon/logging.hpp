// Log output of the daemon through spdlog, on stderr (systemd hands stderr
// to the journal). Two formats: "text" for people, one line per message,
// with a "<N>" syslog-priority prefix and no timestamp when stderr is the
// journal ($JOURNAL_STREAM), so that `journalctl -p warning` filters by
// level; and "json", one JSON object per line (ts, level, logger, msg, and
// thread) for log shippers, every string escaped by nlohmann::json (control
// characters, quotes, and invalid UTF-8 replaced, never a broken line).
#pragma once

#include <spdlog/formatter.h>

#include <memory>
#include <string>

namespace kopt::daemon {

std::unique_ptr<spdlog::formatter> make_json_formatter();
// journald: prefix "<prio>" and leave timestamps to the journal.
std::unique_ptr<spdlog::formatter> make_text_formatter(bool journald);

// Applies format and level to every registered logger ("text" | "json";
// spdlog level names). Throws kopt::config_error for an unknown value.
void configure_logging(const std::string& format, const std::string& level);

}  // namespace kopt::daemon
