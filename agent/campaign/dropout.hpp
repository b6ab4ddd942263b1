// Optimization dropout and stagnation escalation. Each optional prompt item
// (technique directive, history note, reference snippet) is dropped with
// probability p; the draw for an item depends only on (seed, iteration,
// item id), so a mask is reproducible, does not shift when items are added
// or removed, and a resumed iteration draws exactly what the killed one did.
// Decisions are stored per iteration (dropout_decisions), which is what makes
// attribution possible: for each item, the mean gain of the iterations that
// had it against those that did not.
#pragma once

#include <cstdint>
#include <map>
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
  std::vector<prompt_item> kept;                 // protected items plus kept optional ones
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
  std::int64_t present = 0, absent = 0;
  double mean_gain_present = 0, mean_gain_absent = 0;
  double effect() const noexcept { return mean_gain_present - mean_gain_absent; }
};

// `gains`: iteration number -> relative gain of that iteration (0 when no
// promotion). Iterations without decisions are ignored.
std::vector<item_attribution> attribution(
    const std::map<std::int64_t, std::vector<store::dropout_decision>>& decisions,
    const std::map<std::int64_t, double>& gains);

}  // namespace kopt::campaign
