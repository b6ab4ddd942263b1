// Export of a campaign's winner as plain files, so that it can be reviewed,
// rebuilt and re-measured without kopt's database: the device code, the
// candidate in kopt's format (tunable defaults = the tuned values), the
// launch plan, the parameter values, the compile flags, the device and the
// measurements (final verification with fresh seeds, head-to-head with the
// baseline), and a README that says how the numbers were taken.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace kopt::campaign {

struct export_result {
  std::filesystem::path dir;
  std::vector<std::string> files;
};

// Throws kopt::not_found_error when the campaign has no best candidate.
export_result export_winner(store::store& db, store::row_id campaign_id,
                            const std::filesystem::path& dir);

}  // namespace kopt::campaign
