#include "campaign/sources.hpp"

#include "prompts/context.hpp"
#include "prompts/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <random>
#include <set>

#include "llm/extract.hpp"

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
  if (in.measurements.empty()) in.measurements_note = "none yet for this kernel.";
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
  return out;
}

source_answer llm_source::propose(const prompt_context& ctx) {
  source_answer out;
  llm::request rq;
  rq.system = "You write fast, correct CUDA kernels for NVIDIA GPUs.";
  std::string user = placeholder_prompt(ctx);
  if (setup_ && ctx.op) {
    // Template errors are kopt's bug or a broken --prompts-dir: say so
    // loudly rather than sending a prompt nobody reviewed.
    const auto p = compose_prompt(ctx, *setup_);
    rq.system = p.system;
    user = p.user;
  }
  rq.messages.push_back({"user", user});
  rq.max_tokens = max_tokens_;
  rq.tag = fmt::format("iteration {}", ctx.iteration);
  rq.iteration_id = ctx.iteration_id;
  std::vector<std::future<llm::completion>> calls;
  for (std::size_t i = 0; i < std::max<std::size_t>(ctx.k, 1); ++i) calls.push_back(client_.submit(rq));
  for (auto& f : calls) {
    const llm::completion c = f.get();
    out.tokens += c.tokens.total();
    out.cost_usd += c.cost_usd;
    if (!c.ok()) {
      ++out.llm_errors;
      out.problems.push_back(fmt::format("{}: {}", llm::call_status_name(c.status), c.error));
      if (c.status == llm::call_status::permanent || c.status == llm::call_status::disabled)
        out.fatal = client_.stopped().value_or(c.error);
      if (c.status == llm::call_status::budget_exceeded) out.fatal = "LLM budget exhausted: " + c.error;
      continue;
    }
    const auto ex = llm::extract_candidate(c.text);
    if (!ex.ok()) {
      ++out.llm_errors;
      out.problems.push_back(ex.feedback());
      continue;
    }
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
      out.proposals.push_back(
          {cand.cand->to_json(), store::candidate_origin::llm, "", c.record_id, c.model});
    } else {
      out.proposals.push_back(
          {*ex.candidate, store::candidate_origin::llm, "", c.record_id, c.model});
    }
  }
  return out;
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
