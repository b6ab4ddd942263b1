#include "kb/document.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/hash.hpp"

namespace kopt::kb {

namespace {

using json = nlohmann::json;

// In this order; the first six are required, kind and config optional
// (config is required, and only allowed, with kind: reference).
const std::vector<std::string_view> front_matter_keys = {
    "id", "title", "bottlenecks", "operators", "arch", "tags", "kind", "config"};
constexpr std::size_t required_front_matter_keys = 6;

std::string join(const std::vector<std::string_view>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i != 0) out += ", ";
    out += names[i];
  }
  return out;
}

bool contains(const std::vector<std::string_view>& names, std::string_view n) noexcept {
  return std::find(names.begin(), names.end(), n) != names.end();
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])) != 0) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])) != 0) --e;
  return std::string(s.substr(b, e - b));
}

bool is_kebab(std::string_view s) noexcept {
  if (s.empty() || s.front() == '-' || s.back() == '-') return false;
  char prev = 0;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok || (c == '-' && prev == '-')) return false;
    prev = c;
  }
  return true;
}

bool is_ident_char(char c) noexcept {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// Lines without their terminators; a trailing \r is dropped too.
std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      if (start < text.size()) lines.emplace_back(text.substr(start));
      break;
    }
    std::string_view line = text.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.emplace_back(line);
    start = nl + 1;
  }
  return lines;
}

class parser {
 public:
  parser(std::string_view text, const std::string& file, std::string_view expected_id)
      : text_(text), file_(file), expected_id_(expected_id), lines_(split_lines(text)) {
    doc_.file = file;
  }

  parse_result run() {
    const std::size_t body_start = front_matter();
    if (body_start != 0) body(body_start);
    parse_result r;
    r.diagnostics = std::move(diags_);
    if (!has_errors(r.diagnostics)) {
      doc_.content_hash = sha256_hex(text_);
      r.doc = std::move(doc_);
    }
    return r;
  }

 private:
  void error(int line, std::string message) {
    diags_.push_back({diagnostic::severity::error, file_, line, std::move(message)});
  }
  void warning(int line, std::string message) {
    diags_.push_back({diagnostic::severity::warning, file_, line, std::move(message)});
  }

