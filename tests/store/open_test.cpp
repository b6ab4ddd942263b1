// Opening, pragmas, identity checks and migrations of the kopt store.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <vector>

#include "common/error.hpp"
#include "store/migrations.hpp"
#include "store/store.hpp"
#include "temp_dir.hpp"

namespace ks = kopt::store;

namespace {

// A raw connection, to prepare files the way another program would.
void raw_exec(const std::filesystem::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string msg = err != nullptr ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

std::int64_t count_rows(ks::database& db, const std::string& sql) {
  auto st = db.prepare(sql);
  EXPECT_TRUE(st.step());
  return st.get_int(0);
}

bool has_table(ks::database& db, const std::string& name) {
  auto st = db.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?");
  st.bind(1, name);
  st.step();
  return st.get_int(0) == 1;
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const kopt::error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(StoreOpen, FreshDatabaseIsMigratedWithPragmas) {
  kopt::test::temp_dir dir;
  const auto path = dir / "sub/dir/kopt.db";  // parent directories are created
  auto s = ks::store::open(path);
  auto& db = s.db();
  EXPECT_EQ(db.pragma_int("user_version"), ks::schema_version());
  EXPECT_EQ(ks::schema_version(), 5);
  EXPECT_EQ(db.pragma_int("application_id"), ks::application_id);
  EXPECT_EQ(db.pragma_int("application_id"), 0x6B6F7074);
  EXPECT_EQ(db.pragma_text("journal_mode"), "wal");
  EXPECT_EQ(db.pragma_int("synchronous"), 1);  // NORMAL
  EXPECT_EQ(db.pragma_int("foreign_keys"), 1);
  EXPECT_EQ(count_rows(db, "SELECT count(*) FROM schema_migrations WHERE version = 1"), 1);
  for (const char* t :
       {"operators", "workloads", "campaigns", "iterations", "candidates", "compilations",
        "evaluations", "llm_calls", "dropout_decisions", "events", "submissions"}) {
    EXPECT_TRUE(has_table(db, t)) << t;
  }
  EXPECT_FALSE(s.read_only());
}

TEST(StoreOpen, ReopenIsIdempotentAndKeepsData) {
  kopt::test::temp_dir dir;
  const auto path = dir / "kopt.db";
  {
    auto s = ks::store::open(path);
    s.add_event({.kind = "test", .message = "first open"});
  }
  {
    auto s = ks::store::open(path);
    EXPECT_EQ(s.db().pragma_int("user_version"), ks::schema_version());
    EXPECT_EQ(count_rows(s.db(), "SELECT count(*) FROM schema_migrations"), ks::schema_version());
    auto events = s.events_of(std::nullopt);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].message, "first open");
  }
  // Migrating an up-to-date database again is a no-op.
  ks::database db(path, ks::database::open_mode::read_write);
  ks::migrate(db, ks::migrations());
  EXPECT_EQ(count_rows(db, "SELECT count(*) FROM schema_migrations"), ks::schema_version());
}

TEST(StoreOpen, RefusesNewerSchemaVersion) {
  kopt::test::temp_dir dir;
  const auto path = dir / "kopt.db";
  { auto s = ks::store::open(path); }
  raw_exec(path, "PRAGMA user_version = 99");
  const std::string msg = error_of([&] { ks::store::open(path); });
  EXPECT_NE(msg.find("schema version 99"), std::string::npos) << msg;
  EXPECT_NE(msg.find("newer than this kopt knows"), std::string::npos) << msg;
  const std::string ro = error_of([&] { ks::store::open(path, {.read_only = true}); });
  EXPECT_NE(ro.find("newer"), std::string::npos) << ro;
  // Nothing was changed by the refused open.
  ks::database db(path, ks::database::open_mode::read_only);
  EXPECT_EQ(db.pragma_int("user_version"), 99);
}

TEST(StoreOpen, RefusesForeignApplicationId) {
  kopt::test::temp_dir dir;
  const auto path = dir / "other.db";
  raw_exec(path, "PRAGMA application_id = 42; CREATE TABLE t(x); INSERT INTO t VALUES (1);");
  const std::string msg = error_of([&] { ks::store::open(path); });
  EXPECT_NE(msg.find("not a kopt database"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0x0000002a"), std::string::npos) << msg;
  ks::database db(path, ks::database::open_mode::read_only);
  EXPECT_EQ(db.pragma_int("application_id"), 42);
  EXPECT_EQ(db.pragma_int("user_version"), 0);
  EXPECT_NE(db.pragma_text("journal_mode"), "wal");  // untouched
  EXPECT_FALSE(has_table(db, "campaigns"));
}

TEST(StoreOpen, RefusesForeignTablesWithoutApplicationId) {
  kopt::test::temp_dir dir;
  const auto path = dir / "other.db";
  raw_exec(path, "CREATE TABLE notes(x TEXT);");
  const std::string msg = error_of([&] { ks::store::open(path); });
  EXPECT_NE(msg.find("did not create"), std::string::npos) << msg;
}

TEST(StoreOpen, FailingMigrationStepLeavesPreviousVersion) {
  kopt::test::temp_dir dir;
  const auto path = dir / "kopt.db";
  { auto s = ks::store::open(path); }

  std::vector<ks::migration> steps(ks::migrations().begin(), ks::migrations().end());
  // A step after the last real one (the current version + 1).
  const int cur = ks::schema_version();
  const int next = cur + 1;
  steps.push_back({next, "bad step",
                   "CREATE TABLE added_by_next(x INTEGER);"
                   "INSERT INTO added_by_next VALUES (1);"
                   "INSERT INTO no_such_table VALUES (1);"});
  ks::database db(path, ks::database::open_mode::read_write);
  const std::string msg = error_of([&] { ks::migrate(db, steps); });
  EXPECT_NE(msg.find("migration to schema version " + std::to_string(next) + " failed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("stays at version " + std::to_string(cur)), std::string::npos) << msg;
  EXPECT_NE(msg.find("no_such_table"), std::string::npos) << msg;
  EXPECT_EQ(db.pragma_int("user_version"), cur);
  EXPECT_FALSE(has_table(db, "added_by_next"));
  EXPECT_EQ(count_rows(db, "SELECT count(*) FROM schema_migrations"), cur);
  EXPECT_FALSE(db.in_transaction());

  // A correct next step then applies on the same connection.
  steps.back() = {next, "good step", "CREATE TABLE added_by_next(x INTEGER);"};
  ks::migrate(db, steps);
  EXPECT_EQ(db.pragma_int("user_version"), next);
  EXPECT_TRUE(has_table(db, "added_by_next"));
  EXPECT_EQ(count_rows(db, "SELECT count(*) FROM schema_migrations WHERE version = " + std::to_string(next)), 1);
}

TEST(StoreOpen, FailingFirstStepLeavesEmptyFile) {
  kopt::test::temp_dir dir;
  const auto path = dir / "kopt.db";
  ks::database db(path, ks::database::open_mode::read_write_create);
  const std::vector<ks::migration> steps{{1, "broken", "CREATE TABLE a(x); SELEC 1;"}};
  EXPECT_THROW(ks::migrate(db, steps), kopt::store_error);
  EXPECT_EQ(db.pragma_int("user_version"), 0);
  EXPECT_EQ(db.pragma_int("application_id"), 0);
  EXPECT_FALSE(has_table(db, "a"));
}

TEST(StoreOpen, ReadOnlyOpenRules) {
  kopt::test::temp_dir dir;
  const auto path = dir / "kopt.db";
  EXPECT_THROW(ks::store::open(path, {.read_only = true}), kopt::not_found_error);
  EXPECT_FALSE(std::filesystem::exists(path));  // a reader never creates the file

  { auto s = ks::store::open(path); }
  auto reader = ks::store::open(path, {.read_only = true});
  EXPECT_TRUE(reader.read_only());
  EXPECT_TRUE(reader.list_campaigns().empty());
  const std::string msg = error_of([&] { reader.add_event({.kind = "x", .message = "y"}); });
  EXPECT_NE(msg.find("readonly"), std::string::npos) << msg;

  // A reader refuses a database that still needs migrating.
  ks::database db(path, ks::database::open_mode::read_only);
  const std::string older = error_of([&] { ks::check_compatible(db, ks::schema_version() + 1); });
  EXPECT_NE(older.find("older than this kopt"), std::string::npos) << older;

  // And an empty file.
  const auto empty = dir / "empty.db";
  { ks::database create(empty, ks::database::open_mode::read_write_create); }
  const std::string e = error_of([&] { ks::store::open(empty, {.read_only = true}); });
  EXPECT_NE(e.find("empty"), std::string::npos) << e;
}

TEST(StoreOpen, UnopenablePathSaysWhere) {
  kopt::test::temp_dir dir;
  const auto blocker = dir / "file";
  raw_exec(blocker, "CREATE TABLE t(x)");
  // A database "inside" a regular file: the directory cannot be created.
  const auto path = blocker / "kopt.db";
  const std::string msg = error_of([&] { ks::store::open(path); });
  EXPECT_NE(msg.find(blocker.string()), std::string::npos) << msg;
  // A directory is not a database.
  const std::string dmsg = error_of([&] { ks::store::open(dir.path()); });
  EXPECT_NE(dmsg.find(dir.path().string()), std::string::npos) << dmsg;
  EXPECT_FALSE(dmsg.empty());
}
