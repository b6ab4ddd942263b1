#include "campaign/call_plan.hpp"

#include <fmt/format.h>

#include "campaign/dropout.hpp"

namespace kopt::campaign {

const std::vector<strategy_hint>& strategy_hints() {
  // Directions that split the search space of a kernel rewrite; one each
  // for calls 1..K-1 of an iteration, rotated by iteration number.
  static const std::vector<strategy_hint> hints = {
      {"memory",
       "Concentrate on memory traffic: move fewer bytes, make every access wide and coalesced, "
       "and reuse data from registers or shared memory instead of reloading it."},
      {"parallelism",
       "Concentrate on how the work maps to threads, warps and blocks: enough parallelism for "
       "the small workloads, full occupancy and balanced blocks for the large ones."},
      {"instructions",
       "Concentrate on instruction efficiency: fewer instructions per element, vector types, "
       "unrolled loops, cheaper index arithmetic, no redundant synchronization."},
      {"launch",
       "Concentrate on the launch configuration and the tunable parameters: block size, work per "
       "thread, grid shape and the number of launches, chosen per workload size."},
      {"rewrite",
       "Be bold: try a different decomposition of the work rather than a refinement of the "
       "current kernel, and say in one sentence why it should be faster."},
  };
  return hints;
}

bool campaign_stalled(const prompt_context& ctx) noexcept {
  return ctx.different_algorithm || ctx.strategy == "restart_elite" ||
         ctx.strategy == "new_algorithm";
}

std::vector<call_plan> plan_calls(const prompt_context& ctx, llm::router& models,
                                  const llm::diversity_options& diversity) {
  const std::size_t k = std::max<std::size_t>(ctx.k, 1);
  const std::vector<std::size_t> arms = models.choose(k, campaign_stalled(ctx));
  std::vector<call_plan> out;
  for (std::size_t a = 0; a < arms.size();) {
    call_plan p;
    p.index = out.size();
    p.arm = arms[a];
    const int n = std::max(1, models.answers_per_call(p.arm));
    // Consecutive picks of a model with n > 1 become one call.
    std::size_t take = 1;
    while (take < static_cast<std::size_t>(n) && a + take < arms.size() && arms[a + take] == p.arm)
      ++take;
    p.answers = static_cast<int>(take);
    a += take;
    out.push_back(std::move(p));
  }
  const auto& hints = strategy_hints();
  for (call_plan& p : out) {
    if (p.index == 0 || diversity.call_dropout_p <= 0) {
      p.items = ctx.items;
    } else {
      for (const prompt_item& it : ctx.items) {
        const double u = unit_draw(
            derive_seed(ctx.seed, "call-dropout:" + it.id, static_cast<std::int64_t>(p.index)));
        if (it.optional && u < diversity.call_dropout_p)
          p.call_dropped.push_back(it.id);
        else
          p.items.push_back(it);
      }
    }
    if (diversity.hints && p.index > 0) {
      const auto h =
          (p.index - 1 + static_cast<std::size_t>(std::max<std::int64_t>(ctx.iteration, 0))) %
          hints.size();
      p.hint = hints[h];
    }
  }
  return out;
}

std::string with_hint(const std::string& user, const call_plan& p) {
  if (!p.hint) return user;
  std::string out = user;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "\n## Direction for this answer\n\n" + p.hint->text + "\n";
  return out;
}

nlohmann::json call_plan::meta(const prompt_context& ctx, std::size_t calls,
                               const std::string& arm_label) const {
  nlohmann::json shown = nlohmann::json::array();
  for (const prompt_item& it : items) shown.push_back(it.id);
  return {{"iteration", ctx.iteration},
          {"call", index},
          {"calls", calls},
          {"answers", answers},
          {"model", arm_label},
          {"hint", hint ? nlohmann::json(hint->id) : nlohmann::json(nullptr)},
          {"items", shown},
          {"call_dropped", call_dropped}};
}

}  // namespace kopt::campaign