  // Returns the index of the first body line, or 0 when the front matter is
  // unusable (the body is then not checked: its errors would be noise).
  std::size_t front_matter() {
    if (lines_.empty() || trim(lines_[0]) != "---") {
      error(1, "a document must open with front matter: '---' on the first line");
      return 0;
    }
    std::size_t close = 0;
    for (std::size_t i = 1; i < lines_.size(); ++i) {
      if (trim(lines_[i]) == "---") {
        close = i;
        break;
      }
    }
    if (close == 0) {
      error(1, "front matter is not closed: no second '---' line");
      return 0;
    }
    std::size_t next_expected = 0;  // index into front_matter_keys, for the order check
    for (std::size_t i = 1; i < close; ++i) {
      const int ln = static_cast<int>(i) + 1;
      const std::string line = trim(lines_[i]);
      if (line.empty()) continue;
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) {
        error(ln, "front matter line is not 'key: value': '" + line + "'");
        continue;
      }
      const std::string key = trim(std::string_view(line).substr(0, colon));
      const std::string value = trim(std::string_view(line).substr(colon + 1));
      const auto it = std::find(front_matter_keys.begin(), front_matter_keys.end(), key);
      if (it == front_matter_keys.end()) {
        error(ln, "unknown front-matter key '" + key + "' (known: " + join(front_matter_keys) +
                      ")");
        continue;
      }
      if (doc_.key_lines.count(key) != 0) {
        error(ln, "duplicate front-matter key '" + key + "' (first on line " +
                      std::to_string(doc_.key_lines[key]) + ")");
        continue;
      }
      doc_.key_lines[key] = ln;
      const auto pos = static_cast<std::size_t>(it - front_matter_keys.begin());
      if (pos < next_expected) {
        error(ln, "front-matter key '" + key + "' is out of order (order: " +
                      join(front_matter_keys) + ")");
      }
      next_expected = std::max(next_expected, pos + 1);
      value_of(key, value, ln);
    }
    for (std::size_t k = 0; k < required_front_matter_keys; ++k) {
      const std::string key(front_matter_keys[k]);
      if (doc_.key_lines.count(key) == 0) {
        error(static_cast<int>(close) + 1, "missing front-matter key '" + key + "'");
      }
    }
    if (doc_.is_reference() && doc_.key_lines.count("config") == 0)
      error(static_cast<int>(close) + 1,
            "missing front-matter key 'config': a reference names the operator config that "
            "holds its kernel");
    if (!doc_.is_reference() && doc_.key_lines.count("config") != 0)
      error(doc_.key_lines["config"], "'config' is only allowed with 'kind: reference'");
    return close + 1;
  }

  void value_of(const std::string& key, const std::string& value, int ln) {
    if (key == "kind") {
      if (value == "technique") doc_.kind = document_kind::technique;
      else if (value == "reference") doc_.kind = document_kind::reference;
      else error(ln, "unknown kind '" + value + "' (known: technique, reference)");
      return;
    }
    if (key == "config") {
      if (value.empty() || value.front() == '[') {
        error(ln, "'config' must be one path to an operator config (relative to the document)");
        return;
      }
      doc_.config = value;
      return;
    }
    if (key == "id" || key == "title") {
      if (value.empty()) {
        error(ln, "'" + key + "' is empty");
        return;
      }
      if (value.front() == '[') {
        error(ln, "'" + key + "' must be a single value, not a list");
        return;
      }
      if (key == "title") {
        doc_.title = value;
        return;
      }
      doc_.id = value;
      if (!is_kebab(value)) {
        error(ln, "id '" + value + "' is not kebab-case (lower-case letters, digits, '-')");
      } else if (!expected_id_.empty() && value != expected_id_) {
        error(ln, "id '" + value + "' does not match the file name '" + std::string(expected_id_) +
                      ".md'");
      }
      return;
    }
    std::vector<std::string> items;
    if (!list(value, ln, key, items)) return;
    if (key == "bottlenecks") {
      for (const auto& b : items)
        if (!is_bottleneck_class(b))
          error(ln, "unknown bottleneck class '" + b + "' (known: " + join(bottleneck_classes()) +
                        ")");
      if (items.empty()) error(ln, "'bottlenecks' is empty: name at least one class");
      doc_.bottlenecks = std::move(items);
    } else if (key == "operators") {
      for (const auto& o : items)
        if (!is_operator_class(o))
          error(ln, "unknown operator class '" + o + "' (known: " + join(operator_classes()) +
                        ")");
      if (items.empty()) error(ln, "'operators' is empty: name at least one class, or 'any'");
      doc_.operators = std::move(items);
    } else if (key == "arch") {
      for (const auto& a : items)
        if (!contains(arch_names(), a))
          error(ln, "unknown architecture '" + a + "' (known: " + join(arch_names()) + ")");
      if (items.empty()) error(ln, "'arch' is empty: name the lowest architecture");
      doc_.arch = std::move(items);
    } else {
      doc_.tags = std::move(items);
    }
  }

  bool list(const std::string& value, int ln, const std::string& key,
            std::vector<std::string>& items) {
    if (value.size() < 2 || value.front() != '[' || value.back() != ']') {
      error(ln, "'" + key + "' must be a flow list on one line: [a, b, c]");
      return false;
    }
    const std::string inner = trim(std::string_view(value).substr(1, value.size() - 2));
    if (inner.empty()) return true;
    std::set<std::string> seen;
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = inner.find(',', start);
      std::string item = trim(std::string_view(inner).substr(
          start, comma == std::string::npos ? std::string::npos : comma - start));
      if (item.size() >= 2 && (item.front() == '"' || item.front() == '\'') &&
          item.back() == item.front())
        item = item.substr(1, item.size() - 2);
      if (item.empty()) {
        error(ln, "'" + key + "' has an empty list item");
      } else if (!seen.insert(item).second) {
        error(ln, "'" + key + "' lists '" + item + "' twice");
      } else {
        items.push_back(std::move(item));
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return true;
  }

  struct fence {
    std::string lang;
    std::string text;
    int line = 0;
  };

  void body(std::size_t start) {
    for (std::size_t i = start; i < lines_.size(); ++i) {
      doc_.body += lines_[i];
      doc_.body += '\n';
    }
    // Split into sections, ignoring "## " lines inside code fences.
    struct raw_section {
      std::string name;
      int line;
      std::vector<std::string> lines;
      std::vector<fence> fences;
    };
    std::vector<raw_section> raw;
    bool in_fence = false;
    int fence_line = 0;
    fence current;
    bool preamble_text = false;
    for (std::size_t i = start; i < lines_.size(); ++i) {
      const std::string& line = lines_[i];
      const int ln = static_cast<int>(i) + 1;
      const std::string t = trim(line);
      if (t.rfind("```", 0) == 0) {
        if (!in_fence) {
          in_fence = true;
          fence_line = ln;
          current = fence{trim(std::string_view(t).substr(3)), "", ln};
        } else {
          if (t != "```") error(ln, "a closing code fence must be a bare ```");
          in_fence = false;
          if (!raw.empty()) raw.back().fences.push_back(current);
        }
      } else if (in_fence) {
        current.text += line;
        current.text += '\n';
      } else if (line.rfind("## ", 0) == 0) {
        raw.push_back({trim(std::string_view(line).substr(3)), ln, {}, {}});
        continue;
      } else if (line.rfind("# ", 0) == 0) {
        warning(ln, "a level-1 heading in the body; the title comes from the front matter");
      }
      if (raw.empty()) {
        if (!t.empty()) preamble_text = true;
      } else {
        raw.back().lines.push_back(line);
      }
    }
    if (in_fence) error(fence_line, "code fence opened here is never closed");
    if (preamble_text)
      warning(static_cast<int>(start) + 1,
              "text before the first section is not part of any section and is never retrieved");

    // Sections: the required ones, once each, in order; others are warned.
    const auto& required = doc_.is_reference() ? reference_section_names() : section_names();
    std::map<std::string, int> seen;
    std::size_t next_expected = 0;
    for (const auto& s : raw) {
      const auto it = std::find(required.begin(), required.end(), s.name);
      if (it == required.end()) {
        warning(s.line, "unknown section '## " + s.name + "' (sections: " + join(required) +
                            "); it is indexed but never put in a prompt");
      } else {
        if (seen.count(s.name) != 0) {
          error(s.line, "duplicate section '## " + s.name + "' (first on line " +
                            std::to_string(seen[s.name]) + ")");
          continue;
        }
        seen[s.name] = s.line;
        const auto pos = static_cast<std::size_t>(it - required.begin());
        if (pos < next_expected)
          error(s.line, "section '## " + s.name + "' is out of order (order: " + join(required) +
                            ")");
        next_expected = std::max(next_expected, pos + 1);
      }
      std::size_t b = 0, e = s.lines.size();
      while (b < e && trim(s.lines[b]).empty()) ++b;
      while (e > b && trim(s.lines[e - 1]).empty()) --e;
      std::string text;
      for (std::size_t k = b; k < e; ++k) {
        text += s.lines[k];
        text += '\n';
      }
      if (text.empty()) error(s.line, "section '## " + s.name + "' is empty");
      doc_.sections.push_back({s.name, std::move(text), s.line});
      if (s.name == "Example" && !doc_.is_reference()) example_of(s.line, s.fences);
    }
    const int last = static_cast<int>(lines_.size());
    for (std::string_view name : required)
      if (seen.count(std::string(name)) == 0)
        error(last, "missing section '## " + std::string(name) + "'");
    // References are short by design (their code lives in the config).
    if (!doc_.is_reference() && (lines_.size() < 60 || lines_.size() > 150))
      warning(0, "document has " + std::to_string(lines_.size()) +
                     " lines; documents are meant to be 60-150 lines");
    references(start);
  }

  void example_of(int section_line, const std::vector<fence>& fences) {
    const fence* cuda = nullptr;
    const fence* plan = nullptr;
    for (const auto& f : fences) {
      if (f.lang == "cuda") {
        if (cuda != nullptr) {
          error(f.line, "the Example has a second ```cuda block (first on line " +
                            std::to_string(cuda->line) + "); one translation unit only");
          continue;
        }
        cuda = &f;
      } else if (f.lang == "json") {
        if (plan != nullptr) {
          error(f.line, "the Example has a second ```json block (first on line " +
                            std::to_string(plan->line) + ")");
          continue;
        }
        plan = &f;
      }
    }
    if (cuda == nullptr) error(section_line, "the Example has no ```cuda block");
    if (plan == nullptr) error(section_line, "the Example has no ```json launch plan");
    if (cuda == nullptr || plan == nullptr) return;
    example ex;
    ex.source = cuda->text;
    ex.source_line = cuda->line;
    ex.plan_line = plan->line;
    try {
      ex.plan = json::parse(plan->text);
    } catch (const json::parse_error& e) {
      // Byte offset -> line inside the block -> line in the file.
      int ln = plan->line + 1;
      const std::size_t upto = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, plan->text.size());
      ln += static_cast<int>(std::count(plan->text.begin(),
                                        plan->text.begin() + static_cast<std::ptrdiff_t>(upto), '\n'));
      error(ln, std::string("the launch plan is not valid JSON: ") + e.what());
      return;
    }
    if (check_plan(ex, plan->line)) doc_.ex = std::move(ex);
  }

  // The launch plan's shape (the operator config's candidate format, minus
  // the source): what can be checked without an operator config.
  bool check_plan(example& ex, int ln) {
    const std::size_t before = diags_.size();
    const json& p = ex.plan;
    if (!p.is_object()) {
      error(ln, "the launch plan must be a JSON object {\"launches\": [...], \"parameters\": {...}}");
      return false;
    }
    static const std::set<std::string> plan_keys = {"launches", "parameters", "workspaces",
                                                    "compile_options"};
    for (const auto& [k, v] : p.items())
      if (plan_keys.count(k) == 0)
        error(ln, "unknown launch-plan key '" + k +
                      "' (known: launches, parameters, workspaces, compile_options)");
    const std::vector<std::string> declared = extern_c_kernels(ex.source);
    if (!p.contains("launches") || !p["launches"].is_array() || p["launches"].empty()) {
      error(ln, "the launch plan needs a non-empty \"launches\" array");
    } else {
      static const std::set<std::string> launch_keys = {"kernel", "grid",         "block",
                                                        "cluster", "shared_bytes", "args"};
      std::size_t i = 0;
      for (const auto& l : p["launches"]) {
        const std::string where = "launches[" + std::to_string(i++) + "]";
        if (!l.is_object()) {
          error(ln, where + " must be an object");
          continue;
        }
        for (const auto& [k, v] : l.items())
          if (launch_keys.count(k) == 0) error(ln, where + ": unknown key '" + k + "'");
        if (!l.contains("kernel") || !l["kernel"].is_string()) {
          error(ln, where + ": missing \"kernel\"");
        } else {
          const std::string k = l["kernel"].get<std::string>();
          ex.kernels.push_back(k);
          if (std::find(declared.begin(), declared.end(), k) == declared.end())
            error(ln, where + ": kernel '" + k +
                          "' is not declared extern \"C\" __global__ in the ```cuda block");
        }
        for (const char* dims : {"grid", "block", "cluster"}) {
          if (!l.contains(dims)) {
            if (std::string_view(dims) != "cluster") error(ln, where + ": missing \"" + dims + "\"");
            continue;
          }
          const json& d = l[dims];
          if (!d.is_array() || d.empty() || d.size() > 3) {
            error(ln, where + ": \"" + dims + "\" must be a list of 1-3 expressions");
            continue;
          }
          for (const auto& e : d)
            if (!e.is_string() && !e.is_number_integer())
              error(ln, where + ": \"" + dims + "\" entries must be expressions or integers");
        }
        if (l.contains("shared_bytes") && !l["shared_bytes"].is_string() &&
            !l["shared_bytes"].is_number_integer())
          error(ln, where + ": \"shared_bytes\" must be an expression or an integer");
        if (!l.contains("args") || !l["args"].is_array()) {
          error(ln, where + ": missing \"args\" list");
          continue;
        }
        std::size_t j = 0;
        for (const auto& a : l["args"]) check_arg(a, where + ".args[" + std::to_string(j++) + "]", ln);
      }
    }
    if (p.contains("parameters")) {
      if (!p["parameters"].is_object()) {
        error(ln, "\"parameters\" must be an object NAME -> {\"values\": [...], \"default\": v}");
      } else {
        for (const auto& [name, spec] : p["parameters"].items()) {
          const std::string where = "parameters." + name;
          if (!spec.is_object() || !spec.contains("values") || !spec["values"].is_array() ||
              spec["values"].empty() || !spec.contains("default") ||
              !spec["default"].is_number_integer()) {
            error(ln, where + " needs a non-empty integer \"values\" list and an integer \"default\"");
            continue;
          }
          bool found = false;
          for (const auto& v : spec["values"]) {
            if (!v.is_number_integer()) error(ln, where + ".values must be integers");
            else if (v == spec["default"]) found = true;
          }
          if (!found) error(ln, where + ".default is not one of its values");
          ex.defaults[name] = spec["default"].get<std::int64_t>();
        }
      }
    }
    if (p.contains("workspaces")) {
      if (!p["workspaces"].is_object()) {
        error(ln, "\"workspaces\" must be an object NAME -> {\"bytes\": EXPR, \"zero_init\": bool}");
      } else {
        for (const auto& [name, spec] : p["workspaces"].items())
          if (!spec.is_object() || !spec.contains("bytes"))
            error(ln, "workspaces." + name + " needs \"bytes\"");
      }
    }
    if (p.contains("compile_options")) {
      if (!p["compile_options"].is_array()) {
        error(ln, "\"compile_options\" must be a list of strings");
      } else {
        for (const auto& o : p["compile_options"]) {
          if (!o.is_string()) error(ln, "\"compile_options\" must be a list of strings");
          else ex.compile_options.push_back(o.get<std::string>());
        }
      }
    }
    return std::none_of(diags_.begin() + static_cast<std::ptrdiff_t>(before), diags_.end(),
                        [](const diagnostic& d) { return d.level == diagnostic::severity::error; });
  }

  void check_arg(const json& a, const std::string& where, int ln) {
    static const std::set<std::string> forms = {"tensor", "workspace", "int", "scalar"};
    if (!a.is_object()) {
      error(ln, where + " must be an object");
      return;
    }
    int n = 0;
    std::string form;
    for (const auto& [k, v] : a.items()) {
      if (forms.count(k) != 0) {
        ++n;
        form = k;
      } else if (k != "type") {
        error(ln, where + ": unknown key '" + k + "'");
      }
    }
    if (n != 1) {
      error(ln, where + " must have exactly one of tensor, workspace, int, scalar");
      return;
    }
    if (!a[form].is_string() && !(form == "int" && a[form].is_number_integer()))
      error(ln, where + ": \"" + form + "\" must be a name" + (form == "int" ? " or an expression" : ""));
    if (form == "int" || form == "scalar") {
      static const std::set<std::string> int_types = {"int32", "int64"};
      static const std::set<std::string> scalar_types = {"float32", "float64", "int32", "int64"};
      const auto& allowed = form == "int" ? int_types : scalar_types;
      if (!a.contains("type") || !a["type"].is_string() ||
          allowed.count(a["type"].get<std::string>()) == 0)
        error(ln, where + ": \"type\" must be one of " +
                      (form == "int" ? std::string("int32, int64")
                                     : std::string("float32, float64, int32, int64")));
    } else if (a.contains("type")) {
      error(ln, where + ": a " + form + " argument takes no \"type\"");
    }
  }

  // "see `other-id`" (may wrap onto the next line) and Markdown links to
  // other-id.md. Only kebab-case names with a '-' count, so `k_end_it` or
  // `x` in prose are not taken for documents.
  void references(std::size_t start) {
    bool in_fence = false;
    std::string prev_tail;  // last word of the previous line, for wrapped "see"
    for (std::size_t i = start; i < lines_.size(); ++i) {
      const std::string& line = lines_[i];
      const int ln = static_cast<int>(i) + 1;
      if (trim(line).rfind("```", 0) == 0) {
        in_fence = !in_fence;
        prev_tail.clear();
        continue;
      }
      if (in_fence) continue;
      std::string lower;
      for (char c : line) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      // "see `x`" on this line, or "(see" ending the previous one.
      auto take_backtick = [&](std::size_t pos) {
        if (pos >= line.size() || line[pos] != '`') return;
        const std::size_t end = line.find('`', pos + 1);
        if (end == std::string::npos) return;
        const std::string name = line.substr(pos + 1, end - pos - 1);
        if (is_kebab(name) && name.find('-') != std::string::npos)
          doc_.references.push_back({name, ln});
      };
      std::size_t p = 0;
      while ((p = lower.find("see", p)) != std::string::npos) {
        const bool word_start = p == 0 || !is_ident_char(lower[p - 1]);
        std::size_t q = p + 3;
        p = q;
        if (!word_start) continue;
        while (q < line.size() && line[q] == ' ') ++q;
        take_backtick(q);
      }
      if (prev_tail == "see" || prev_tail == "(see") {
        std::size_t q = 0;
        while (q < line.size() && line[q] == ' ') ++q;
        take_backtick(q);
      }
      const std::string t = trim(lower);
      const std::size_t sp = t.find_last_of(' ');
      prev_tail = sp == std::string::npos ? t : t.substr(sp + 1);
      p = 0;
      while ((p = line.find("](", p)) != std::string::npos) {
        const std::size_t end = line.find(')', p + 2);
        if (end == std::string::npos) break;
        std::string target = line.substr(p + 2, end - p - 2);
        p = end;
        if (target.find("://") != std::string::npos) continue;
        const std::size_t slash = target.find_last_of('/');
        if (slash != std::string::npos) target = target.substr(slash + 1);
        if (target.size() > 3 && target.compare(target.size() - 3, 3, ".md") == 0) {
          target.resize(target.size() - 3);
          if (is_kebab(target)) doc_.references.push_back({target, ln});
        }
      }
    }
  }

  std::string_view text_;
  std::string file_;
  std::string expected_id_;
  std::vector<std::string> lines_;
  std::vector<diagnostic> diags_;
  document doc_;
};

}  // namespace

