// The K LLM calls of one iteration, planned so that they differ. Without a
// plan all K calls would send byte-identical prompts, and K answers to one
// prompt explore little. Each call gets its model (from the llm::router),
// its own strategy hint (appended at the very end of the prompt, so that
// the calls still share the long cacheable prefix) and, when configured,
// its own dropout draw over the iteration's optional items (call 0 always
// shows them all, so the iteration-level dropout record stays true for at
// least one call). A model with `n` > 1 serves several consecutive answers
// from one call, which then share one prompt. Every draw depends only on
// (the iteration's source seed, the call index, the item id), as the
// iteration's own dropout does, so a resumed iteration plans the same calls.
// What each call showed is recorded with it (llm::request::meta), which is
// what makes per-call attribution possible.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "campaign/types.hpp"
#include "llm/router.hpp"

namespace kopt::campaign {

struct strategy_hint {
  std::string id;
  std::string text;
};
// The built-in hints, in rotation order.
const std::vector<strategy_hint>& strategy_hints();

struct call_plan {
  std::size_t index = 0;                  // 0-based call number within the iteration
  std::size_t arm = 0;                    // router arm
  int answers = 1;                        // n for this call
  std::vector<prompt_item> items;         // what this call shows
  std::vector<std::string> call_dropped;  // optional items this call's own draw removed
  std::optional<strategy_hint> hint;
  // Recorded with the call (llm::request::meta).
  nlohmann::json meta(const prompt_context& ctx, std::size_t calls,
                      const std::string& arm_label) const;
};

// `answers` candidates wanted (ctx.k); `campaign_stalled` as router::choose.
std::vector<call_plan> plan_calls(const prompt_context& ctx, llm::router& models,
                                  const llm::diversity_options& diversity);

// The user message with the call's hint appended (unchanged without one).
std::string with_hint(const std::string& user, const call_plan& p);

// Whether the loop has escalated for this context (restart from an elite,
// new algorithm): what moves the router to stronger models.
bool campaign_stalled(const prompt_context& ctx) noexcept;

}  // namespace kopt::campaign
