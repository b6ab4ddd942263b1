#include "llm/router.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "common/error.hpp"

namespace kopt::llm {
namespace {

using nlohmann::json;

constexpr const char* router_keys[] = {"models", "selection", "escalation", "diversity"};
constexpr const char* entry_only_keys[] = {"name", "weight", "cost_per_call_usd", "tier"};

double number_at(const json& j, const char* key, const std::string& where, double fallback,
                 double min, double max = std::numeric_limits<double>::max()) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < min ||
      it->get<double>() > max) {
    throw config_error(where + "." + key + " must be a number from " + std::to_string(min) +
                       (max < 1e300 ? " to " + std::to_string(max) : std::string(" up")));
  }
  return it->get<double>();
}

void only_keys(const json& j, const std::string& where, std::initializer_list<const char*> known) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; })) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      throw config_error(where + "." + it.key() + " is not a known field (known: " + list + ")");
    }
  }
}

bool get_bool(const json& j, const char* key, const std::string& where, bool fallback) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_boolean()) throw config_error(where + "." + key + " must be true or false");
  return it->get<bool>();
}

}  // namespace

const char* selection_policy_name(selection_policy p) noexcept {
  switch (p) {
    case selection_policy::fixed:
      return "fixed";
    case selection_policy::round_robin:
      return "round_robin";
    case selection_policy::bandit:
      return "bandit";
  }
  return "fixed";
}

router_config parse_router_config(const json& section, const std::filesystem::path& base_dir) {
  if (!section.is_object()) throw config_error("llm must be an object");
  router_config rc;
  json base = section;
  for (const char* k : router_keys) base.erase(k);

  if (const auto m = section.find("models"); m != section.end()) {
    if (!m->is_array() || m->empty())
      throw config_error("llm.models must be a non-empty list of {provider, model, ...} objects");
    std::set<std::string> labels;
    for (std::size_t i = 0; i < m->size(); ++i) {
      const json& e = (*m)[i];
      const std::string where = "llm.models[" + std::to_string(i) + "]";
      if (!e.is_object()) throw config_error(where + " must be an object");
      json merged = base;
      json own = e;
      for (const char* k : entry_only_keys) own.erase(k);
      for (const char* k : router_keys) {
        if (own.contains(k))
          throw config_error(where + "." + k + " belongs to the llm section, not a model");
      }
      merged.merge_patch(own);
      model_entry me;
      try {
        me.cfg = parse_provider_config(merged, base_dir);
      } catch (const config_error& err) {
        throw config_error(where + ": " + err.what());
      }
      if (me.cfg.kind == "autotune")
        throw config_error(where +
                           ": provider autotune calls no model; leave it out of llm.models");
      me.label = e.value("name", std::string{});
      if (const auto nm = e.find("name"); nm != e.end() && !nm->is_string())
        throw config_error(where + ".name must be a string");
      if (me.label.empty()) me.label = me.cfg.kind + "/" + me.cfg.model;
      if (!labels.insert(me.label).second)
        throw config_error(where + ": two models are called \"" + me.label +
                           "\"; give each a distinct name");
      me.weight = number_at(e, "weight", where, 1.0, 1e-9);
      if (e.contains("cost_per_call_usd"))
        me.cost_per_call_usd = number_at(e, "cost_per_call_usd", where, 0, 0);
      if (const auto t = e.find("tier"); t != e.end()) {
        if (!t->is_number_integer() || t->get<std::int64_t>() < 0 || t->get<std::int64_t>() > 100)
          throw config_error(where + ".tier must be an integer from 0 to 100 (higher is stronger)");
        me.tier = t->get<int>();
      }
      rc.models.push_back(std::move(me));
    }
  } else {
    model_entry me;
    me.cfg = parse_provider_config(base, base_dir);
    me.label = me.cfg.kind + (me.cfg.model.empty() ? "" : "/" + me.cfg.model);
    rc.models.push_back(std::move(me));
  }

  if (const auto s = section.find("selection"); s != section.end()) {
    if (!s->is_object())
      throw config_error("llm.selection must be an object such as {\"policy\": \"bandit\"}");
    only_keys(*s, "llm.selection", {"policy", "exploration"});
    const std::string p = s->value("policy", std::string("fixed"));
    if (const auto pj = s->find("policy"); pj != s->end() && !pj->is_string())
      throw config_error("llm.selection.policy must be a string");
    if (p == "fixed")
      rc.policy = selection_policy::fixed;
    else if (p == "round_robin")
      rc.policy = selection_policy::round_robin;
    else if (p == "bandit")
      rc.policy = selection_policy::bandit;
    else
      throw config_error("llm.selection.policy is \"" + p +
                         "\"; expected fixed, round_robin or bandit");
    rc.exploration = number_at(*s, "exploration", "llm.selection", rc.exploration, 0, 100);
  }
  if (const auto e = section.find("escalation"); e != section.end()) {
    if (!e->is_object()) throw config_error("llm.escalation must be an object");
    only_keys(*e, "llm.escalation", {"after_stagnant_iterations", "follow_campaign"});
    rc.escalation.after_stagnant_iterations =
        static_cast<int>(number_at(*e, "after_stagnant_iterations", "llm.escalation", 0, 0, 1000));
    rc.escalation.follow_campaign = get_bool(*e, "follow_campaign", "llm.escalation", true);
  }
  if (const auto d = section.find("diversity"); d != section.end()) {
    if (!d->is_object()) throw config_error("llm.diversity must be an object");
    only_keys(*d, "llm.diversity", {"hints", "call_dropout_p"});
    rc.diversity.hints = get_bool(*d, "hints", "llm.diversity", rc.diversity.hints);
    rc.diversity.call_dropout_p = number_at(*d, "call_dropout_p", "llm.diversity", 0, 0, 0.9);
  }
  return rc;
}

