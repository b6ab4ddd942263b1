// Entry point of the operator validator (validate.cpp), used by the loaders
// in operator.cpp.
#pragma once

#include <filesystem>
#include <optional>

#include "config/detail/context.hpp"

namespace kopt::config::detail {

// Builds the model from a parsed document, reporting every problem into
// ctx; returns the model only when there are no errors. `loc` may be null
// (then diagnostics carry no positions).
std::optional<operator_config> parse_operator(context& ctx, const json& doc,
                                              const std::filesystem::path& base_dir,
                                              const json_locator* loc);

}  // namespace kopt::config::detail
