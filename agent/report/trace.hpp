// A campaign as a Chrome trace-event file (JSON object format), which
// Perfetto (ui.perfetto.dev) and chrome://tracing open: one process per
// campaign, one track for iterations, LLM calls on as many lanes as were in
// flight at once, and per worker (GPU, by device name and UUID) a track for
// compilations and one for evaluation batches; promotions and escalations
// as instant events; tokens, cost and the incumbent's fraction of speed of
// light as counters.
//
// What the store has and what is reconstructed: LLM calls have their end
// (created_at) and latency; compilations their end and duration; iterations
// their start and end. Evaluations have no start time in the store: a batch
// ("evaluated" event) is drawn from the loop's previous journal entry (or the
// iteration's start) to the moment it was recorded, which is when the loop
// waited for it. Spans without a duration are omitted.
#pragma once

#include <nlohmann/json.hpp>

#include "report/data.hpp"

namespace kopt::report {

nlohmann::json chrome_trace(const campaign_data& d);

}  // namespace kopt::report
