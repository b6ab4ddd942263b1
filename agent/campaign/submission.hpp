// How an operator and its campaign settings are written to the store: shared
// by `kopt submit`/`eval`/`run` (agent/cli) and the daemon's queue and spool
// (agent/daemon), so that a campaign reads the same whichever way it came in.
#pragma once

#include <nlohmann/json.hpp>

#include "config/operator.hpp"
#include "store/store.hpp"

namespace kopt::campaign {

// The operator snapshot, content hash, absolute source path and workloads
// (with their positions); an operator of the same content is reused.
store::store::put_operator_result store_operator(store::store& db, const config::operator_config& op);

// The campaign part of the config, typed fields only, so that what is read
// back from campaigns.settings_json does not depend on how the snapshot
// happens to be laid out.
nlohmann::json campaign_settings_json(const config::campaign_settings& c);

}  // namespace kopt::campaign