std::string diagnostic::to_string() const {
  std::string s = file;
  if (line > 0) s += ":" + std::to_string(line);
  s += level == severity::error ? ": error: " : ": warning: ";
  s += message;
  return s;
}

bool has_errors(const std::vector<diagnostic>& diagnostics) noexcept {
  return std::any_of(diagnostics.begin(), diagnostics.end(),
                     [](const diagnostic& d) { return d.level == diagnostic::severity::error; });
}

const std::vector<std::string_view>& bottleneck_classes() noexcept {
  static const std::vector<std::string_view> v = {
      "memory-bound-near-peak", "memory-bound-far-from-peak", "compute-bound",
      "tensor-core-underused",  "latency-bound",              "occupancy-limited",
      "launch-bound",           "tail-effect",                "under-filled-grid",
      "register-spills",        "uncoalesced",                "excess-bytes",
      "shared-memory-bank-conflicts", "warp-divergence",      "atomics-contention",
      "synchronization-overhead",     "instruction-bound",    "precision"};
  return v;
}

const std::vector<std::string_view>& operator_classes() noexcept {
  static const std::vector<std::string_view> v = {
      "elementwise", "normalization", "reduction", "softmax",  "gemm",
      "gemv",        "attention",     "quantization", "moe",  "sort-scan",
      "topk",        "kv-cache",      "convolution",  "recurrent", "any"};
  return v;
}

