#include "campaign/session.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "campaign/agent_source.hpp"
#include "common/error.hpp"
#include "kb/index.hpp"
#include "kb/library.hpp"
#include "llm/client.hpp"
#include "llm/provider.hpp"
#include "llm/router.hpp"
#include "prompts/context.hpp"
#include "prompts/engine.hpp"
#include "runner/llm_recorder.hpp"

namespace kopt::campaign {

using json = nlohmann::json;

namespace {

// GPU facts for the prompts: the peak table's entry for the device the
// evaluator reports (or the configured GPU), overlaid with what the device
// itself says. Without templates the LLM gets the short built-in prompt.
std::optional<prompt_setup> make_prompt_setup(const session_options& o, const json& device) {
  prompt_setup p;
  const std::string gpu = device.value("name", std::string());
  try {
    if (o.peaks_file.empty()) throw kopt::config_error("no GPU peak table found");
    std::ifstream in(o.peaks_file);
    if (!in) throw kopt::config_error("cannot read " + o.peaks_file);
    const json table = json::parse(in);
    try {
      p.gpu = prompts::gpu_facts_from_table(table, gpu.empty() ? o.gpu_name : gpu);
    } catch (const kopt::error&) {
      // A device the table does not know (or a fake one): the configured GPU.
      if (gpu.empty()) throw;
      p.gpu = prompts::gpu_facts_from_table(table, o.gpu_name);
    }
  } catch (const std::exception& e) {
    spdlog::warn("prompt GPU facts: {}", e.what());
    p.gpu.name = gpu.empty() ? o.gpu_name : gpu;
  }
  p.gpu.arch = device.value("arch", p.gpu.arch);
  p.gpu.sm_count = device.value("sm_count", p.gpu.sm_count);
  p.gpu.l2_bytes = device.value("l2_bytes", p.gpu.l2_bytes);
  try {
    p.template_dir = prompts::default_template_dir(o.prompts_dir);
  } catch (const kopt::error& e) {
    spdlog::warn("prompt templates not found ({}): the LLM gets a short built-in prompt", e.what());
    return std::nullopt;
  }
  return p;
}

// How many in-order answers of a replay transcript this campaign has
// already used: the calls of every iteration whose proposals are stored (a
// resumed campaign never asks for those again). A new process starts the
// transcript at its first line, so without skipping these a resumed
// campaign would be served the answers it already had and would not reach
// the result of an uninterrupted run. Calls of an iteration that was killed
// before its proposals were stored are not counted: that iteration asks
// again and gets the same lines. Each iteration makes at most `k` calls; a
// killed and replayed iteration has its calls recorded twice, hence the cap.
// Refused calls never reached the provider, and the replay provider answers
// `parse_error` (bad_response) only when it had no line left to serve.
std::int64_t replay_lines_used(store::store& db, store::row_id cid, std::int64_t k) {
  std::map<store::row_id, std::int64_t> number_of;  // iteration row -> number
  for (const auto& it : db.iterations_of(cid)) number_of[it.id] = it.number;
  std::set<std::int64_t> proposed;
  for (const auto& e : db.events_of(cid))
    if (e.kind == "proposals") proposed.insert(e.data.value("iteration", std::int64_t{-1}));
  std::map<std::int64_t, std::int64_t> calls;
  for (const auto& c : db.llm_calls_of(cid)) {
    if (c.status == "refused" || c.status == "parse_error") continue;
    std::optional<std::int64_t> n;
    if (c.iteration_id) {
      if (auto it = number_of.find(*c.iteration_id); it != number_of.end()) n = it->second;
    } else if (const std::string tag = c.request.value("tag", "");
               tag.rfind("iteration ", 0) == 0) {
      // Calls stored before calls were linked to their iteration row.
      try {
        n = std::stoll(tag.substr(10));
      } catch (const std::exception&) {
      }
    }
    if (n && proposed.count(*n)) ++calls[*n];
  }
  std::int64_t used = 0;
  for (const auto& [n, count] : calls) used += std::min(count, std::max<std::int64_t>(k, 1));
  return used;
}

}  // namespace

std::string kb_operator_class(const config::operator_config& op) {
  if (!op.kb_class.empty()) return op.kb_class == "any" ? "" : op.kb_class;
  const std::string t = op.op_type;
  if (kb::is_operator_class(t)) return t;
  auto has = [&](const char* s) { return t.find(s) != std::string::npos; };
  if (has("norm")) return "normalization";
  if (has("softmax") && has("moe")) return "moe";
  if (has("softmax")) return "softmax";
  if (has("attention") || has("attn")) return "attention";
  if (has("quant")) return "quantization";
  if (has("rope") || has("rotary")) return "elementwise";
  if (has("moe") || has("expert")) return "moe";
  if (has("topk") || has("top_k")) return "topk";
  if (has("cache")) return "kv-cache";
  if (has("gemv")) return "gemv";
  if (has("gemm") || has("matmul") || has("_mm") || t == "mm") return "gemm";
  if (has("sort") || has("scan") || has("align")) return "sort-scan";
  if (has("conv")) return "convolution";
  if (has("rule") || has("recurr") || has("ssm")) return "recurrent";
  if (has("reduc")) return "reduction";
  return "";  // any
}

// --- prompts -------------------------------------------------------------------

prompt_builder::prompt_builder(const config::operator_config& op, const session_options& o,
                               const json& device, std::vector<prompt_item> directives)
    : op_(op),
      setup_(make_prompt_setup(o, device)),
      directives_(std::move(directives)),
      kb_class_(kb_operator_class(op)) {
  // A broken knowledge base is reported, not fatal: prompts then carry no
  // snippets, and `kopt kb lint` says what is wrong.
  auto lr = kb::load_directories(kb::directories(o.kb_directories, true));
  for (const auto& d : lr.diagnostics)
    if (d.level == kb::diagnostic::severity::error)
      spdlog::warn("knowledge base: {}", d.to_string());
  if (!lr.documents.empty()) kb_ = std::make_shared<kb::index>(std::move(lr.documents));
}

prompt_builder::~prompt_builder() = default;

std::vector<prompt_item> prompt_builder::snippets(const prompt_context& ctx) const {
  std::vector<prompt_item> out;
  if (!kb_) return out;
  // The classes of the heaviest workloads' findings, most severe first;
  // before any measurement, a query by operator class alone.
  std::vector<std::pair<double, std::string>> classes;
  std::vector<const config::workload*> wls;
  for (const auto& w : op_.workloads) wls.push_back(&w);
  std::stable_sort(wls.begin(), wls.end(), [](auto* a, auto* b) { return a->weight > b->weight; });
  for (const auto* w : wls) {
    auto it = ctx.parent_results.find(w->id);
    if (it == ctx.parent_results.end()) continue;
    for (const auto& f : findings_of(it->second.diagnosis))
      classes.emplace_back(w->weight * f.value("severity", 0.0), f.value("class", ""));
  }
  std::stable_sort(classes.begin(), classes.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  kb::query q;
  for (const auto& [score, c] : classes)
    if (!c.empty() && kb::is_bottleneck_class(c) &&
        std::find(q.bottlenecks.begin(), q.bottlenecks.end(), c) == q.bottlenecks.end())
      q.bottlenecks.push_back(c);
  q.operator_class = kb_class_;
  q.arch = "sm_90a";
  try {
    for (const auto& s : kb_->retrieve(q).snippets) {
      // The knowledge base heads each snippet with "### TITLE [kb:ID]"; that
      // line becomes the title the template prints, so it is printed once.
      std::string title = s.title, text = s.text;
      if (text.rfind("### ", 0) == 0) {
        const auto nl = text.find('\n');
        title = text.substr(4, nl == std::string::npos ? std::string::npos : nl - 4);
        text = nl == std::string::npos ? std::string() : text.substr(nl + 1);
      }
      out.push_back({"snippet:" + s.id, "snippet", title + "\n" + text, true});
    }
  } catch (const kopt::error& e) {
    spdlog::warn("knowledge retrieval: {}", e.what());
  }
  return out;
}

composed_prompt prompt_builder::render(prompt_context ctx, const std::set<std::string>& dropped,
                                       const std::string& template_name) const {
  if (!setup_)
    throw kopt::config_error(
        "no prompt template directory found (set KOPT_PROMPTS_DIR or --prompts-dir)");
  if (!ctx.op) ctx.op = &op_;
  std::vector<prompt_item> items = directives_;
  for (auto& s : snippets(ctx)) items.push_back(std::move(s));
  items.insert(items.end(), ctx.items.begin(), ctx.items.end());
  ctx.items.clear();
  for (auto& it : items)
    if (!dropped.count(it.id)) ctx.items.push_back(std::move(it));
  return compose_prompt(ctx, *setup_, dropped, template_name);
}

// --- the session ------------------------------------------------------------------

session::session(store::store& db, store::row_id campaign_id, const config::operator_config& op,
                 session_options o, const evaluator_factory& make_evaluator)
    : db_(db), op_(op), o_(std::move(o)) {
  const auto c = db_.find_campaign(campaign_id);
  if (!c) throw kopt::not_found_error(fmt::format("campaign {} does not exist", campaign_id));
  camp_ = *c;
  provider_ = o_.provider.empty() ? camp_.provider : o_.provider;
  settings_ = loop_settings::from_campaign(camp_);
  if (o_.base_seed) settings_.base_seed = *o_.base_seed;
  try {
    ev_ = make_evaluator(op_, evaluator_spec{o_.counters});
  } catch (const kopt::config_error&) {
    throw;
  } catch (const kopt::error& e) {
    throw evaluator_unavailable(e.what());
  }
  if (!ev_) throw kopt::error("campaign session: the evaluator factory gave no evaluator");
  if (provider_ == "autotune") {
    source_ = std::make_unique<autotune_source>();
    return;
  }
  if (provider_ == "agent") {
    // An external agent proposes (docs/agents.md): its brief is the prompt
    // an LLM would get, knowledge-base snippets included; no LLM client.
    prompts_ = std::make_unique<prompt_builder>(op_, o_, ev_->device(), settings_.directives);
    source_ = std::make_unique<agent_source>(db_, camp_.id, prompts_->setup());
    return;
  }

  // The provider section, or several models under llm.models
  // (docs/providers.md): the router picks each call's model.
  nlohmann::json section = o_.llm_section.is_object() ? o_.llm_section : nlohmann::json::object();
  if (!section.contains("models")) {
    section["provider"] = provider_;
    if (section.value("model", std::string()).empty()) section["model"] = camp_.model;
  }
  const llm::router_config rc = llm::parse_router_config(section, o_.llm_base_dir);
  // What is left of the campaign's LLM budget; the loop checks the total too.
  llm::budget_limits bl;
  if (camp_.budget.tokens)
    bl.tokens = std::max<std::int64_t>(0, *camp_.budget.tokens - camp_.spent_tokens);
  if (camp_.budget.cost_usd)
    bl.cost_usd = std::max(0.0, *camp_.budget.cost_usd - camp_.spent_cost_usd);
  budget_ = std::make_unique<llm::budget>(bl);
  recorder_ = std::make_unique<runner::store_call_recorder>(db_, camp_.id);
  prompts_ = std::make_unique<prompt_builder>(op_, o_, ev_->device(), settings_.directives);
  if (rc.models.size() > 1) {
    router_ =
        llm::router::from_config(rc, llm::client_options{budget_.get(), recorder_.get(), {}, 4});
    auto src = std::make_unique<llm_source>(*router_, rc.models.front().cfg.max_tokens,
                                            prompts_->setup(), rc.diversity);
    src->restore(db_, camp_.id);  // what earlier steps and runs of this campaign learnt
    source_ = std::move(src);
    return;
  }
  const llm::provider_config pc = rc.models.front().cfg;
  auto backend = llm::make_provider(pc);
  if (provider_ == "replay") {
    const std::int64_t used = replay_lines_used(
        db_, camp_.id, static_cast<std::int64_t>(settings_.candidates_per_iteration));
    if (used > 0) {
      // Served in order to a prompt no line is keyed to: moves past them.
      llm::request skip;
      skip.messages.push_back(
          {"user", "kopt: skipping a transcript line already used by this campaign"});
      for (std::int64_t i = 0; i < used; ++i) (void)backend->complete(skip);
      spdlog::info(
          "campaign {}: replay transcript: skipped the {} answer(s) this campaign already used",
          camp_.id, used);
    }
  }
  client_ = std::make_unique<llm::llm_client>(
      std::move(backend),
      llm::client_options{budget_.get(), recorder_.get(), pc.prices, pc.max_concurrency});
  source_ = std::make_unique<llm_source>(*client_, pc.max_tokens, prompts_->setup(), rc.diversity);
}

session::~session() = default;

run_result session::run(loop_hooks hooks, const run_limits& lim) {
  if (prompts_) {
    // Only LLM sources read snippets; the loop asks at each iteration.
    const prompt_builder* pb = prompts_.get();
    hooks.snippets = [pb](const prompt_context& ctx) { return pb->snippets(ctx); };
  }
  if (auto* src = dynamic_cast<llm_source*>(source_.get())) {
    // The router (bandit, escalation) learns which model's answers were
    // promoted, after the caller's own progress hook.
    auto feedback = model_feedback(db_, camp_.id, *src);
    hooks.on_progress = [caller = std::move(hooks.on_progress), feedback](const progress& p) {
      if (caller) caller(p);
      feedback(p);
    };
  }
  campaign_loop loop(db_, camp_.id, op_, *source_, *ev_, settings_, std::move(hooks));
  return loop.run(lim);
}

}  // namespace kopt::campaign
