// One campaign session: the single place that builds everything a campaign
// needs from its stored record and the caller's settings, so that `kopt
// run`, the daemon's step and `kopt prompt render` cannot drift apart. It
// builds the candidate source (autotune, or an LLM client with kopt's prompt
// templates, knowledge-base retrieval keyed on the parent's diagnosis, the
// store recorder and what is left of the campaign's LLM budget), skips the
// replay answers a resumed campaign already used, and obtains the evaluator
// through a factory the caller injects (a local worker, a leased GPU, the
// fake one). Callers add only their own hooks: progress, yield and stop.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "campaign/loop.hpp"
#include "campaign/sources.hpp"
#include "campaign/types.hpp"
#include "common/error.hpp"
#include "config/operator.hpp"
#include "store/store.hpp"

namespace kopt::kb {
class index;
}
namespace kopt::llm {
class budget;
class llm_client;
class router;
}  // namespace kopt::llm
namespace kopt::runner {
class store_call_recorder;
}

namespace kopt::campaign {

// What the session asks of whoever supplies the evaluator: the counters
// tier its full and verify stages collect (none, default, full).
struct evaluator_spec {
  std::string counters = "default";
};

// The evaluator could not be had (no GPU, no worker): what the factory
// threw, told apart from the session's other errors so that `kopt run` can
// fall back to compile checks.
struct evaluator_unavailable : kopt::error {
  using kopt::error::error;
};

// A local worker for `kopt run`, a leased GPU for the daemon, the fake
// evaluator for tests. May throw kopt::error (no GPU, no worker): the
// session's constructor throws it on as evaluator_unavailable.
using evaluator_factory = std::function<std::unique_ptr<evaluator>(const config::operator_config&,
                                                                   const evaluator_spec&)>;

// The caller's settings. Both the CLI and the daemon fill these with the
// same defaults (empty = kopt's built-in lookup).
struct session_options {
  std::string provider;        // empty: the campaign's own
  nlohmann::json llm_section;  // the provider's section (docs/providers.md); null: its defaults
  std::filesystem::path llm_base_dir;                 // relative paths in that section
  std::vector<std::filesystem::path> kb_directories;  // the user's, after kopt's own
  std::string prompts_dir;        // template directory; empty: the default lookup
  std::string peaks_file;         // resolved GPU peak table; empty: device facts only
  std::string gpu_name = "H200";  // peak-table GPU when the evaluator reports none
  std::string counters = "default";
  std::optional<std::uint64_t> base_seed;  // inputs of screen/full stages; empty: the loop's
};

// Where a session's knowledge retrieval starts: the knowledge base's
// operator class of a config: its `kb_class` when set (checked by
// validation), else op_type itself when it is a class name, else substring
// rules on op_type (docs/knowledge-base.md lists them); "" = any.
std::string kb_operator_class(const config::operator_config& op);

// The prompt half of a session: GPU facts and templates, the loop's
// directives and knowledge retrieval. A session builds its LLM source with
// one; `kopt prompt render` uses one directly, so that what it shows is what
// a campaign sends.
class prompt_builder {
 public:
  prompt_builder(const config::operator_config& op, const session_options& o,
                 const nlohmann::json& device, std::vector<prompt_item> directives);
  ~prompt_builder();
  const std::optional<prompt_setup>& setup() const noexcept { return setup_; }
  // Knowledge-base snippets for a context, keyed on its parent's diagnosis.
  std::vector<prompt_item> snippets(const prompt_context& ctx) const;
  // Exactly what the campaign would send for `ctx` before dropout: the
  // loop's directives and the retrieved snippets (both added here) after the
  // items already in ctx, minus the `dropped` ids (which also drop the
  // templates' own optional blocks, e.g. "measurements"). Throws
  // kopt::config_error when no template directory was found.
  // `template_name` overrides the loop's choice (first, revise, broaden).
  composed_prompt render(prompt_context ctx, const std::set<std::string>& dropped = {},
                         const std::string& template_name = {}) const;

 private:
  const config::operator_config& op_;
  std::optional<prompt_setup> setup_;
  std::vector<prompt_item> directives_;
  std::shared_ptr<kb::index> kb_;
  std::string kb_class_;
};

class session {
 public:
  session(store::store& db, store::row_id campaign_id, const config::operator_config& op,
          session_options o, const evaluator_factory& make_evaluator);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  const store::campaign_record& campaign() const noexcept { return camp_; }
  const std::string& provider() const noexcept { return provider_; }
  evaluator& eval() noexcept { return *ev_; }
  candidate_source& source() noexcept { return *source_; }
  const loop_settings& settings() const noexcept { return settings_; }
  // The LLM source's prompts; null for autotune.
  const prompt_builder* prompts() const noexcept { return prompts_.get(); }
  // Runs the loop with the caller's hooks; the knowledge hook is the session's.
  run_result run(loop_hooks hooks, const run_limits& lim = {});

 private:
  store::store& db_;
  const config::operator_config& op_;
  session_options o_;
  store::campaign_record camp_;
  std::string provider_;
  loop_settings settings_;
  std::unique_ptr<evaluator> ev_;
  std::unique_ptr<prompt_builder> prompts_;
  std::unique_ptr<llm::budget> budget_;
  std::unique_ptr<runner::store_call_recorder> recorder_;
  std::unique_ptr<llm::llm_client> client_;
  std::unique_ptr<llm::router> router_;  // several models (llm.models); before the source
  std::unique_ptr<candidate_source> source_;
};

}  // namespace kopt::campaign
