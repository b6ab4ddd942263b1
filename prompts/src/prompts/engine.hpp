// kopt's prompt template engine: a deliberately small, HTML-free language
// (documented in docs/prompts.md) that renders the prompt templates under
// prompts/templates/ against a nlohmann::json context. It exists so that the
// wording of prompts is data that can be reviewed, diffed and customized
// without recompiling, while the renderer stays strict: an unknown variable
// or an unclosed block is an error that names the template, line and column,
// never a silently empty prompt. Optional items (`{% optional ID %}`) are how
// optimization dropout removes prompt context: the caller passes the IDs to
// drop and the result says which optional items were present and which were
// dropped, so that an iteration can record exactly what the model saw.
// `{% cache_breakpoint %}` renders nothing and records where the text above
// it ends, so that providers with explicit prompt caching (Anthropic) can
// mark the stable prefix.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace kopt::prompts {

// A template that does not parse or cannot be rendered against a context.
// what() reads "template 'NAME' at LINE:COL: MESSAGE".
class template_error : public kopt::error {
 public:
  template_error(std::string template_name, int line, int column, const std::string& message);
  const std::string& template_name() const noexcept { return template_name_; }
  int line() const noexcept { return line_; }
  int column() const noexcept { return column_; }
  const std::string& message() const noexcept { return message_; }

 private:
  std::string template_name_;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

struct rendered {
  std::string text;
  // Optional item IDs in the order they were met; an item met twice is
  // listed once. Items inside a dropped item or an untaken branch are in
  // neither list: they were never part of the prompt.
  std::vector<std::string> present_items;
  std::vector<std::string> dropped_items;
  // Byte offsets of the {% cache_breakpoint %} tags met: where a prefix
  // that stays the same from call to call ends (llm::message::cache_breaks).
  std::vector<std::size_t> cache_breaks;
  nlohmann::json to_json() const;
};

namespace detail {
struct node;
}

// One parsed template. Parsing checks the structure (every block closed,
// tags well-formed); names are checked when rendering, against the context.
class template_text {
 public:
  template_text(std::string name, std::string_view text);
  ~template_text();
  template_text(template_text&&) noexcept;
  template_text& operator=(template_text&&) noexcept;
  const std::string& name() const noexcept { return name_; }

 private:
  friend class template_set;
  friend struct renderer;
  std::string name_;
  std::vector<std::unique_ptr<detail::node>> nodes_;
};

// Templates by name, so that `{% include NAME %}` resolves within the set.
class template_set {
 public:
  // Parses `text` as template `name`, replacing one of the same name.
  void add(const std::string& name, std::string_view text);
  // Every *.md and *.txt file of `dir`; the name is the file's stem
  // ("first.md" -> "first"). Throws kopt::config_error when the directory
  // cannot be read, template_error when a template does not parse.
  static template_set load_directory(const std::filesystem::path& dir);

  bool contains(const std::string& name) const noexcept;
  std::vector<std::string> names() const;

  rendered render(const std::string& name, const nlohmann::json& context,
                  const std::set<std::string>& dropped = {}) const;

 private:
  std::map<std::string, template_text, std::less<>> templates_;
  friend struct renderer;
};

// Where the built-in templates are: $KOPT_PROMPTS_DIR, then the source
// tree's prompts/templates (a build-tree kopt), then
// <exe>/../share/kopt/prompts (an installed kopt). `override_dir` (the CLI's
// --prompts-dir) wins over all of them. Throws kopt::config_error when none
// exists.
std::filesystem::path default_template_dir(const std::filesystem::path& override_dir = {});

// Renders `template_name` from the default template directory.
rendered render(const std::string& template_name, const nlohmann::json& context,
                const std::set<std::string>& dropped = {});

}  // namespace kopt::prompts
