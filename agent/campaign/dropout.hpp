// Optimization dropout and stagnation escalation. Each optional prompt item
// (technique directive, history note, reference snippet) is dropped with
// probability p; the draw for an item depends only on (seed, iteration,
// item id), so a mask is reproducible, does not shift when items are added
// or removed, and a resumed iteration draws exactly what the killed one did.
// Decisions are stored per iteration (dropout_decisions), and each LLM call
// records its own further draw (call_plan.hpp), which is what makes
// attribution possible: for each item, the mean gain of the calls that
// showed it against those that did not.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "campaign/types.hpp"
#include "store/records.hpp"

namespace kopt::store {
class store;
}

namespace kopt::campaign {

// A 64-bit seed derived from a campaign seed, a purpose and a number
// (splitmix64 over an FNV-1a hash of the purpose).
std::uint64_t derive_seed(std::uint64_t seed, std::string_view purpose, std::int64_t n = 0);
// Uniform in [0, 1) from a seed (one splitmix64 step).
double unit_draw(std::uint64_t seed);

struct dropout_result {
  std::vector<prompt_item> kept;                   // protected items plus kept optional ones
  std::vector<store::dropout_decision> decisions;  // one per optional item
};

// Protected items (optional = false) are always kept and not recorded.
dropout_result apply_dropout(const std::vector<prompt_item>& items, double p, std::uint64_t seed);

// Escalation steps, in the order they fire when the campaign stalls.
enum class escalation : int {
  none = 0,
  higher_p = 1,             // drop more of the context
  partial_restart = 2,      // mask about half the history (never baseline, best)
  restart_from_elite = 3,   // parent from the elite pool, not the best
  different_algorithm = 4,  // ask for a structurally different algorithm
};
std::string_view to_string(escalation e) noexcept;

// About half of the optional history items, chosen by seed (at least one
// when there is any); protected items are never masked.
std::set<std::string> mask_history(const std::vector<prompt_item>& history, std::uint64_t seed);

struct item_attribution {
  std::string item_id;
  std::string kind;
  std::int64_t kept = 0, dropped = 0;  // draws that showed it / did not
  double mean_gain_kept = 0, mean_gain_dropped = 0;
  double effect() const noexcept { return mean_gain_kept - mean_gain_dropped; }
};

// Attribution (docs/campaign.md, "Attribution"): the one place that says
// what a proposal saw and what it is credited with. The unit is a *draw*:
// one LLM call of an iteration, with the optional items that call showed
// (its own draw on top of the iteration's), credited with the iteration's
// gain when the promoted candidate is that call's answer and with 0
// otherwise. Why per call: with per-call dropout the K calls of one
// iteration see different items, and crediting all of them with the
// iteration's gain would credit the items the winning call never saw.
struct attribution_draw {
  std::optional<store::row_id> llm_call_id;        // empty: the iteration as a whole
  std::vector<store::dropout_decision> decisions;  // kept = shown to this draw
  double gain = 0;
};

// The iteration's decisions as one call saw them: an item the iteration
// kept is dropped for the call when its `meta.call_dropped` names it or its
// `meta.items` (what it showed) lacks it. A call recorded without that meta
// (before per-call draws) showed the iteration's kept items unchanged.
std::vector<store::dropout_decision> call_decisions(
    const std::vector<store::dropout_decision>& iteration, const store::llm_call_record& call);

// What attribution reads of one loop iteration.
struct attribution_iteration {
  std::vector<store::dropout_decision> decisions;    // the iteration's (optional items)
  std::vector<const store::llm_call_record*> calls;  // its recorded LLM calls
  bool promoted = false;
  double gain = 0;                             // relative gain of the promotion
  std::optional<store::row_id> promoted_call;  // llm_call_id of the promoted candidate
};

// The draws of one iteration: one per recorded call that got an answer (a
// failed call proposed nothing, so its items say nothing about gains). An
// iteration without recorded calls (autotune, agents, scripted sources), or
// whose promoted candidate names none of its calls (a store written before
// candidates were linked to calls), is one draw: its own decisions, its gain.
std::vector<attribution_draw> attribution_draws(const attribution_iteration& it);

// Per item over the draws: how many kept / dropped it and the mean gain of
// each; largest effect first.
std::vector<item_attribution> attribution(const std::vector<attribution_draw>& draws);

// The same from a campaign's stored rows (iterations numbered > 0;
// decisions by iteration id; gains and promoted candidates from the
// `promoted` events): what the loop and `kopt report` both use.
std::vector<item_attribution> attribution(
    const std::vector<store::iteration_record>& iterations,
    const std::map<store::row_id, std::vector<store::dropout_decision>>& decisions,
    const std::vector<store::llm_call_record>& calls,
    const std::vector<store::candidate_record>& candidates,
    const std::vector<store::event_record>& events);

}  // namespace kopt::campaign
