// What the CLI commands share with the MCP tools (cli/mcp.cpp): each tool is
// a thin layer over one of these, so `kopt validate --json` and the MCP
// operator_validate tool, `kopt prompt render` and operator_brief, `kopt kb
// search` and kb_search, `kopt status/log/show` and campaign_status,
// campaign_log and candidate_show say the same things. Each function lives
// in the command's file named beside it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/context.hpp"
#include "config/operator.hpp"
#include "kb/index.hpp"
#include "kb/library.hpp"
#include "prompts/context.hpp"
#include "store/store.hpp"

namespace kopt::cli {

// validate.cpp: one diagnostic as JSON (level, file, line, column, path,
// message, text), and one file's report as `kopt validate --json` prints it.
nlohmann::json diagnostic_json(const config::diagnostic& d);
nlohmann::json validation_json(const std::string& file, const config::load_result& r);

// prompt.cpp: the prompt `kopt prompt render` prints, built by the campaign
// session's prompt_builder (what a campaign sends, before dropout).
struct prompt_request {
  std::string config_file;
  std::string config_text;  // when set: the config itself (config_file only labels it)
  std::string template_name;  // empty: the one a campaign would use (first, revise, broaden)
  std::vector<std::string> drop;
  std::string prompts_dir;
  std::string gpu = "H200";
  std::string peaks_file;
  std::string parent;             // seed, baseline, reference; default: seed, else reference
  std::int64_t candidate_id = 0;  // a stored candidate as the parent (wins over parent)
  std::vector<std::string> kb_dirs;  // knowledge-base directories beside kopt's own
  // Knowledge-base snippets retrieved for the parent's diagnosis, as the
  // campaign session retrieves them; false leaves them out.
  bool with_snippets = true;
};
struct rendered_prompt {
  std::string operator_name, template_name, parent;
  bool measurements = false;
  std::string system, user;
  std::vector<std::string> present_items, dropped_items;  // user's, then system's
  std::vector<std::string> user_present, user_dropped;    // the user message's alone
  nlohmann::json to_json() const;
};
// Throws kopt::config_error (invalid config, with the diagnostics in the
// message) or kopt::not_found_error (no such stored candidate).
rendered_prompt render_prompt(const prompt_request& rq, const context& ctx);

// kb.cpp: the knowledge base as `kopt kb` loads it (extra directories, then
// kopt's own unless no_builtin), one document as JSON, a retrieval as JSON
// with its query, and the knowledge base's operator class for an op_type.
kb::load_result load_knowledge_base(const std::vector<std::string>& dirs, bool no_builtin);
nlohmann::json kb_document_json(const kb::document& d);
nlohmann::json kb_search_json(const kb::index& idx, const kb::query& q);
std::string kb_operator_class(const config::operator_config& op);

// inspect.cpp: `kopt status --json`, `kopt log --json` and `kopt show
// candidate --json`. Throw kopt::not_found_error for an unknown id.
nlohmann::json campaign_status_json(store::store& s, store::row_id campaign_id);
nlohmann::json campaign_log_json(store::store& s, store::row_id campaign_id);
nlohmann::json candidate_show_json(store::store& s, store::row_id candidate_id);

}  // namespace kopt::cli
