#include "config/detail/context.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace kopt::config::detail {

jpath jpath::operator/(std::string_view key) const {
  return {ptr + "/" + pointer_token(key),
          display.empty() ? std::string(key) : display + "." + std::string(key)};
}

jpath jpath::operator[](std::size_t index) const {
  return {ptr + "/" + std::to_string(index), display + "[" + std::to_string(index) + "]"};
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::numeric_limits<std::size_t>::max();
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  if (best.empty()) return {};
  const std::size_t longest = std::max(word.size(), best.size());
  const std::size_t limit = std::clamp<std::size_t>(longest / 3, 1, 3);
  if (best_d == 0 || best_d > limit || best_d >= longest) return {};
  return "; did you mean " + quote(best) + "?";
}

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string json_type_name(const json& j) {
  switch (j.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::null: return "null";
    case json::value_t::number_float: return "a number";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    default: return "an invalid value";
  }
}

void context::place(diagnostic& d, const jpath& p, bool at_key) const {
  d.file = file_;
  d.path = p.display;
  if (!loc_) return;
  // A missing member has no position: fall back to the closest ancestor.
  std::string ptr = p.ptr;
  for (;;) {
    if (const located_value* lv = loc_->find(ptr)) {
      const text_position& tp = (at_key && ptr == p.ptr && lv->key.line > 0) ? lv->key : lv->value;
      d.line = tp.line;
      d.column = tp.column;
      return;
    }
    if (ptr.empty()) return;
    ptr.erase(ptr.rfind('/'));
  }
}

void context::error(const jpath& p, std::string message, bool at_key) {
  diagnostic d;
  d.level = diagnostic::severity::error;
  d.message = std::move(message);
  place(d, p, at_key);
  diags_.push_back(std::move(d));
  ++errors_;
}

void context::warning(const jpath& p, std::string message, bool at_key) {
  diagnostic d;
  d.level = diagnostic::severity::warning;
  d.message = std::move(message);
  place(d, p, at_key);
  diags_.push_back(std::move(d));
}

void context::expr_problem(const jpath& p, const expr::expr_error& e, const std::string& text,
                           const std::string& prefix) {
  diagnostic d;
  d.level = diagnostic::severity::error;
  d.message = prefix + "expression " + quote(text) + ": " + e.reason();
  if (e.column() > 0) d.message += " (column " + std::to_string(e.column()) + ")";
  place(d, p, false);
  if (loc_ && e.column() > 0) {
    const located_value* lv = loc_->find(p.ptr);
    if (lv && lv->plain_string && e.column() <= text.size() + 1)
      d.column = lv->value.column + static_cast<int>(e.column());
  }
  diags_.push_back(std::move(d));
  ++errors_;
}

namespace {

// `workload "ID": rest` -> (ID, rest); nullopt for other messages.
std::optional<std::pair<std::string, std::string>> split_workload(const std::string& m) {
  static const std::string head = "workload \"";
  if (m.rfind(head, 0) != 0) return std::nullopt;
  const auto end = m.find("\": ", head.size());
  if (end == std::string::npos) return std::nullopt;
  return std::make_pair(m.substr(head.size(), end - head.size()), m.substr(end + 3));
}

// The message with its numbers blanked: the same mistake with another
// workload's values.
std::string shape_of(const std::string& m) {
  std::string out;
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m[i] >= '0' && m[i] <= '9') {
      if (!out.empty() && out.back() == '-') out.pop_back();  // -990 and 0 alike
      if (out.empty() || out.back() != '#') out += '#';
    } else {
      out += m[i];
    }
  }
  return out;
}

// One mistake in a launch plan is checked once per workload: eight
// workloads gave eight copies of it (25 lines for 3 mistakes). Merges the
// per-workload copies of one problem (same place, same message up to the
// numbers) into one diagnostic that names the workloads it affects.
std::vector<diagnostic> merge_per_workload(std::vector<diagnostic> in) {
  std::vector<diagnostic> out;
  std::map<std::string, std::size_t> first;  // key -> index in out
  std::map<std::size_t, std::vector<std::string>> ids;
  std::map<std::size_t, bool> same_text;
  for (auto& d : in) {
    const auto split = split_workload(d.message);
    if (!split) {
      out.push_back(std::move(d));
      continue;
    }
    const std::string key = std::to_string(static_cast<int>(d.level)) + "\n" + d.file + "\n" +
                            std::to_string(d.line) + ":" + std::to_string(d.column) + "\n" +
                            d.path + "\n" + shape_of(split->second);
    const auto it = first.find(key);
    if (it == first.end()) {
      first.emplace(key, out.size());
      ids[out.size()].push_back(split->first);
      same_text[out.size()] = true;
      d.message = split->second;  // the prefix is rebuilt below
      out.push_back(std::move(d));
      continue;
    }
    ids[it->second].push_back(split->first);
    if (split->second != out[it->second].message) same_text[it->second] = false;
  }
  for (auto& [i, list] : ids) {
    diagnostic& d = out[i];
    d.message = "workload " + quote(list[0]) + ": " + d.message;
    if (list.size() == 1) continue;
    std::string others;
    for (std::size_t k = 1; k < list.size(); ++k) others += (k > 1 ? ", " : "") + quote(list[k]);
    d.message += " (also in " + std::string(list.size() == 2 ? "workload " : "workloads ") + others +
                 (same_text[i] ? ")" : ", with their own values)");
  }
  return out;
}

}  // namespace

