#include "llm/extract.hpp"

#include <algorithm>
#include <cctype>
#include <set>

namespace kopt::llm {
namespace {

using nlohmann::json;

bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

// Removes <think>...</think> style reasoning that some models inline into
// the answer; code they sketch while thinking is not the answer.
std::string strip_reasoning(std::string_view text, std::vector<std::string>& notes) {
  static constexpr std::string_view tags[] = {"think", "thinking", "reasoning"};
  std::string out(text);
  for (std::string_view tag : tags) {
    const std::string open = "<" + std::string(tag) + ">";
    const std::string close = "</" + std::string(tag) + ">";
    for (;;) {
      const auto a = out.find(open);
      if (a == std::string::npos) break;
      const auto b = out.find(close, a + open.size());
      if (b == std::string::npos) break;  // unclosed: keep the text, the fences decide
      out.erase(a, b + close.size() - a);
      notes.push_back("ignored a <" + std::string(tag) + "> section");
    }
  }
  return out;
}

// Blanks comments and string literals so that names in them are not taken
// for declarations; keeps offsets unchanged.
std::string strip_comments(std::string_view src) {
  std::string out(src);
  std::size_t i = 0;
  while (i < out.size()) {
    if (out[i] == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    } else if (out[i] == '/' && i + 1 < out.size() && out[i + 1] == '*') {
      out[i] = out[i + 1] = ' ';
      i += 2;
      while (i < out.size() && !(out[i] == '*' && i + 1 < out.size() && out[i + 1] == '/')) {
        if (out[i] != '\n') out[i] = ' ';
        ++i;
      }
      if (i < out.size()) out[i++] = ' ';
      if (i < out.size()) out[i++] = ' ';
    } else if (std::string_view(out).substr(i, 10) == "extern \"C\"") {
      i += 10;  // keep the linkage string: it says whether a kernel is extern "C"
    } else if (out[i] == '"') {
      ++i;
      while (i < out.size() && out[i] != '"' && out[i] != '\n') {
        if (out[i] == '\\' && i + 1 < out.size()) out[i++] = ' ';
        out[i++] = ' ';
      }
      if (i < out.size()) ++i;
    } else {
      ++i;
    }
  }
  return out;
}

bool is_extern_c_before(std::string_view code, std::size_t pos) {
  const auto e = code.substr(0, pos).rfind("extern \"C\"");
  return e != std::string_view::npos;
}

bool json_looks_like_plan(const fenced_block& b) {
  const std::string_view t = trim(b.content);
  return !t.empty() && t.front() == '{';
}

const std::set<std::string, std::less<>> code_tags = {"cuda", "cu", "cuh", "c++", "cpp", "cxx",
                                                      "cc",   "c",  "h",   "hpp", "ptx"};
const std::set<std::string, std::less<>> json_tags = {"json", "jsonc", "json5", "javascript", "js"};

// An expression in a plan: an integer or a string (parsed by kopt::config).
bool is_expr(const json& v) {
  return v.is_number_integer() || (v.is_string() && !v.get<std::string>().empty());
}

std::string where(std::size_t launch, std::string_view field) {
  return "launches[" + std::to_string(launch) + "]." + std::string(field);
}

// grid/block/cluster: a list of 1-3 expressions; a bare expression is taken
// as a one-element list (a common slip with one obvious meaning).
void check_dims(json& launch, std::size_t i, const char* key, bool required, extraction& x) {
  auto it = launch.find(key);
  if (it == launch.end()) {
    if (required)
      x.problems.push_back(where(i, key) + " is missing: give a list of 1 to 3 expressions");
    return;
  }
  if (is_expr(*it)) {
    *it = json::array({*it});
    x.notes.push_back(where(i, key) + " was a single expression; taken as a one-element list");
    return;
  }
  if (!it->is_array() || it->empty() || it->size() > 3) {
    x.problems.push_back(where(i, key) +
                         " must be a list of 1 to 3 expressions (integers or strings such as "
                         "\"ceil_div(tokens, 4)\")");
    return;
  }
  for (std::size_t d = 0; d < it->size(); ++d) {
    if (!is_expr((*it)[d])) {
      x.problems.push_back(where(i, key) + "[" + std::to_string(d) +
                           "] must be an integer or an expression string");
    }
  }
}

void check_arg(const json& a, std::size_t i, std::size_t k, extraction& x) {
  const std::string at = where(i, "args[" + std::to_string(k) + "]");
  if (!a.is_object()) {
    x.problems.push_back(at + " must be an object such as {\"tensor\": \"x\"}");
    return;
  }
  int kinds = 0;
  for (const char* kind : {"tensor", "workspace", "int", "scalar"})
    kinds += a.contains(kind) ? 1 : 0;
  if (kinds != 1) {
    x.problems.push_back(
        at + " must have exactly one of \"tensor\", \"workspace\", \"int\", \"scalar\"");
    return;
  }
  for (const char* kind : {"tensor", "workspace", "scalar"}) {
    if (a.contains(kind) && !(a[kind].is_string() && !a[kind].get<std::string>().empty())) {
      x.problems.push_back(at + "." + kind + " must be a name (a non-empty string)");
    }
  }
  if (a.contains("int")) {
    if (!is_expr(a["int"]))
      x.problems.push_back(at + ".int must be an integer or an expression string");
    const auto t = a.find("type");
    if (t == a.end() || !t->is_string() || (*t != "int32" && *t != "int64")) {
      x.problems.push_back(at + " needs \"type\": \"int32\" or \"int64\"");
    }
  }
  if (a.contains("scalar")) {
    const auto t = a.find("type");
    if (t == a.end() || !t->is_string() ||
        (*t != "float32" && *t != "float64" && *t != "int32" && *t != "int64")) {
      x.problems.push_back(at + " needs \"type\": one of float32, float64, int32, int64");
    }
  }
}

void check_plan(json& plan, const std::vector<std::string>& kernels, const std::string& code,
                const extract_options& opts, extraction& x) {
  // The source comes from the code block; a plan that carries its own would
  // be ambiguous, so drop it and say so.
  for (const char* k : {"source", "source_file"}) {
    if (plan.contains(k)) {
      plan.erase(k);
      x.notes.push_back(std::string("ignored \"") + k +
                        "\" in the launch plan; the source is the ```cuda block");
    }
  }
  std::vector<std::string> unknown;
  for (auto it = plan.begin(); it != plan.end(); ++it) {
    if (it.key() != "launches" && it.key() != "parameters" && it.key() != "workspaces" &&
        it.key() != "compile_options") {
      unknown.push_back(it.key());
    }
  }
  for (const std::string& k : unknown) {
    plan.erase(k);
    x.notes.push_back("ignored unknown launch plan key \"" + k.substr(0, 64) + "\"");
  }

  auto launches = plan.find("launches");
  if (launches == plan.end()) {
    x.problems.push_back("the launch plan has no \"launches\" list");
  } else if (!launches->is_array() || launches->empty()) {
    x.problems.push_back("\"launches\" must be a non-empty list of launch objects");
  } else if (launches->size() > opts.max_launches) {
    x.problems.push_back("\"launches\" has " + std::to_string(launches->size()) +
                         " entries; at most " + std::to_string(opts.max_launches) + " are allowed");
  } else {
    for (std::size_t i = 0; i < launches->size(); ++i) {
      json& l = (*launches)[i];
      if (!l.is_object()) {
        x.problems.push_back("launches[" + std::to_string(i) + "] must be an object");
        continue;
      }
      const auto k = l.find("kernel");
      if (k == l.end() || !k->is_string() || k->get<std::string>().empty()) {
        x.problems.push_back(where(i, "kernel") +
                             " must name a __global__ function of the ```cuda block");
      } else {
        const std::string name = k->get<std::string>();
        if (std::find(kernels.begin(), kernels.end(), name) == kernels.end()) {
          std::string have;
          for (const std::string& n : kernels) have += (have.empty() ? "" : ", ") + n;
          x.problems.push_back(
              where(i, "kernel") + " is \"" + name.substr(0, 128) +
              "\", which is not a __global__ function of the ```cuda block (it declares: " +
              (have.empty() ? "none" : have) + ")");
        } else {
          const auto pos = code.find(name);
          if (!is_extern_c_before(code, pos)) {
            x.problems.push_back(
                "kernel \"" + name +
                "\" must be declared extern \"C\" __global__ so that its name is not mangled");
          }
        }
      }
      check_dims(l, i, "grid", true, x);
      check_dims(l, i, "block", true, x);
      check_dims(l, i, "cluster", false, x);
      if (const auto s = l.find("shared_bytes"); s != l.end() && !is_expr(*s)) {
        x.problems.push_back(where(i, "shared_bytes") +
                             " must be an integer or an expression string");
      }
      const auto args = l.find("args");
      if (args == l.end() || !args->is_array()) {
        x.problems.push_back(where(i, "args") +
                             " is missing: list the kernel's arguments in order");
      } else {
        for (std::size_t a = 0; a < args->size(); ++a) check_arg((*args)[a], i, a, x);
      }
    }
  }

  if (const auto p = plan.find("parameters"); p != plan.end()) {
    if (!p->is_object()) {
      x.problems.push_back(
          "\"parameters\" must be an object mapping NAME to {\"values\": [...], \"default\": v}");
    } else {
      for (auto it = p->begin(); it != p->end(); ++it) {
        const std::string at = "parameters." + it.key().substr(0, 64);
        const json& v = it.value();
        const auto values = v.is_object() ? v.find("values") : v.end();
        if (!v.is_object() || values == v.end() || !values->is_array() || values->empty() ||
            !std::all_of(values->begin(), values->end(),
                         [](const json& e) { return e.is_number_integer(); })) {
          x.problems.push_back(at +
                               " must be {\"values\": [integers...], \"default\": one of them}");
          continue;
        }
        if (const auto d = v.find("default");
            d != v.end() && std::find(values->begin(), values->end(), *d) == values->end()) {
          x.problems.push_back(at + ".default is not one of its values");
        }
      }
    }
  }
  if (const auto w = plan.find("workspaces"); w != plan.end()) {
    if (!w->is_object()) {
      x.problems.push_back(
          "\"workspaces\" must be an object mapping NAME to {\"bytes\": expression}");
    } else {
      for (auto it = w->begin(); it != w->end(); ++it) {
        const std::string at = "workspaces." + it.key().substr(0, 64);
        const json& v = it.value();
        if (!v.is_object() || !v.contains("bytes") || !is_expr(v["bytes"])) {
          x.problems.push_back(at + " must be {\"bytes\": expression, \"zero_init\": true|false}");
        } else if (v.contains("zero_init") && !v["zero_init"].is_boolean()) {
          x.problems.push_back(at + ".zero_init must be true or false");
        }
      }
    }
  }
  if (const auto c = plan.find("compile_options"); c != plan.end()) {
    if (!c->is_array() ||
        !std::all_of(c->begin(), c->end(), [](const json& e) { return e.is_string(); })) {
      x.problems.push_back("\"compile_options\" must be a list of strings");
    }
  }
}

// Offset of the first byte that breaks UTF-8, or npos. The source ends up in
// JSON (store, prompts, exports), which cannot hold invalid UTF-8; found by
// fuzzing (nlohmann's dump throws type_error 316 on such a string).
std::size_t invalid_utf8_at(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    unsigned min = 0;
    unsigned cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, min = 0x80, cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min = 0x800, cp = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, cp = c & 0x07u;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

// Line and column of a byte offset, for parse errors the LLM can act on.
std::string line_col(std::string_view text, std::size_t byte) {
  byte = std::min(byte, text.size());
  std::size_t line = 1;
  std::size_t col = 1;
  for (std::size_t i = 0; i < byte; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

}  // namespace

std::vector<fenced_block> fenced_blocks(std::string_view text) {
  std::vector<fenced_block> out;
  std::size_t pos = 0;
  std::size_t line_no = 0;
  fenced_block* open = nullptr;
  char fence_char = 0;
  std::size_t fence_len = 0;
  while (pos <= text.size()) {
    auto nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t indent = 0;
    while (indent < line.size() && indent < 4 && line[indent] == ' ') ++indent;
    std::string_view rest = line.substr(indent);
    std::size_t run = 0;
    const char c = rest.empty() ? '\0' : rest[0];
    if (indent < 4 && (c == '`' || c == '~')) {
      while (run < rest.size() && rest[run] == c) ++run;
    }
    if (open == nullptr) {
      if (run >= 3) {
        std::string_view info = trim(rest.substr(run));
        if (!(c == '`' && info.find('`') != std::string_view::npos)) {
          const auto sp = info.find_first_of(" \t{");
          fenced_block b;
          b.info = lower(info.substr(0, sp == std::string_view::npos ? info.size() : sp));
          b.closed = false;
          b.line = line_no;
          out.push_back(std::move(b));
          open = &out.back();
          fence_char = c;
          fence_len = run;
        }
      }
    } else if (run >= fence_len && c == fence_char && trim(rest.substr(run)).empty()) {
      open->closed = true;
      open = nullptr;
    } else {
      open->content.append(line);
      open->content.push_back('\n');
    }
    if (nl == text.size()) break;
    pos = nl + 1;
  }
  return out;
}

std::vector<std::string> global_function_names(std::string_view source) {
  const std::string code = strip_comments(source);
  std::vector<std::string> names;
  std::size_t pos = 0;
  while ((pos = code.find("__global__", pos)) != std::string::npos) {
    const bool starts = pos == 0 || !is_ident_char(code[pos - 1]);
    pos += 10;
    if (!starts || (pos < code.size() && is_ident_char(code[pos]))) continue;
    // The name is the last identifier before the parameter list; attribute
    // macros with their own parentheses (__launch_bounds__(256)) are skipped.
    std::string last;
    std::size_t i = pos;
    while (i < code.size() && code[i] != ';' && code[i] != '{') {
      if (is_ident_char(code[i])) {
        const std::size_t b = i;
        while (i < code.size() && is_ident_char(code[i])) ++i;
        last.assign(code, b, i - b);
        continue;
      }
      if (code[i] == '(') {
        if (last == "__launch_bounds__" || last == "__cluster_dims__" || last == "__maxnreg__" ||
            last == "__align__" || last == "__attribute__" || last == "__declspec") {
          int depth = 0;
          do {
            if (code[i] == '(')
              ++depth;
            else if (code[i] == ')')
              --depth;
            ++i;
          } while (i < code.size() && depth > 0);
          last.clear();
          continue;
        }
        if (!last.empty() && std::isdigit(static_cast<unsigned char>(last[0])) == 0)
          names.push_back(last);
        break;
      }
      ++i;
    }
  }
  return names;
}

extraction extract_candidate(std::string_view answer, const extract_options& opts) {
  extraction x;
  if (answer.size() > opts.max_answer_bytes) {
    x.problems.push_back("the answer is " + std::to_string(answer.size()) + " bytes; at most " +
                         std::to_string(opts.max_answer_bytes) + " are accepted");
    return x;
  }
  const std::string text = strip_reasoning(answer, x.notes);
  const std::vector<fenced_block> blocks = fenced_blocks(text);

  std::vector<const fenced_block*> code_blocks;    // candidates for the device code
  std::vector<const fenced_block*> kernel_blocks;  // ...that declare a __global__
  std::vector<const fenced_block*> json_blocks;
  for (const fenced_block& b : blocks) {
    const bool tagged_json = json_tags.count(b.info) != 0;
    const bool has_global = b.content.find("__global__") != std::string::npos;
    if (tagged_json || (!has_global && json_looks_like_plan(b))) {
      json_blocks.push_back(&b);
    } else if (code_tags.count(b.info) != 0 || has_global) {
      code_blocks.push_back(&b);
      if (has_global) kernel_blocks.push_back(&b);
    }
  }

  // Device code.
  const fenced_block* code = nullptr;
  if (kernel_blocks.empty()) {
    if (!code_blocks.empty()) {
      x.problems.push_back("the ```cuda block (line " + std::to_string(code_blocks.back()->line) +
                           ") declares no __global__ kernel");
    } else if (text.find("__global__") != std::string::npos) {
      x.problems.push_back("the device code is not in a fenced block: put it in one ```cuda block");
    } else {
      x.problems.push_back("no ```cuda block with the device code was found");
    }
  } else {
    code = kernel_blocks.back();
    if (kernel_blocks.size() > 1) {
      x.notes.push_back("found " + std::to_string(kernel_blocks.size()) +
                        " code blocks with kernels; used the last one (line " +
                        std::to_string(code->line) + ")");
    }
    if (code->info != "cuda" && code->info != "cu") {
      x.notes.push_back("the code block is tagged \"" +
                        (code->info.empty() ? std::string("(none)") : code->info.substr(0, 32)) +
                        "\", not \"cuda\"; used it anyway");
    }
    if (!code->closed) {
      x.problems.push_back(
          "the ```cuda block that starts on line " + std::to_string(code->line) +
          " is never closed (the answer may have been cut off): close it with ```");
    }
    if (const auto bad = invalid_utf8_at(code->content); bad != std::string_view::npos) {
      x.problems.push_back("the device code is not valid UTF-8 (at " +
                           line_col(code->content, bad) +
                           " of the ```cuda block); use plain ASCII");
    }
    if (code->content.size() > opts.max_source_bytes) {
      x.problems.push_back("the device code is " + std::to_string(code->content.size()) +
                           " bytes; at most " + std::to_string(opts.max_source_bytes) +
                           " are accepted");
    }
  }

  // Launch plan.
  std::optional<json> plan;
  std::string plan_error;
  for (auto it = json_blocks.rbegin(); it != json_blocks.rend() && !plan; ++it) {
    const fenced_block& b = **it;
    if (!b.closed) {
      if (plan_error.empty()) {
        plan_error = "the ```json block that starts on line " + std::to_string(b.line) +
                     " is never closed (the answer may have been cut off)";
      }
      continue;
    }
    try {
      json j = json::parse(b.content, nullptr, true, /*ignore_comments=*/true);
      if (j.is_object() && j.contains("launches")) {
        plan = std::move(j);
        if (json_blocks.size() > 1) {
          x.notes.push_back("found " + std::to_string(json_blocks.size()) +
                            " JSON blocks; used the last launch plan (line " +
                            std::to_string(b.line) + ")");
        }
      } else if (plan_error.empty()) {
        plan_error = "the ```json block on line " + std::to_string(b.line) +
                     " is not a launch plan: it must be an object with a \"launches\" list";
      }
    } catch (const json::parse_error& e) {
      if (plan_error.empty()) {
        std::string what = e.what();
        // nlohmann's message repeats the offending text; keep it short.
        if (what.size() > 300) what.resize(300);
        plan_error = "the ```json block on line " + std::to_string(b.line) +
                     " is not valid JSON at " + line_col(b.content, e.byte == 0 ? 0 : e.byte - 1) +
                     " of the block (" + what + ")";
      }
    } catch (const json::exception& e) {
      // Not a syntax error but still unusable, e.g. a number beyond double
      // (out_of_range 406): found by fuzzing; it must not escape.
      if (plan_error.empty()) {
        std::string what = e.what();
        if (what.size() > 300) what.resize(300);
        plan_error = "the ```json block on line " + std::to_string(b.line) + " cannot be read (" +
                     what + ")";
      }
    }
  }
  if (!plan) {
    x.problems.push_back(
        plan_error.empty()
            ? "no launch plan was found: add one ```json block with an object holding \"launches\""
            : plan_error);
  }

  if (code != nullptr && plan) {
    const std::vector<std::string> kernels = global_function_names(code->content);
    check_plan(*plan, kernels, strip_comments(code->content), opts, x);
  }
  if (x.problems.empty() && code != nullptr && plan) {
    (*plan)["source"] = code->content;
    x.candidate = std::move(plan);
  }
  return x;
}

std::string extraction::feedback() const {
  std::string out = "Your answer could not be used:\n";
  for (const std::string& p : problems) out += "- " + p + "\n";
  out +=
      "Answer with exactly one ```cuda block holding the device code (kernels declared extern "
      "\"C\" "
      "__global__) and one ```json block holding the launch plan: {\"launches\": [{\"kernel\", "
      "\"grid\", "
      "\"block\", \"shared_bytes\", \"args\"}], \"parameters\": {...}, \"workspaces\": {...}}.\n";
  return out;
}

}  // namespace kopt::llm