const std::vector<std::string_view>& arch_names() noexcept {
  static const std::vector<std::string_view> v = {"sm_80", "sm_89", "sm_90", "sm_90a"};
  return v;
}

const std::vector<std::string_view>& section_names() noexcept {
  static const std::vector<std::string_view> v = {
      "When it helps", "When it hurts", "How to see it in the counters", "How", "Example",
      "Pitfalls"};
  return v;
}

const std::vector<std::string_view>& reference_section_names() noexcept {
  static const std::vector<std::string_view> v = {
      "What it computes", "Techniques", "When to use it", "How to see it in the counters",
      "Measured"};
  return v;
}

std::string_view kind_name(document_kind k) noexcept {
  return k == document_kind::reference ? "reference" : "technique";
}

bool is_bottleneck_class(std::string_view name) noexcept {
  return contains(bottleneck_classes(), name);
}

bool is_operator_class(std::string_view name) noexcept {
  return contains(operator_classes(), name);
}

std::optional<arch_version> arch_version::parse(std::string_view name) noexcept {
  if (name.size() < 5 || name.substr(0, 3) != "sm_") return std::nullopt;
  std::string_view digits = name.substr(3);
  arch_version v;
  if (digits.back() == 'a') {
    v.specific = true;
    digits.remove_suffix(1);
  }
  if (digits.empty() || digits.size() > 4) return std::nullopt;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v.number = v.number * 10 + (c - '0');
  }
  return v;
}

