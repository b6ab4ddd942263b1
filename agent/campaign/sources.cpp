#include "campaign/sources.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <random>
#include <set>

#include "campaign/call_plan.hpp"
#include "campaign/loop.hpp"
#include "common/hash.hpp"
#include "llm/extract.hpp"
#include "prompts/context.hpp"
#include "prompts/engine.hpp"
#include "store/store.hpp"

namespace kopt::campaign {

using json = nlohmann::json;

namespace {

struct dim {
  std::string name;
  std::vector<std::int64_t> values;
};

std::vector<dim> dims_of(const json& candidate) {
  std::vector<dim> d;
  const json parameters_j = candidate.value("parameters", json::object());
  for (const auto& [k, v] : parameters_j.items())
    d.push_back({k, v.value("values", std::vector<std::int64_t>{})});
  return d;
}

std::string point_note(const param_values& p) {
  std::string s = "autotune:";
  for (const auto& [k, v] : p) s += fmt::format(" {}={}", k, v);
  return s;
}

}  // namespace

source_answer autotune_source::propose(const prompt_context& ctx) {
  source_answer out;
  const auto dims = dims_of(ctx.parent);
  const std::uint64_t n = space_size(ctx.parent);
  if (dims.empty() || n <= 1) return out;
  std::set<std::string> taken;
  auto offer = [&](const param_values& p) {
    json v = with_point(ctx.parent, p);
    const auto key = content_key(v);
    if (taken.count(key) || (ctx.already_tried && ctx.already_tried(key))) return false;
    taken.insert(key);
    out.proposals.push_back({std::move(v), store::candidate_origin::tuned, point_note(p)});
    return true;
  };
  if (n <= exhaustive_limit_) {
    // Every untried point, in a fixed order: the space is small enough that
    // one batch measures it completely, and the cache skips what is known.
    std::vector<std::size_t> idx(dims.size(), 0);
    for (std::uint64_t c = 0; c < n; ++c) {
      param_values p;
      for (std::size_t d = 0; d < dims.size(); ++d) p[dims[d].name] = dims[d].values[idx[d]];
      offer(p);
      for (std::size_t d = dims.size(); d-- > 0;) {
        if (++idx[d] < dims[d].values.size()) break;
        idx[d] = 0;
      }
    }
    return out;
  }
  std::mt19937_64 rng(ctx.seed);
  const param_values base = ctx.parent_point.empty() ? default_point(ctx.parent) : ctx.parent_point;
  std::vector<param_values> neighbours;
  for (const auto& d : dims) {
    auto it = base.find(d.name);
    const auto pos = it == base.end()
                         ? d.values.end()
                         : std::find(d.values.begin(), d.values.end(), it->second);
    if (pos == d.values.end()) continue;
    const auto i = static_cast<std::size_t>(pos - d.values.begin());
    for (std::size_t j : {i - 1, i + 1}) {
      if (j >= d.values.size()) continue;  // i - 1 wraps for i == 0
      param_values p = base;
      p[d.name] = d.values[j];
      neighbours.push_back(p);
    }
  }
  std::shuffle(neighbours.begin(), neighbours.end(), rng);
  for (const auto& p : neighbours) {
    if (out.proposals.size() >= ctx.k) break;
    offer(p);
  }
  // A local optimum (every neighbour tried): random restarts in the space.
  for (std::size_t attempt = 0; out.proposals.size() < ctx.k && attempt < 32 * ctx.k; ++attempt) {
    param_values p;
    for (const auto& d : dims) {
      std::uniform_int_distribution<std::size_t> u(0, d.values.size() - 1);
      p[d.name] = d.values[u(rng)];
    }
    offer(p);
  }
  return out;
}

std::string placeholder_prompt(const prompt_context& ctx) {
  std::string s;
  if (ctx.op)
    s += fmt::format("Operator {} ({}): {}\n", ctx.op->name, ctx.op->op_type, ctx.op->description);
  s += fmt::format("Iteration {}, strategy {}.\n", ctx.iteration, ctx.strategy);
  json plan = ctx.parent;
  plan.erase("source");
  s += "Current kernel:\n```cuda\n" + ctx.parent.value("source", "") + "\n```\n";
  s += "Its launch plan:\n```json\n" + plan.dump(2) + "\n```\n";
  if (!ctx.parent_results.empty()) {
    s += "Measurements (median per workload):\n";
    for (const auto& [w, r] : ctx.parent_results) {
      s += fmt::format("- {}: {} {:.1f} us", w, r.status, r.median_ns / 1e3);
      if (r.sol_fraction) s += fmt::format(", {:.0f} % of speed of light", 100 * *r.sol_fraction);
      s += "\n";
    }
  }
  if (!ctx.items.empty()) {
    s += "Context:\n";
    for (const auto& it : ctx.items) s += "- " + it.text + "\n";
  }
  if (ctx.different_algorithm)
    s += "Progress has stalled: propose a structurally different algorithm, not a tweak.\n";
  s += "Answer with one ```cuda block (device code, extern \"C\" __global__ kernels) and one "
       "```json block with the launch plan.\n";
  return s;
}

composed_prompt compose_prompt(const prompt_context& ctx, const prompt_setup& setup,
                               const std::set<std::string>& dropped,
                               const std::string& template_name) {
  if (!ctx.op) throw kopt::error("compose_prompt: no operator");
  prompts::prompt_inputs in;
  in.op = ctx.op;
  in.gpu = setup.gpu;
  auto parent = config::load_candidate_text(ctx.parent.dump(), "parent", ctx.op->file.parent_path(), *ctx.op);
  if (parent.ok()) {
    in.parent = *parent.cand;
    in.parent_label = !ctx.parent_label.empty() ? ctx.parent_label
                      : ctx.parent_id           ? fmt::format("candidate {}", ctx.parent_id)
                                                : "seed";
  }
  // Measurements in the operator's workload order, and the diagnosis of the
  // workloads that weigh most (one finding per class, with its evidence).
  std::map<std::string, std::string> findings;
  std::vector<std::string> order;
  std::vector<const config::workload*> by_weight;
  for (const auto& w : ctx.op->workloads) {
    auto it = ctx.parent_results.find(w.id);
    if (it == ctx.parent_results.end()) continue;
    prompts::workload_measurement m;
    m.workload = w.id;
    m.status = it->second.status;
    if (it->second.ok()) m.median_us = it->second.median_ns / 1e3;
    m.sol_fraction = it->second.sol_fraction;
    m.attainable_fraction = it->second.attainable_sol_fraction;
    in.measurements.push_back(m);
    by_weight.push_back(&w);
  }
  std::stable_sort(by_weight.begin(), by_weight.end(), [](auto* a, auto* b) { return a->weight > b->weight; });
  for (std::size_t i = 0; i < by_weight.size() && i < 4; ++i) {
    const auto& r = ctx.parent_results.at(by_weight[i]->id);
    for (const auto& f : findings_of(r.diagnosis)) {
      const std::string cls = f.value("class", "");
      if (cls.empty()) continue;
      const std::string line = by_weight[i]->id + ": " + f.value("summary", "");
      if (!findings.count(cls)) order.push_back(cls);
      findings[cls] += (findings[cls].empty() ? "" : "; ") + line;
    }
  }
  for (const auto& c : order) in.diagnosis.push_back({c, findings[c]});
  if (in.measurements.empty())
    in.measurements_note = ctx.parent_label.empty()
                               ? std::string("none yet for this kernel.")
                               : "none are stored for the " + ctx.parent_label + " kernel yet.";
  std::string directives;
  for (const auto& it : ctx.items) {
    if (it.kind == "history") {
      in.history.push_back({it.id.substr(it.id.find(':') + 1), it.text, ""});
    } else if (it.kind == "snippet") {
      const auto nl = it.text.find('\n');
      in.snippets.push_back({it.id.substr(it.id.find(':') + 1), it.text.substr(0, nl),
                             nl == std::string::npos ? it.text : it.text.substr(nl + 1)});
    } else {
      directives += "- " + it.text + "\n";
    }
  }
  if (!directives.empty()) in.feedback = "Techniques to consider:\n" + directives;
  composed_prompt out;
  out.template_name = !template_name.empty()    ? template_name
                      : ctx.different_algorithm ? "broaden"
                      : in.measurements.empty() ? "first"
                                                : "revise";
  const json c = prompts::build_context(in);
  const auto set = prompts::template_set::load_directory(setup.template_dir);
  out.system = set.render("system", c, dropped).text;
  const auto user = set.render(out.template_name, c, dropped);
  out.user = user.text;
  out.present_items = user.present_items;
  out.cache_breaks = user.cache_breaks;
  return out;
}

llm_source::llm_source(llm::llm_client& client, std::int64_t max_tokens,
                       std::optional<prompt_setup> setup, llm::diversity_options diversity)
    : max_tokens_(max_tokens), setup_(std::move(setup)), diversity_(diversity) {
  // The label a one-model campaign's calls and notes carry: "provider/model",
  // as llm.models names an entry without a name, so that reports count a
  // model under one label whether or not it came through llm.models.
  const std::string& model = client.backend().model();
  std::string label = client.backend().name() + (model.empty() ? "" : "/" + model);
  own_router_ = std::make_unique<llm::router>(std::vector<llm::router::arm>{
      {std::move(label), &client, 1.0, std::nullopt, 0, client.backend().answers_per_call()}});
  router_ = own_router_.get();
}

llm_source::llm_source(llm::router& models, std::int64_t max_tokens,
                       std::optional<prompt_setup> setup, llm::diversity_options diversity)
    : router_(&models), max_tokens_(max_tokens), setup_(std::move(setup)), diversity_(diversity) {}

llm_source::~llm_source() = default;

std::string llm_source::name() const {
  // Candidate rows carry this as their provider: the provider's name when
  // every model is served by one, else "multi" (the note names the model).
  std::string n = router_->client(0).backend().name();
  for (std::size_t i = 1; i < router_->size(); ++i)
    if (router_->client(i).backend().name() != n) return "multi";
  return n;
}

source_answer llm_source::propose(const prompt_context& ctx) {
  source_answer out;
  const std::vector<call_plan> plans = plan_calls(ctx, *router_, diversity_);
  // One composition per distinct item set (without per-call dropout, one).
  std::map<std::vector<std::string>, composed_prompt> composed;
  auto compose = [&](const call_plan& p) -> const composed_prompt& {
    std::vector<std::string> ids;
    for (const auto& it : p.items) ids.push_back(it.id);
    auto f = composed.find(ids);
    if (f != composed.end()) return f->second;
    composed_prompt c;
    c.system = "You write fast, correct CUDA kernels for NVIDIA GPUs.";
    prompt_context pc = ctx;
    pc.items = p.items;
    if (setup_ && ctx.op) {
      // Template errors are kopt's bug or a broken --prompts-dir: say so
      // loudly rather than sending a prompt nobody reviewed.
      c = compose_prompt(pc, *setup_);
    } else {
      c.user = placeholder_prompt(pc);
    }
    return composed.emplace(ids, std::move(c)).first->second;
  };
  struct in_flight {
    const call_plan* plan;
    std::future<llm::completion> result;
  };
  std::vector<in_flight> calls;
  for (const call_plan& p : plans) {
    const composed_prompt& c = compose(p);
    llm::request rq;
    rq.system = c.system;
    llm::message m{"user", with_hint(c.user, p)};
    m.cache_breaks = c.cache_breaks;
    rq.messages.push_back(std::move(m));
    // Each model's own cap when the config gave one (reasoning models need more).
    rq.max_tokens = router_->max_tokens(p.arm) > 0 ? router_->max_tokens(p.arm) : max_tokens_;
    rq.n = p.answers;
    rq.tag = fmt::format("iteration {} call {}/{}", ctx.iteration, p.index + 1, plans.size());
    rq.meta = p.meta(ctx, plans.size(), router_->label(p.arm));
    rq.iteration_id = ctx.iteration_id;
    calls.push_back({&p, router_->client(p.arm).submit(std::move(rq))});
  }
  for (auto& f : calls) {
    const call_plan& p = *f.plan;
    const llm::completion c = f.result.get();
    out.tokens += c.tokens.total();
    out.cost_usd += c.cost_usd;
    std::int64_t usable = 0;
    if (!c.ok()) {
      ++out.llm_errors;
      out.problems.push_back(fmt::format("{}: {}: {}", router_->label(p.arm),
                                         llm::call_status_name(c.status), c.error));
      if (c.status == llm::call_status::permanent || c.status == llm::call_status::disabled) {
        // One model's revoked key or spent quota ends the campaign's LLM
        // use only when no other model can still answer.
        bool any_alive = false;
        for (std::size_t i = 0; i < router_->size(); ++i)
          if (!router_->client(i).stopped()) any_alive = true;
        if (!any_alive) out.fatal = router_->client(p.arm).stopped().value_or(c.error);
      }
      if (c.status == llm::call_status::budget_exceeded) out.fatal = "LLM budget exhausted: " + c.error;
      router_->record_call(p.arm, c, 0);
      continue;
    }
    std::vector<std::string> answers = c.texts.empty() ? std::vector<std::string>{c.text} : c.texts;
    for (std::size_t a = 0; a < answers.size(); ++a) {
      const auto ex = llm::extract_candidate(answers[a]);
      if (!ex.ok()) {
        ++out.llm_errors;
        out.problems.push_back(ex.feedback());
        continue;
      }
      json candidate = *ex.candidate;
      if (ctx.op) {
        const auto cand = config::load_candidate_text(ex.candidate->dump(), "llm answer",
                                                      ctx.op->file.parent_path(), *ctx.op);
        if (!cand.ok()) {
          ++out.llm_errors;
          std::string why;
          for (const auto& d : cand.diagnostics) why += d.to_string() + "\n";
          out.problems.push_back(why);
          continue;
        }
        candidate = cand.cand->to_json();
      }
      std::string note =
          fmt::format("{} call {}/{}", router_->label(p.arm), p.index + 1, plans.size());
      if (answers.size() > 1) note += fmt::format(" answer {}/{}", a + 1, answers.size());
      if (p.hint) note += ", hint " + p.hint->id;
      if (!p.call_dropped.empty())
        note += fmt::format(", call dropout: {}", fmt::join(p.call_dropped, " "));
      {
        std::lock_guard lock(mu_);
        arm_of_source_[sha256_hex(candidate.value("source", ""))] = p.arm;
      }
      ++usable;
      out.proposals.push_back(
          {std::move(candidate), store::candidate_origin::llm, note, c.record_id, c.model});
    }
    router_->record_call(p.arm, c, usable);
  }
  return out;
}

void llm_source::observe(std::int64_t iteration, const std::optional<std::string>& promoted_source,
                         double gain) {
  std::optional<std::size_t> arm;
  {
    std::lock_guard lock(mu_);
    if (!observed_.insert(iteration).second) return;  // told twice (a resumed iteration)
    if (promoted_source) {
      const auto it = arm_of_source_.find(sha256_hex(*promoted_source));
      if (it != arm_of_source_.end()) arm = it->second;
    }
  }
  if (arm) router_->record_gain(*arm, gain);
  router_->end_iteration(promoted_source ? gain : 0.0);
}

void llm_source::restore(store::store& db, store::row_id campaign_id) {
  std::map<std::string, std::size_t> arm_of_label;
  for (std::size_t i = 0; i < router_->size(); ++i) arm_of_label[router_->label(i)] = i;
  std::map<store::row_id, std::int64_t> proposals_of_call;
  std::map<store::row_id, std::optional<store::row_id>> call_of_candidate;
  for (const auto& c : db.candidates_of(campaign_id)) {
    call_of_candidate[c.id] = c.llm_call_id;
    if (c.llm_call_id) ++proposals_of_call[*c.llm_call_id];
  }
  std::map<store::row_id, std::size_t> arm_of_call;
  for (const auto& call : db.llm_calls_of(campaign_id)) {
    const json meta =
        call.request.is_object() ? call.request.value("meta", json::object()) : json::object();
    const std::string label = meta.is_object() ? meta.value("model", std::string()) : std::string();
    const auto arm = arm_of_label.find(label);
    if (arm == arm_of_label.end()) continue;  // a model no longer configured
    arm_of_call[call.id] = arm->second;
    llm::completion c;
    // What record_call needs: failed or not, and whether it was sent at all
    // (store_status maps refusals to "refused").
    c.status = call.status == "ok"        ? llm::call_status::ok
               : call.status == "refused" ? llm::call_status::disabled
                                          : llm::call_status::transient;
    c.tokens.prompt = call.prompt_tokens;
    c.tokens.completion = call.completion_tokens;
    c.cost_usd = call.cost_usd;
    router_->record_call(arm->second, c, proposals_of_call[call.id]);
  }
  std::map<std::int64_t, std::pair<double, std::optional<std::size_t>>> promoted;  // by iteration
  for (const auto& e : db.events_of(campaign_id)) {
    if (e.kind != "promoted" || !e.data.is_object()) continue;
    const json decision = e.data.value("decision", json::object());
    std::optional<std::size_t> arm;
    if (const auto ch = call_of_candidate.find(e.data.value("challenger", store::row_id{0}));
        ch != call_of_candidate.end() && ch->second) {
      if (const auto a = arm_of_call.find(*ch->second); a != arm_of_call.end()) arm = a->second;
    }
    promoted[e.data.value("iteration", std::int64_t{-1})] = {
        decision.is_object() ? decision.value("gain", 0.0) : 0.0, arm};
  }
  std::vector<std::int64_t> finished;
  for (const auto& it : db.iterations_of(campaign_id))
    if (it.number > 0 && it.status == "done") finished.push_back(it.number);
  std::sort(finished.begin(), finished.end());
  std::lock_guard lock(mu_);
  for (const std::int64_t n : finished) {
    if (!observed_.insert(n).second) continue;
    const auto p = promoted.find(n);
    if (p != promoted.end() && p->second.second)
      router_->record_gain(*p->second.second, p->second.first);
    router_->end_iteration(p != promoted.end() ? p->second.first : 0.0, /*log=*/false);
  }
}

std::function<void(const progress&)> model_feedback(store::store& db, store::row_id campaign_id,
                                                    llm_source& src) {
  return [&db, campaign_id, &src](const progress& p) {
    std::optional<std::string> promoted;
    double gain = 0;
    if (p.promoted) {
      for (const auto& e : db.events_of(campaign_id, 64)) {
        if (e.kind != "promoted" || e.data.value("iteration", std::int64_t{-1}) != p.iteration)
          continue;
        gain = e.data.value("decision", json::object()).value("gain", 0.0);
        if (const auto c = db.find_candidate(e.data.value("challenger", store::row_id{0})))
          promoted = c->source;
      }
    }
    src.observe(p.iteration, promoted, gain);
  };
}

source_answer scripted_source::propose(const prompt_context& ctx) {
  {
    std::lock_guard lock(mu_);
    prompt_context copy = ctx;
    copy.already_tried = nullptr;
    seen_.push_back(std::move(copy));
  }
  return script_(ctx);
}

std::vector<prompt_context> scripted_source::contexts() const {
  std::lock_guard lock(mu_);
  return seen_;
}

}  // namespace kopt::campaign
