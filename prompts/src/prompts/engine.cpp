#include "prompts/engine.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/data_paths.hpp"


namespace kopt::prompts {

using nlohmann::json;

template_error::template_error(std::string template_name, int line, int column,
                               const std::string& message)
    : kopt::error("template '" + template_name + "' at " + std::to_string(line) + ":" +
                  std::to_string(column) + ": " + message),
      template_name_(std::move(template_name)),
      line_(line),
      column_(column),
      message_(message) {}

json rendered::to_json() const {
  return json{{"text", text},
              {"present_items", present_items},
              {"dropped_items", dropped_items},
              {"cache_breaks", cache_breaks}};
}

namespace detail {

struct position {
  int line = 1;
  int column = 1;
};

// A dotted path such as `parent.plan` or `workloads.0.id`.
struct path {
  std::vector<std::string> parts;
  std::string text;
};

// One piece of an optional item's label: literal text, or `{path}`.
struct label_part {
  bool is_path = false;
  std::string literal;
  path var;
};

struct node {
  enum class kind { text, var, if_, for_, optional, include, cache_breakpoint };
  kind k = kind::text;
  position at;
  std::string text;  // text; for include: the template name
  path var;          // var; if condition; for: the list
  bool negate = false;
  std::string loop_var;
  std::vector<label_part> label;
  std::vector<std::unique_ptr<node>> body;
  std::vector<std::unique_ptr<node>> else_body;
  bool has_else = false;
};

}  // namespace detail

namespace {

using detail::node;
using detail::position;

bool is_ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool is_label_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == ':' ||
         c == '-' || c == '/';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

struct token {
  enum class kind { text, var, tag, comment };
  kind k = kind::text;
  std::string content;  // text, or the inside of the delimiters
  position at;
  position inner;  // where the content starts (for error columns)
};

position advance(position p, std::string_view s) {
  for (char c : s) {
    if (c == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

// Splits the template into text, {{ var }}, {% tag %} and {# comment #}.
// Always alternates text / delimited tokens (text may be empty), which the
// stand-alone line rule below relies on.
std::vector<token> lex(const std::string& name, std::string_view src) {
  std::vector<token> out;
  std::size_t pos = 0;
  position here;
  for (;;) {
    std::size_t open = std::string_view::npos;
    for (std::size_t i = pos; i + 1 < src.size(); ++i) {
      if (src[i] == '{' && (src[i + 1] == '{' || src[i + 1] == '%' || src[i + 1] == '#')) {
        open = i;
        break;
      }
    }
    const std::string_view text =
        src.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos);
    out.push_back(token{token::kind::text, std::string(text), here, here});
    here = advance(here, text);
    if (open == std::string_view::npos) break;
    const char second = src[open + 1];
    const std::string_view closer = second == '{' ? "}}" : second == '%' ? "%}" : "#}";
    const std::size_t close = src.find(closer, open + 2);
    if (close == std::string_view::npos) {
      const std::string opener = std::string("{") + second;
      throw template_error(name, here.line, here.column,
                           "'" + opener + "' is never closed (expected '" + std::string(closer) +
                               "')");
    }
    token t;
    t.k = second == '{' ? token::kind::var : second == '%' ? token::kind::tag : token::kind::comment;
    t.content = std::string(src.substr(open + 2, close - open - 2));
    t.at = here;
    t.inner = advance(here, src.substr(open, 2));
    out.push_back(std::move(t));
    here = advance(here, src.substr(open, close + 2 - open));
    pos = close + 2;
  }
  return out;
}

// A {% tag %} or {# comment #} alone on its line (only spaces or tabs around
// it) takes its line with it, so that block structure in a template does
// not leave blank lines in the prompt.
void strip_standalone_lines(std::vector<token>& toks) {
  std::vector<bool> standalone(toks.size(), false);
  for (std::size_t i = 1; i + 1 < toks.size(); i += 2) {
    if (toks[i].k != token::kind::tag && toks[i].k != token::kind::comment) continue;
    const std::string& before = toks[i - 1].content;
    const std::string& after = toks[i + 1].content;
    const std::size_t b = before.find_last_not_of(" \t");
    const bool line_start = (b == std::string::npos && i == 1) ||
                            (b != std::string::npos && before[b] == '\n');
    const std::size_t a = after.find_first_not_of(" \t");
    const bool is_last = i + 2 == toks.size();
    const bool line_end = (a == std::string::npos && is_last) ||
                          (a != std::string::npos &&
                           (after[a] == '\n' || (after[a] == '\r' && a + 1 < after.size() &&
                                                 after[a + 1] == '\n')));
    standalone[i] = line_start && line_end;
  }
  for (std::size_t i = 1; i + 1 < toks.size(); i += 2) {
    if (!standalone[i]) continue;
    std::string& before = toks[i - 1].content;
    const std::size_t b = before.find_last_not_of(" \t");
    before.erase(b == std::string::npos ? 0 : b + 1);
    std::string& after = toks[i + 1].content;
    std::size_t a = after.find_first_not_of(" \t");
    if (a == std::string::npos) {
      after.clear();
    } else {
      if (after[a] == '\r') ++a;
      after.erase(0, a + 1);
    }
  }
}

class parser {
 public:
  parser(std::string name, std::vector<token> toks) : name_(std::move(name)), toks_(std::move(toks)) {}

  std::vector<std::unique_ptr<node>> parse() {
    std::vector<std::unique_ptr<node>> root;
    struct frame {
      node* n;
      std::string opener;  // if, for, optional
    };
    std::vector<frame> stack;
    auto sink = [&]() -> std::vector<std::unique_ptr<node>>& {
      if (stack.empty()) return root;
      node* n = stack.back().n;
      return n->has_else ? n->else_body : n->body;
    };
    for (const token& t : toks_) {
      switch (t.k) {
        case token::kind::text:
          if (!t.content.empty()) {
            auto n = std::make_unique<node>();
            n->k = node::kind::text;
            n->at = t.at;
            n->text = t.content;
            sink().push_back(std::move(n));
          }
          break;
        case token::kind::comment:
          break;
        case token::kind::var: {
          auto n = std::make_unique<node>();
          n->k = node::kind::var;
          n->at = t.at;
          n->var = parse_path(trim(t.content), t);
          sink().push_back(std::move(n));
          break;
        }
        case token::kind::tag: {
          const std::string_view body = trim(t.content);
          const std::size_t sp = body.find_first_of(" \t\r\n");
          const std::string_view word = body.substr(0, sp);
          const std::string_view rest =
              sp == std::string_view::npos ? std::string_view{} : trim(body.substr(sp));
          if (word == "if") {
            auto n = std::make_unique<node>();
            n->k = node::kind::if_;
            n->at = t.at;
            std::string_view cond = rest;
            if (cond.substr(0, 4) == "not " || cond.substr(0, 4) == "not\t") {
              n->negate = true;
              cond = trim(cond.substr(4));
            }
            if (cond.empty()) fail(t, "'{% if %}' needs a condition: {% if NAME %} or {% if not NAME %}");
            n->var = parse_path(cond, t);
            node* raw = n.get();
            sink().push_back(std::move(n));
            stack.push_back({raw, "if"});
          } else if (word == "else") {
            if (!rest.empty()) fail(t, "'{% else %}' takes nothing after it (there is no elif)");
            if (stack.empty() || stack.back().opener != "if")
              fail(t, "'{% else %}' outside an '{% if %}' block");
            if (stack.back().n->has_else) fail(t, "a second '{% else %}' in the same '{% if %}'");
            stack.back().n->has_else = true;
          } else if (word == "endif" || word == "endfor" || word == "endoptional") {
            if (!rest.empty()) fail(t, "'{% " + std::string(word) + " %}' takes nothing after it");
            const std::string want(word.substr(3));
            if (stack.empty())
              fail(t, "'{% " + std::string(word) + " %}' without an open '{% " + want + " %}'");
            if (stack.back().opener != want) {
              const node* open = stack.back().n;
              fail(t, "'{% " + std::string(word) + " %}' closes '{% " + stack.back().opener +
                          " %}' opened at " + std::to_string(open->at.line) + ":" +
                          std::to_string(open->at.column) + " (expected '{% end" +
                          stack.back().opener + " %}')");
            }
            stack.pop_back();
          } else if (word == "for") {
            // for ITEM in PATH
            const std::size_t s1 = rest.find_first_of(" \t");
            const std::string_view item = rest.substr(0, s1);
            std::string_view tail = s1 == std::string_view::npos ? std::string_view{}
                                                                   : trim(rest.substr(s1));
            if (item.empty() || !is_ident_start(item[0]) ||
                !std::all_of(item.begin(), item.end(), is_ident_char) ||
                tail.substr(0, 3) != "in " || trim(tail.substr(3)).empty()) {
              fail(t, "expected '{% for ITEM in LIST %}'");
            }
            if (item == "loop") fail(t, "'loop' is reserved inside a for block; pick another name");
            auto n = std::make_unique<node>();
            n->k = node::kind::for_;
            n->at = t.at;
            n->loop_var = std::string(item);
            n->var = parse_path(trim(tail.substr(3)), t);
            node* raw = n.get();
            sink().push_back(std::move(n));
            stack.push_back({raw, "for"});
          } else if (word == "optional") {
            auto n = std::make_unique<node>();
            n->k = node::kind::optional;
            n->at = t.at;
            n->label = parse_label(rest, t);
            node* raw = n.get();
            sink().push_back(std::move(n));
            stack.push_back({raw, "optional"});
          } else if (word == "include") {
            if (rest.empty() || !std::all_of(rest.begin(), rest.end(), [](char c) {
                  return is_ident_char(c) || c == '-' || c == '.';
                })) {
              fail(t, "expected '{% include NAME %}' with the name of another template");
            }
            auto n = std::make_unique<node>();
            n->k = node::kind::include;
            n->at = t.at;
            n->text = std::string(rest);
            sink().push_back(std::move(n));
          } else if (word == "cache_breakpoint") {
            if (!rest.empty()) fail(t, "'{% cache_breakpoint %}' takes no argument");
            auto n = std::make_unique<node>();
            n->k = node::kind::cache_breakpoint;
            n->at = t.at;
            sink().push_back(std::move(n));
          } else {
            fail(t, "unknown tag '" + std::string(word.substr(0, 40)) +
                        "' (known: if, else, endif, for, endfor, optional, endoptional, include, "
                        "cache_breakpoint)");
          }
          break;
        }
      }
    }
    if (!stack.empty()) {
      const node* open = stack.back().n;
      throw template_error(name_, open->at.line, open->at.column,
                           "'{% " + stack.back().opener + " %}' is never closed (expected '{% end" +
                               stack.back().opener + " %}')");
    }
    return root;
  }

 private:
  [[noreturn]] void fail(const token& t, const std::string& message) const {
    throw template_error(name_, t.at.line, t.at.column, message);
  }

  detail::path parse_path(std::string_view s, const token& t) const {
    detail::path p;
    p.text = std::string(s);
    if (s.empty()) fail(t, "empty variable name");
    std::size_t i = 0;
    while (i <= s.size()) {
      const std::size_t dot = s.find('.', i);
      const std::string_view part = s.substr(i, dot == std::string_view::npos ? dot : dot - i);
      const bool ok = !part.empty() &&
                      (std::all_of(part.begin(), part.end(), is_ident_char)) &&
                      (p.parts.empty() ? is_ident_start(part[0]) : true);
      if (!ok) {
        fail(t, "'" + std::string(s.substr(0, 80)) +
                    "' is not a variable name (expected NAME or NAME.FIELD..., no filters or "
                    "expressions)");
      }
      p.parts.emplace_back(part);
      if (dot == std::string_view::npos) break;
      i = dot + 1;
    }
    return p;
  }

  std::vector<detail::label_part> parse_label(std::string_view s, const token& t) const {
    std::vector<detail::label_part> out;
    if (s.empty()) fail(t, "'{% optional %}' needs an ID, e.g. {% optional history %}");
    std::size_t i = 0;
    while (i < s.size()) {
      if (s[i] == '{') {
        const std::size_t close = s.find('}', i);
        if (close == std::string_view::npos) fail(t, "'{' in an optional ID is never closed");
        detail::label_part part;
        part.is_path = true;
        part.var = parse_path(trim(s.substr(i + 1, close - i - 1)), t);
        out.push_back(std::move(part));
        i = close + 1;
      } else {
        if (!is_label_char(s[i])) {
          fail(t, std::string("'") + s[i] +
                      "' cannot be part of an optional ID (letters, digits, _ . : - / and "
                      "{variable})");
        }
        if (out.empty() || out.back().is_path) out.emplace_back();
        out.back().literal.push_back(s[i]);
        ++i;
      }
    }
    return out;
  }

  std::string name_;
  std::vector<token> toks_;
};

std::string describe(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "a list";
  if (v.is_null()) return "null";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  return "a number";
}

bool truthy(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<std::int64_t>() != 0;
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !v.empty();  // array, object
}

}  // namespace

struct renderer {
  const template_set& set;
  const json& root;
  const std::set<std::string>& dropped;
  rendered out;
  std::vector<std::pair<std::string, json>> scopes;  // innermost last
  int depth = 0;

  [[noreturn]] static void fail(const std::string& tname, const position& at,
                                const std::string& message) {
    throw template_error(tname, at.line, at.column, message);
  }

  const json& lookup(const std::string& tname, const node& n, const detail::path& p) const {
    const json* cur = nullptr;
    const std::string& head = p.parts.front();
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
      if (it->first == head) {
        cur = &it->second;
        break;
      }
    }
    if (cur == nullptr) {
      const auto f = root.is_object() ? root.find(head) : root.end();
      if (f == root.end()) fail(tname, n.at, "unknown variable '" + head + "'");
      cur = &*f;
    }
    std::string so_far = head;
    for (std::size_t i = 1; i < p.parts.size(); ++i) {
      const std::string& part = p.parts[i];
      if (cur->is_object()) {
        const auto f = cur->find(part);
        if (f == cur->end()) fail(tname, n.at, "unknown variable '" + so_far + "." + part + "'");
        cur = &*f;
      } else if (cur->is_array() && std::all_of(part.begin(), part.end(), [](char c) {
                   return std::isdigit(static_cast<unsigned char>(c)) != 0;
                 })) {
        const auto idx = std::strtoull(part.c_str(), nullptr, 10);
        if (idx >= cur->size()) {
          fail(tname, n.at,
               "'" + so_far + "." + part + "' is out of range (the list has " +
                   std::to_string(cur->size()) + " items)");
        }
        cur = &(*cur)[idx];
      } else {
        fail(tname, n.at,
             "unknown variable '" + so_far + "." + part + "' ('" + so_far + "' is " +
                 describe(*cur) + ")");
      }
      so_far += "." + part;
    }
    return *cur;
  }

  std::string scalar_text(const std::string& tname, const node& n, const json& v,
                          const std::string& what) const {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
    if (v.is_number()) return v.dump();
    fail(tname, n.at,
         "'" + what + "' is " + describe(v) +
             (v.is_null() ? "" : "; print one of its fields or iterate with {% for %}"));
  }

  void note(std::vector<std::string>& list, const std::string& id) {
    if (std::find(list.begin(), list.end(), id) == list.end()) list.push_back(id);
  }

  void run(const std::string& tname, const std::vector<std::unique_ptr<node>>& nodes) {
    for (const auto& np : nodes) {
      const node& n = *np;
      switch (n.k) {
        case node::kind::text:
          out.text += n.text;
          break;
        case node::kind::var:
          out.text += scalar_text(tname, n, lookup(tname, n, n.var), n.var.text);
          break;
        case node::kind::if_: {
          const bool c = truthy(lookup(tname, n, n.var)) != n.negate;
          run(tname, c ? n.body : n.else_body);
          break;
        }
        case node::kind::for_: {
          // A copy: the list may live in a loop scope, and pushing scopes
          // below can move it (lists in prompts are short).
          const json list = lookup(tname, n, n.var);
          if (!list.is_array()) {
            fail(tname, n.at, "'" + n.var.text + "' is " + describe(list) + ", not a list");
          }
          const std::size_t size = list.size();
          for (std::size_t i = 0; i < size; ++i) {
            scopes.emplace_back(n.loop_var, list[i]);
            scopes.emplace_back("loop", json{{"index", i + 1},
                                             {"index0", i},
                                             {"first", i == 0},
                                             {"last", i + 1 == size},
                                             {"length", size}});
            run(tname, n.body);
            scopes.pop_back();
            scopes.pop_back();
          }
          break;
        }
        case node::kind::optional: {
          std::string id;
          for (const auto& part : n.label) {
            if (!part.is_path) {
              id += part.literal;
              continue;
            }
            const std::string v = scalar_text(tname, n, lookup(tname, n, part.var), part.var.text);
            if (v.empty() || !std::all_of(v.begin(), v.end(), is_label_char)) {
              fail(tname, n.at,
                   "'" + part.var.text + "' gives \"" + v.substr(0, 60) +
                       "\", which cannot be part of an optional ID (letters, digits, _ . : - /)");
            }
            id += v;
          }
          if (dropped.count(id) != 0) {
            note(out.dropped_items, id);
          } else {
            note(out.present_items, id);
            run(tname, n.body);
          }
          break;
        }
        case node::kind::cache_breakpoint:
          if (out.cache_breaks.empty() || out.cache_breaks.back() != out.text.size())
            out.cache_breaks.push_back(out.text.size());
          break;
        case node::kind::include: {
          const auto it = set.templates_.find(n.text);
          if (it == set.templates_.end()) {
            fail(tname, n.at, "'{% include " + n.text + " %}': no template named '" + n.text + "'");
          }
          if (depth >= 16) fail(tname, n.at, "includes nested more than 16 deep (a cycle?)");
          ++depth;
          run(it->second.name_, it->second.nodes_);
          --depth;
          break;
        }
      }
    }
  }
};

template_text::template_text(std::string name, std::string_view text) : name_(std::move(name)) {
  std::vector<token> toks = lex(name_, text);
  strip_standalone_lines(toks);
  nodes_ = parser(name_, std::move(toks)).parse();
}
template_text::~template_text() = default;
template_text::template_text(template_text&&) noexcept = default;
template_text& template_text::operator=(template_text&&) noexcept = default;

void template_set::add(const std::string& name, std::string_view text) {
  template_text t(name, text);
  templates_.insert_or_assign(name, std::move(t));
}

template_set template_set::load_directory(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw kopt::config_error("prompt template directory " + dir.string() + " does not exist" +
                             (ec ? " (" + ec.message() + ")" : ""));
  }
  template_set set;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) throw kopt::config_error("cannot list " + dir.string() + ": " + ec.message());
  std::vector<std::filesystem::path> files;
  for (const auto& entry : it) {
    const auto ext = entry.path().extension();
    if (entry.is_regular_file() && (ext == ".md" || ext == ".txt")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw kopt::config_error("cannot read prompt template " + f.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw kopt::config_error("error reading prompt template " + f.string());
    const std::string name = f.stem().string();
    if (set.contains(name)) {
      throw kopt::config_error("two prompt templates named '" + name + "' in " + dir.string() +
                               " (a .md and a .txt)");
    }
    set.add(name, ss.str());
  }
  return set;
}

bool template_set::contains(const std::string& name) const noexcept {
  return templates_.find(name) != templates_.end();
}

std::vector<std::string> template_set::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : templates_) out.push_back(k);
  return out;
}

