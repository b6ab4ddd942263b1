// Schema versions of the kopt store and the code that brings a database up
// to date. The version is SQLite's `PRAGMA user_version`; the file is marked
// as kopt's with `PRAGMA application_id` so that kopt refuses to migrate (and
// so damage) a SQLite file that belongs to something else. Each step runs in
// its own BEGIN IMMEDIATE transaction: a step that fails leaves the database
// at the previous version, never half-migrated. docs/schema.md explains the
// policy; steps are append-only once released.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "store/sqlite.hpp"

namespace kopt::store {

// 'kopt' in ASCII (0x6B6F7074). Shown by `sqlite3 kopt.db "PRAGMA application_id"`
// as 1802465396; also lets file(1)-style tools recognise the database.
inline constexpr std::int32_t application_id = 0x6B6F7074;

struct migration {
  int version;                   // user_version after this step
  std::string_view description;  // recorded in schema_migrations
  std::string_view sql;          // one or more statements
};

// The steps this binary knows, in order; the last one's version is the
// current schema version.
std::span<const migration> migrations() noexcept;
int schema_version() noexcept;

// Checks that `db` is empty or kopt's (application_id), that it is not newer
// than `steps` know, and applies the missing steps. Exposed with an explicit
// list so that tests can inject a failing step; the store calls it with
// migrations(). Throws store_error.
void migrate(database& db, std::span<const migration> steps);

// The checks migrate() starts with, for read-only connections: refuse a
// foreign file, a newer schema, or one not migrated to `expected_version`.
void check_compatible(database& db, int expected_version);

}  // namespace kopt::store