router::router(std::vector<arm> arms, selection_policy policy, double exploration,
               escalation_rule esc)
    : arms_(std::move(arms)), policy_(policy), exploration_(exploration), esc_(esc) {
  if (arms_.empty()) throw config_error("a model router needs at least one model");
  for (const arm& a : arms_) {
    if (a.client == nullptr) throw kopt::error("router: arm '" + a.label + "' has no client");
    arm_stats s;
    s.label = a.label;
    s.provider = a.client->backend().name();
    s.model = a.client->backend().model();
    s.tier = a.tier;
    stats_.push_back(s);
  }
  rr_current_.assign(arms_.size(), 0.0);
}

router::~router() = default;

std::unique_ptr<router> router::from_config(const router_config& cfg, const client_options& common,
                                            http_transport* transport, time_source* time) {
  std::vector<std::unique_ptr<llm_client>> clients;
  std::vector<arm> arms;
  for (const model_entry& m : cfg.models) {
    client_options o = common;
    o.prices = m.cfg.prices;
    o.max_concurrency = m.cfg.max_concurrency;
    clients.push_back(std::make_unique<llm_client>(make_provider(m.cfg, transport, time), o));
    arms.push_back({m.label, clients.back().get(), m.weight, m.cost_per_call_usd, m.tier,
                    clients.back()->backend().answers_per_call(), m.cfg.max_tokens});
  }
  auto r = std::make_unique<router>(std::move(arms), cfg.policy, cfg.exploration, cfg.escalation);
  r->owned_ = std::move(clients);
  return r;
}

std::vector<std::size_t> router::allowed_locked(bool campaign_stalled) const {
  std::set<int> tiers;
  for (const arm& a : arms_) tiers.insert(a.tier);
  const int level = std::max(level_, campaign_stalled && esc_.follow_campaign ? 1 : 0);
  auto t = tiers.begin();
  for (int i = 0; i < level && std::next(t) != tiers.end(); ++i) ++t;
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < arms_.size(); ++i)
    if (arms_[i].tier >= *t) out.push_back(i);
  return out;
}

// What the bandit divides gains by: billed USD, else the configured cost
// per call; never zero, so that a free arm is very efficient, not infinite.
double router::bandit_cost(std::size_t i) const {
  return std::max(stats_[i].bandit_cost_usd,
                  1e-6 * static_cast<double>(std::max<std::int64_t>(stats_[i].calls, 1)));
}

