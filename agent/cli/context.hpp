// What every `kopt` command shares: the global options (database location,
// verbosity, busy timeout), how the database path is resolved, and opening
// the store for reading or writing. Command groups receive a context& at
// registration and read it when their callback runs (after parsing), so a
// global option given after the subcommand is seen as well.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "config/operator.hpp"
#include "store/store.hpp"

namespace kopt::cli {

// Reads an environment variable; injectable so that tests need no setenv.
using env_lookup = std::function<std::optional<std::string>(const char* name)>;
env_lookup process_env();

struct db_location {
  std::filesystem::path path;
  std::string source;  // "--db", "KOPT_DB", "XDG_STATE_HOME", "HOME"
};

// --db, then $KOPT_DB, then $XDG_STATE_HOME/kopt/kopt.db, then
// ~/.local/state/kopt/kopt.db. Empty variables count as unset and a
// relative XDG_STATE_HOME is ignored (XDG Base Directory spec). Throws
// kopt::error when none applies (no HOME).
db_location resolve_db_path(const std::string& db_flag, const env_lookup& env);

struct context {
  std::string db_flag;
  std::int64_t busy_timeout_ms = 5000;
  int verbosity = 0;  // -v: info, -vv: debug
  env_lookup env = process_env();

  db_location database() const;
  // Creates the file and its directories if needed; migrates.
  store::store open_writer() const;
  // Read-only; throws not_found_error when there is no database yet.
  store::store open_reader() const;
};

// Stores an operator (its snapshot, content hash, source path and workloads
// in config order); the same content returns the existing row. Shared by
// submit, eval and run so that an operator is recorded one way.
store::store::put_operator_result store_operator(store::store& db, const config::operator_config& op);

}  // namespace kopt::cli