bool arch_applies(const std::vector<std::string>& doc_arch, const arch_version& target) noexcept {
  for (const auto& a : doc_arch) {
    const auto v = arch_version::parse(a);
    if (!v) continue;
    if (v->specific ? (target.specific && target.number == v->number) : target.number >= v->number)
      return true;
  }
  return false;
}

const section* document::find_section(std::string_view name) const noexcept {
  for (const auto& s : sections)
    if (s.name == name) return &s;
  return nullptr;
}

int document::line_of(std::string_view key) const noexcept {
  const auto it = key_lines.find(std::string(key));
  return it == key_lines.end() ? 0 : it->second;
}

parse_result parse_document(std::string_view text, const std::string& file,
                            std::string_view expected_id) {
  return parser(text, file, expected_id).run();
}

std::vector<std::string> extern_c_kernels(std::string_view src) {
  std::vector<std::string> names;
  std::size_t p = 0;
  while ((p = src.find("__global__", p)) != std::string_view::npos) {
    const bool whole = (p == 0 || !is_ident_char(src[p - 1])) &&
                       (p + 10 >= src.size() || !is_ident_char(src[p + 10]));
    const std::size_t decl_start = [&] {
      const std::size_t b = src.find_last_of(";}", p);
      return b == std::string_view::npos ? 0 : b + 1;
    }();
    const bool extern_c = src.substr(decl_start, p - decl_start).find("extern \"C\"") !=
                          std::string_view::npos;
    std::size_t q = p + 10;
    p = q;
    if (!whole || !extern_c) continue;
    // Walk tokens up to the parameter list, skipping __launch_bounds__(...).
    std::string last;
    while (q < src.size()) {
      const char c = src[q];
      if (std::isspace(static_cast<unsigned char>(c)) != 0) {
        ++q;
      } else if (is_ident_char(c)) {
        const std::size_t b = q;
        while (q < src.size() && is_ident_char(src[q])) ++q;
        last = std::string(src.substr(b, q - b));
      } else if (c == '(') {
        if (last == "__launch_bounds__" || last == "__cluster_dims__" ||
            last == "__maxnreg__") {
          int depth = 0;
          do {
            if (src[q] == '(') ++depth;
            else if (src[q] == ')') --depth;
            ++q;
          } while (q < src.size() && depth > 0);
          last.clear();
          continue;
        }
        if (!last.empty()) names.push_back(last);
        break;
      } else {
        ++q;  // '*', '&', etc. in a return type; kernels return void
      }
    }
  }
  return names;
}

}  // namespace kopt::kb