std::vector<diagnostic> context::take() {
  diags_ = merge_per_workload(std::move(diags_));
  std::stable_sort(diags_.begin(), diags_.end(), [](const diagnostic& a, const diagnostic& b) {
    if (a.line != b.line) return a.line < b.line;
    return a.column < b.column;
  });
  return std::move(diags_);
}

object_reader::object_reader(context& ctx, const json& j, jpath p, std::vector<std::string> allowed)
    : ctx_(ctx), path_(std::move(p)) {
  if (!j.is_object()) {
    ctx_.error(path_, "expected an object, got " + json_type_name(j));
    return;
  }
  obj_ = &j;
  init(std::move(allowed));
}

object_reader::object_reader(context& ctx, const json& j, jpath p,
                             std::initializer_list<const char*> allowed)
    : object_reader(ctx, j, std::move(p), std::vector<std::string>(allowed.begin(), allowed.end())) {}

void object_reader::init(std::vector<std::string> allowed) {
  for (const auto& [key, value] : obj_->items()) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string msg = "unknown field " + quote(key) + did_you_mean(key, allowed);
    if (msg.find("did you mean") == std::string::npos) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      msg += " (allowed: " + list + ")";
    }
    ctx_.error(path_ / key, std::move(msg), true);
  }
}

bool object_reader::has(std::string_view key) const { return get(key) != nullptr; }

const json* object_reader::get(std::string_view key) const {
  if (!obj_) return nullptr;
  auto it = obj_->find(key);
  return it == obj_->end() ? nullptr : &*it;
}

const json* object_reader::require(std::string_view key) const {
  const json* v = get(key);
  if (!v && obj_) ctx_.error(path_, "missing required field " + quote(key));
  return v;
}

std::optional<std::string> object_reader::string(std::string_view key, bool required) const {
  const json* v = required ? require(key) : get(key);
  if (!v) return std::nullopt;
  return as_string(ctx_, *v, path(key));
}

std::optional<double> object_reader::number(std::string_view key, bool required) const {
  const json* v = required ? require(key) : get(key);
  if (!v) return std::nullopt;
  return as_number(ctx_, *v, path(key));
}

std::optional<std::int64_t> object_reader::integer(std::string_view key, bool required) const {
  const json* v = required ? require(key) : get(key);
  if (!v) return std::nullopt;
  return as_integer(ctx_, *v, path(key));
}

std::optional<bool> object_reader::boolean(std::string_view key, bool required) const {
  const json* v = required ? require(key) : get(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    ctx_.error(path(key), "expected true or false, got " + json_type_name(*v));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> as_string(context& ctx, const json& j, const jpath& p) {
  if (!j.is_string()) {
    ctx.error(p, "expected a string, got " + json_type_name(j));
    return std::nullopt;
  }
  return j.get<std::string>();
}

std::optional<double> as_number(context& ctx, const json& j, const jpath& p) {
  if (!j.is_number()) {
    ctx.error(p, "expected a number, got " + json_type_name(j));
    return std::nullopt;
  }
  const double v = j.get<double>();
  if (!std::isfinite(v)) {
    ctx.error(p, "number out of range");
    return std::nullopt;
  }
  return v;
}

std::optional<std::int64_t> as_integer(context& ctx, const json& j, const jpath& p) {
  if (j.is_number_integer() && !j.is_number_unsigned()) return j.get<std::int64_t>();
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      ctx.error(p, "integer does not fit in int64");
      return std::nullopt;
    }
    return static_cast<std::int64_t>(u);
  }
  if (j.is_number_float()) {
    const double d = j.get<double>();
    // 1e6 is a float in JSON; accept it when it is exactly an integer.
    if (std::isfinite(d) && std::trunc(d) == d && std::fabs(d) < 9.0e18)
      return static_cast<std::int64_t>(d);
    ctx.error(p, "expected an integer, got " + j.dump());
    return std::nullopt;
  }
  ctx.error(p, "expected an integer, got " + json_type_name(j));
  return std::nullopt;
}

std::optional<std::string> as_expression(context& ctx, const json& j, const jpath& p) {
  std::string text;
  if (j.is_number_integer()) {
    auto v = as_integer(ctx, j, p);
    if (!v) return std::nullopt;
    text = std::to_string(*v);
  } else if (j.is_string()) {
    text = j.get<std::string>();
  } else {
    ctx.error(p, "expected an expression (a string such as \"ceil_div(n, 256)\" or an integer), got " +
                     json_type_name(j));
    return std::nullopt;
  }
  try {
    (void)expr::expression::parse(text);
  } catch (const expr::expr_error& e) {
    ctx.expr_problem(p, e, text);
    return std::nullopt;
  }
  return text;
}

bool check_expression_names(context& ctx, const jpath& p, const std::string& text,
                            const std::vector<std::string>& known, const std::string& what) {
  expr::expression e = expr::expression::parse(text);
  bool ok = true;
  for (const auto& name : e.names()) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    ok = false;
    if (ctx.is_broken(name)) continue;
    std::string msg = "unknown " + what + " " + quote(name);
    if (text != name) msg += " in expression " + quote(text);
    msg += did_you_mean(name, known);
    ctx.error(p, std::move(msg));
  }
  return ok;
}

}  // namespace kopt::config::detail
