// Output helpers shared by command groups: store records as JSON (the
// `--json` form of every read command; timestamps as ISO-8601 UTC strings)
// and a plain aligned text table for humans. Data goes to stdout, messages
// to stderr; these helpers only build the data.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "store/records.hpp"

namespace kopt::cli {

nlohmann::json to_json(const store::campaign_record& c);
nlohmann::json to_json(const store::workload_record& w);
nlohmann::json to_json(const store::operator_record& op, bool with_config);
nlohmann::json to_json(const store::candidate_record& c, bool with_source);
nlohmann::json to_json(const store::compilation_record& c);
nlohmann::json to_json(const store::evaluation_record& e);
nlohmann::json to_json(const store::iteration_summary& s);
nlohmann::json to_json(const store::event_record& e);

// Pretty JSON and a newline on stdout.
void print_json(const nlohmann::json& j);

// "-" for empty optionals; fixed digits for doubles.
std::string fmt_opt(const std::optional<std::int64_t>& v);
std::string fmt_double(double v, int digits);
std::string fmt_opt(const std::optional<double>& v, int digits);
// `digits` significant digits (weights: 0.00012, not 0.000).
std::string fmt_sig(double v, int digits);
std::string fmt_time(std::int64_t unix_ms);  // 2026-11-30 21:48:20Z
std::string fmt_time(const std::optional<std::int64_t>& unix_ms);
std::string fmt_duration_ms(std::int64_t ms);         // 1h02m, 3m05s, 4.2s
std::string fmt_ns(const std::optional<double>& ns);  // 12.3 us

class text_table {
 public:
  explicit text_table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kopt::cli