std::vector<std::size_t> router::choose(std::size_t k, bool campaign_stalled) {
  std::lock_guard lock(mu_);
  const std::vector<std::size_t> allowed = allowed_locked(campaign_stalled);
  std::vector<std::size_t> out;
  if (policy_ == selection_policy::fixed) {
    out.assign(k, allowed.front());
    return out;
  }
  if (policy_ == selection_policy::round_robin) {
    // Smooth weighted round robin: each pick adds every weight to its
    // arm's current value and takes the largest, minus the total.
    double total = 0;
    for (const std::size_t i : allowed) total += arms_[i].weight;
    for (std::size_t n = 0; n < k; ++n) {
      std::size_t best = allowed.front();
      for (const std::size_t i : allowed) {
        rr_current_[i] += arms_[i].weight;
        if (rr_current_[i] > rr_current_[best]) best = i;
      }
      rr_current_[best] -= total;
      out.push_back(best);
    }
    return out;
  }
  // UCB1 on normalised gain per dollar, with the picks of this iteration
  // counted as pulls so that the K calls spread while values are uncertain.
  std::vector<double> pulls(arms_.size(), 0);
  for (const std::size_t i : allowed) pulls[i] = static_cast<double>(stats_[i].calls);
  auto expected_cost = [&](std::size_t i) {
    if (stats_[i].calls > 0 && stats_[i].bandit_cost_usd > 0)
      return stats_[i].bandit_cost_usd / static_cast<double>(stats_[i].calls);
    return arms_[i].cost_per_call_usd.value_or(0.0);
  };
  std::vector<double> value(arms_.size(), 0);
  double best_value = 0;
  for (const std::size_t i : allowed) {
    value[i] = stats_[i].gain / bandit_cost(i);
    best_value = std::max(best_value, value[i]);
  }
  for (std::size_t n = 0; n < k; ++n) {
    double total = 0;
    for (const std::size_t i : allowed) total += pulls[i];
    std::optional<std::size_t> pick;
    double pick_score = -1;
    for (const std::size_t i : allowed) {
      double score = 0;
      if (pulls[i] == 0) {
        score = std::numeric_limits<double>::infinity();
      } else {
        const double exploit = best_value > 0 ? value[i] / best_value : 0.0;
        score = exploit + exploration_ * std::sqrt(2.0 * std::log(std::max(total, 1.0)) / pulls[i]);
      }
      // Ties (untried arms, or nothing learnt yet) go to the cheaper arm.
      if (!pick || score > pick_score ||
          (score == pick_score && expected_cost(i) < expected_cost(*pick))) {
        pick = i;
        pick_score = score;
      }
    }
    out.push_back(*pick);
    pulls[*pick] += 1;
  }
  return out;
}

void router::record_call(std::size_t i, const completion& c, std::int64_t proposals) {
  std::lock_guard lock(mu_);
  arm_stats& s = stats_.at(i);
  ++s.calls;
  if (!c.ok()) ++s.failed_calls;
  s.proposals += proposals;
  s.tokens += c.tokens.total();
  s.cost_usd += c.cost_usd;
  // A call refused before sending (budget, disabled) cost nothing.
  const bool sent = c.status != call_status::budget_exceeded && c.status != call_status::disabled;
  if (sent)
    s.bandit_cost_usd += c.cost_usd > 0 ? c.cost_usd : arms_[i].cost_per_call_usd.value_or(0.0);
}

void router::record_gain(std::size_t i, double gain) {
  std::lock_guard lock(mu_);
  arm_stats& s = stats_.at(i);
  ++s.promotions;
  s.gain += std::max(0.0, gain);
}

void router::end_iteration(double gain, bool log) {
  std::lock_guard lock(mu_);
  if (gain > 0) {
    if (level_ > 0 && log)
      spdlog::info("llm router: a gain of {:.1f} % ends the model escalation", 100 * gain);
    level_ = 0;
    stagnant_ = 0;
    return;
  }
  if (esc_.after_stagnant_iterations > 0 && ++stagnant_ >= esc_.after_stagnant_iterations) {
    stagnant_ = 0;
    ++level_;
    if (log)
      spdlog::info("llm router: {} iterations without gain: escalation level {}",
                   esc_.after_stagnant_iterations, level_);
  }
}

int router::escalation_level() const {
  std::lock_guard lock(mu_);
  return level_;
}

std::vector<arm_stats> router::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

nlohmann::json router::to_json() const {
  std::lock_guard lock(mu_);
  json arms = json::array();
  for (const arm_stats& s : stats_) {
    arms.push_back({{"label", s.label},
                    {"provider", s.provider},
                    {"model", s.model},
                    {"tier", s.tier},
                    {"calls", s.calls},
                    {"failed_calls", s.failed_calls},
                    {"proposals", s.proposals},
                    {"promotions", s.promotions},
                    {"tokens", s.tokens},
                    {"cost_usd", s.cost_usd},
                    {"gain", s.gain},
                    {"gain_per_usd",
                     s.bandit_cost_usd > 0 ? json(s.gain / s.bandit_cost_usd) : json(nullptr)}});
  }
  return {{"policy", selection_policy_name(policy_)}, {"escalation_level", level_}, {"arms", arms}};
}

}  // namespace kopt::llm