rendered template_set::render(const std::string& name, const json& context,
                              const std::set<std::string>& dropped) const {
  const auto it = templates_.find(name);
  if (it == templates_.end()) {
    std::string have;
    for (const auto& [k, v] : templates_) have += (have.empty() ? "" : ", ") + k;
    throw kopt::not_found_error("no prompt template named '" + name + "' (have: " +
                                (have.empty() ? "none" : have) + ")");
  }
  renderer r{*this, context, dropped, {}, {}, 0};
  r.run(it->second.name_, it->second.nodes_);
  return std::move(r.out);
}

std::filesystem::path default_template_dir(const std::filesystem::path& override_dir) {
  if (!override_dir.empty()) {
    if (!std::filesystem::is_directory(override_dir)) {
      throw kopt::config_error("prompt template directory " + override_dir.string() +
                               " does not exist");
    }
    return override_dir;
  }
  const data::lookup l = data::find(data::kind::prompts);
  if (!l.problem.empty()) throw kopt::config_error(l.problem);
  if (l.found) return l.found->dir;
  throw kopt::config_error("no prompt template directory found (looked in: " + l.looked_in() +
                           "); set KOPT_PROMPTS_DIR or --prompts-dir (kopt doctor shows the lookup)");
}

rendered render(const std::string& template_name, const json& context,
                const std::set<std::string>& dropped) {
  return template_set::load_directory(default_template_dir()).render(template_name, context, dropped);
}

}  // namespace kopt::prompts
