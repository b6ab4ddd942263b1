// Database location rules of the CLI: --db, KOPT_DB, XDG_STATE_HOME, HOME.
#include <gtest/gtest.h>

#include <map>

#include "cli/context.hpp"
#include "common/error.hpp"

namespace {

kopt::cli::env_lookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST(DbPath, PrecedenceFlagThenEnvThenXdgThenHome) {
  using kopt::cli::resolve_db_path;
  const auto all =
      env_of({{"KOPT_DB", "/env/k.db"}, {"XDG_STATE_HOME", "/xdg"}, {"HOME", "/home/u"}});
  auto r = resolve_db_path("/flag/k.db", all);
  EXPECT_EQ(r.path, "/flag/k.db");
  EXPECT_EQ(r.source, "--db");
  r = resolve_db_path("", all);
  EXPECT_EQ(r.path, "/env/k.db");
  EXPECT_EQ(r.source, "KOPT_DB");
  r = resolve_db_path("", env_of({{"XDG_STATE_HOME", "/xdg"}, {"HOME", "/home/u"}}));
  EXPECT_EQ(r.path, "/xdg/kopt/kopt.db");
  EXPECT_EQ(r.source, "XDG_STATE_HOME");
  r = resolve_db_path("", env_of({{"HOME", "/home/u"}}));
  EXPECT_EQ(r.path, "/home/u/.local/state/kopt/kopt.db");
  EXPECT_EQ(r.source, "HOME");
}

TEST(DbPath, EmptyAndRelativeVariablesAreIgnored) {
  using kopt::cli::resolve_db_path;
  auto r = resolve_db_path(
      "", env_of({{"KOPT_DB", ""}, {"XDG_STATE_HOME", "relative/state"}, {"HOME", "/home/u"}}));
  EXPECT_EQ(r.path, "/home/u/.local/state/kopt/kopt.db");
  r = resolve_db_path("", env_of({{"XDG_STATE_HOME", ""}, {"HOME", "/h"}}));
  EXPECT_EQ(r.source, "HOME");
  EXPECT_THROW(resolve_db_path("", env_of({})), kopt::store_error);
}
