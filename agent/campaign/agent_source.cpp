#include "campaign/agent_source.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/data_paths.hpp"
#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/subprocess.hpp"
#include "prompts/engine.hpp"

namespace kopt::campaign {

using json = nlohmann::json;

json agent_brief::to_json() const {
  return {{"iteration", iteration},
          {"parent_candidate_id", parent_id},
          {"template", template_name},
          {"system", system},
          {"user", user},
          {"brief_hash", hash}};
}

std::optional<agent_brief> latest_agent_brief(store::store& db, store::row_id campaign_id) {
  std::optional<agent_brief> out;
  for (const auto& e : db.events_of(campaign_id)) {
    if (e.kind != "agent_brief" || !e.data.is_object()) continue;
    agent_brief b;
    b.iteration = e.data.value("iteration", std::int64_t{0});
    b.parent_id = e.data.value("parent_candidate_id", store::row_id{0});
    b.system = e.data.value("system", "");
    b.user = e.data.value("user", "");
    b.template_name = e.data.value("template", "");
    b.hash = e.data.value("brief_hash", "");
    out = std::move(b);
  }
  return out;
}

source_answer agent_source::propose(const prompt_context& ctx) {
  source_answer out;
  // Submissions this iteration already took (a run killed before its
  // proposals were stored asks again: it gets the same ones), then the
  // pending ones, oldest first, up to K.
  std::vector<store::agent_submission> take;
  for (auto& s : store::agent_submissions_of(db_, campaign_id_, "taken"))
    if (s.iteration && *s.iteration == ctx.iteration) take.push_back(std::move(s));
  std::vector<store::agent_submission> fresh;
  for (auto& s : store::agent_submissions_of(db_, campaign_id_, "pending")) {
    if (take.size() + fresh.size() >= std::max<std::size_t>(ctx.k, 1)) break;
    fresh.push_back(std::move(s));
  }
  if (take.empty() && fresh.empty()) {
    // The brief for this iteration: what an LLM would be sent.
    agent_brief b;
    b.iteration = ctx.iteration;
    b.parent_id = ctx.parent_id;
    if (setup_ && ctx.op) {
      const composed_prompt p = compose_prompt(ctx, *setup_);
      b.system = p.system;
      b.user = p.user;
      b.template_name = p.template_name;
    } else {
      b.user = placeholder_prompt(ctx);
      b.template_name = "builtin";
    }
    b.hash = sha256_hex(b.system + "\n" + b.user);
    const auto last = latest_agent_brief(db_, campaign_id_);
    store::transaction tx(db_.db());
    if (!last || last->hash != b.hash || last->iteration != b.iteration) {
      store::event_record e;
      e.campaign_id = campaign_id_;
      e.kind = "agent_brief";
      e.message = fmt::format("iteration {}: waiting for an agent's candidates (parent {})",
                              ctx.iteration, ctx.parent_id);
      e.data = b.to_json();
      db_.add_event(e);
    }
    store::set_campaign_waiting(db_, campaign_id_, std::string("agent"));
    tx.commit();
    out.waiting = fmt::format(
        "iteration {} waits for an agent's candidates (kopt propose {} FILE, or MCP "
        "candidate_submit)",
        ctx.iteration, campaign_id_);
    return out;
  }
  const auto brief = latest_agent_brief(db_, campaign_id_);
  store::transaction tx(db_.db());
  auto use = [&](const store::agent_submission& s, bool mark) {
    config::candidate_result c;
    if (ctx.op)
      c = config::load_candidate_text(s.candidate.dump(), fmt::format("agent submission {}", s.id),
                                      ctx.op->file.parent_path(), *ctx.op);
    if (ctx.op && !c.ok()) {
      // Checked on entry, so only a changed validator gets here.
      std::string why;
      for (const auto& d : c.diagnostics) why += d.to_string() + "; ";
      store::mark_agent_submission_rejected(db_, s.id, why);
      ++out.llm_errors;
      out.problems.push_back(why);
      return;
    }
    json variant = ctx.op ? c.cand->to_json() : s.candidate;
    std::string note = fmt::format("agent {} (submission {}", s.agent, s.id);
    if (s.brief_hash)
      note += ", brief " + s.brief_hash->substr(0, 12);
    else if (brief)
      note += ", latest brief " + brief->hash.substr(0, 12) + " (not confirmed by the agent)";
    note += ")";
    if (s.note && !s.note->empty()) note += ": " + *s.note;
    if (mark) store::mark_agent_submission_taken(db_, s.id, ctx.iteration, content_key(variant));
    out.proposals.push_back({std::move(variant), store::candidate_origin::llm, note});
  };
  for (const auto& s : take) use(s, false);
  for (const auto& s : fresh) use(s, true);
  store::set_campaign_waiting(db_, campaign_id_, std::nullopt);
  tx.commit();
  return out;
}

agent_submit_result submit_agent_candidate(store::store& db, store::row_id campaign_id,
                                           std::string_view candidate_text,
                                           const std::string& label, const std::string& agent,
                                           const std::optional<std::string>& note,
                                           const std::optional<std::string>& brief_hash) {
  agent_submit_result r;
  const auto camp = db.find_campaign(campaign_id);
  if (!camp) {
    r.status = "not_found";
    r.message = fmt::format("no campaign {} in {}", campaign_id, db.path());
    return r;
  }
  if (camp->provider != "agent") {
    r.status = "rejected";
    r.message = fmt::format(
        "campaign {} takes candidates from provider '{}', not from an agent (submit a config "
        "with campaign.provider \"agent\", or --provider agent)",
        campaign_id, camp->provider);
    return r;
  }
  if (store::is_terminal(camp->state)) {
    r.status = "rejected";
    r.message = fmt::format("campaign {} is {}: it takes no more candidates", campaign_id,
                            store::to_string(camp->state));
    return r;
  }
  if (agent.empty()) {
    r.status = "invalid_input";
    r.message = "the agent's name is required (it is recorded with the candidate)";
    return r;
  }
  const auto opr = db.find_operator(camp->operator_id);
  if (!opr)
    throw kopt::store_error(
        fmt::format("campaign {}: its operator {} is missing", campaign_id, camp->operator_id));
  auto loaded =
      config::load_operator_text(opr->config.dump(), fmt::format("operator {}", opr->id), ".");
  if (!loaded.ok()) {
    r.status = "rejected";
    r.message = fmt::format("campaign {}: the stored operator does not validate", campaign_id);
    r.diagnostics = loaded.diagnostics;
    return r;
  }
  auto c = config::load_candidate_text(candidate_text, label, ".", *loaded.op);
  r.diagnostics = c.diagnostics;
  if (!c.ok()) {
    r.status = "invalid_input";
    r.message = fmt::format("the candidate does not validate against operator {}", loaded.op->name);
    return r;
  }
  store::agent_submission s;
  s.campaign_id = campaign_id;
  s.agent = agent;
  s.candidate = c.cand->to_json();
  s.note = note;
  s.brief_hash = brief_hash;
  store::transaction tx(db.db());
  r.submission_id = store::add_agent_submission(db, s);
  store::event_record e;
  e.campaign_id = campaign_id;
  e.kind = "agent_submission";
  e.message =
      fmt::format("agent {} submitted a candidate (submission {})", agent, *r.submission_id);
  e.data = {{"submission_id", *r.submission_id},
            {"agent", agent},
            {"brief_hash", brief_hash ? json(*brief_hash) : json(nullptr)}};
  db.add_event(e);
  tx.commit();
  r.status = "pending";
  r.message = fmt::format("submission {} is pending: the campaign's next iteration takes it",
                          *r.submission_id);
  return r;
}

std::optional<prompt_setup> default_prompt_setup(const std::string& gpu) {
  prompt_setup p;
  try {
    p.template_dir = prompts::default_template_dir();
  } catch (const kopt::error& e) {
    spdlog::warn("prompt templates not found ({}): agents get a short built-in brief", e.what());
    return std::nullopt;
  }
  // The one data lookup (kopt doctor shows it), not a list of its own.
  std::vector<std::filesystem::path> tries;
  if (const auto pf = data::peaks_file(); !pf.empty()) tries.emplace_back(pf);
  for (const auto& f : tries) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(f, ec)) continue;
    try {
      std::ifstream in(f);
      p.gpu = prompts::gpu_facts_from_table(json::parse(in), gpu);
      return p;
    } catch (const std::exception& e) {
      spdlog::warn("GPU facts from {}: {}", f.string(), e.what());
    }
  }
  p.gpu.name = gpu;
  return p;
}

}  // namespace kopt::campaign
