#include "cli/context.hpp"

#include "campaign/submission.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "common/error.hpp"

namespace kopt::cli {

env_lookup process_env() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

db_location resolve_db_path(const std::string& db_flag, const env_lookup& env) {
  auto get = [&](const char* name) -> std::optional<std::string> {
    auto v = env(name);
    if (!v || v->empty()) return std::nullopt;
    return v;
  };
  if (!db_flag.empty()) return {db_flag, "--db"};
  if (auto v = get("KOPT_DB")) return {*v, "KOPT_DB"};
  if (auto v = get("XDG_STATE_HOME"); v && std::filesystem::path(*v).is_absolute()) {
    return {std::filesystem::path(*v) / "kopt" / "kopt.db", "XDG_STATE_HOME"};
  }
  if (auto v = get("HOME")) {
    return {std::filesystem::path(*v) / ".local" / "state" / "kopt" / "kopt.db", "HOME"};
  }
  throw kopt::store_error(
      "cannot place the database: none of --db, KOPT_DB, XDG_STATE_HOME or HOME is set");
}

db_location context::database() const {
  return resolve_db_path(db_flag, env);
}

store::store context::open_writer() const {
  const db_location loc = database();
  spdlog::debug("database {} (from {}), opening for writing", loc.path.string(), loc.source);
  return store::store::open(loc.path, {.read_only = false,
                                       .busy_timeout = std::chrono::milliseconds(busy_timeout_ms),
                                       .create_directories = true});
}

store::store context::open_reader() const {
  const db_location loc = database();
  spdlog::debug("database {} (from {}), opening read-only", loc.path.string(), loc.source);
  return store::store::open(loc.path, {.read_only = true,
                                       .busy_timeout = std::chrono::milliseconds(busy_timeout_ms),
                                       .create_directories = false});
}

store::store::put_operator_result store_operator(store::store& db, const config::operator_config& op) {
  return campaign::store_operator(db, op);
}

}  // namespace kopt::cli
