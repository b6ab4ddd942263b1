// A small RAII layer over the SQLite C API: a connection, prepared
// statements with typed binds and reads, and transactions that roll back
// unless committed. Every return code is checked; a failure throws
// kopt::store_error naming the operation, the database path and
// sqlite3_errmsg, so that a message printed by the CLI says what failed and
// where. Nothing here knows kopt's schema: see store.hpp for that.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

struct sqlite3;
struct sqlite3_stmt;

namespace kopt::store {

class statement;

// The size-triggered WAL checkpoint, run by a writing connection right after
// each of its commits (sqlite3_wal_hook, which replaces SQLite's automatic
// PASSIVE checkpoint at 1000 pages). The WAL only grows on a commit, so a
// check after every commit of every writer bounds it by construction: past
// `truncate_bytes` the committer runs wal_checkpoint(TRUNCATE), which takes
// the write lock (no one appends while it runs), copies every frame into the
// database, waits up to `wait` for the readers still on old frames (readers
// are short: one statement or one snapshot), and empties the file. The WAL
// then stays under truncate_bytes plus one transaction per writing
// connection, unless a reader holds one snapshot for longer than `wait`
// (TRUNCATE is then "busy": nothing is lost, the next commit tries again).
// Below truncate_bytes it can run PASSIVE every commit past `passive_pages`,
// as SQLite's own automatic checkpoint does. One TRUNCATE at a time in a
// process: a commit that finds another one running skips its own (the
// other empties the file; if it fails, the next commit tries again).
// docs/daemon.md ("The store over weeks") has the whole policy.
struct wal_policy {
  std::int64_t truncate_bytes = 0;  // 0 or less: no size-triggered TRUNCATE
  int passive_pages = 1000;         // 0 or less: no PASSIVE
  std::chrono::milliseconds wait{5000};
};

// What the size-triggered checkpoints of this process did, over every
// connection (the daemon opens one per campaign step). wal_max_bytes is the
// largest WAL any commit left before its checkpoint (frames x frame size +
// header: the file cannot be larger, since it grows only by frames that a
// commit reports).
struct wal_stats {
  std::int64_t truncated = 0;
  // TRUNCATE did not finish: another connection was checkpointing, or
  // readers or a writer stayed past `wait` (busy); this connection was still
  // reading, a statement in progress (locked).
  std::int64_t busy = 0;
  std::int64_t locked = 0;
  std::int64_t skipped = 0;     // another connection of this process was truncating
  std::int64_t longest_ms = 0;  // the longest size-triggered TRUNCATE
  std::int64_t passive = 0;
  std::int64_t errors = 0;
  std::int64_t wal_max_bytes = 0;
};
wal_stats process_wal_stats() noexcept;

class database {
 public:
  enum class open_mode {
    read_write_create,  // the writer: creates the file if absent
    read_write,         // the file must exist
    read_only,          // readers (CLI inspection): never write, never block the writer
  };

  database(const std::filesystem::path& path, open_mode mode,
           std::chrono::milliseconds busy_timeout = std::chrono::milliseconds(5000));
  ~database();
  database(database&& other) noexcept;
  database& operator=(database&& other) noexcept;
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  // Runs one or more statements that return no rows (schema, pragmas).
  void exec(std::string_view sql);
  statement prepare(std::string_view sql);

  // Reads a single-value pragma such as user_version.
  std::int64_t pragma_int(std::string_view name);
  std::string pragma_text(std::string_view name);

  // WAL checkpoint (sqlite3_wal_checkpoint_v2). `busy` is true when
  // readers or the writer kept it from finishing (not an error: a PASSIVE
  // checkpoint never waits; RESTART/TRUNCATE wait up to the busy timeout).
  enum class checkpoint_mode { passive, full, restart, truncate };
  struct checkpoint_result {
    bool busy = false;
    int wal_frames = 0;  // frames in the WAL (-1 when not in WAL mode)
    int checkpointed_frames = 0;
  };
  checkpoint_result checkpoint(checkpoint_mode mode);
  // Size of <path>-wal on disk, 0 when absent.
  std::int64_t wal_bytes() const;
  // Changes the busy timeout of this connection.
  void set_busy_timeout(std::chrono::milliseconds timeout);
  // Installs the size-triggered checkpoint on this (writing) connection.
  void set_wal_policy(const wal_policy& policy);
  // The largest WAL one of this connection's commits left (0 without a policy).
  std::int64_t wal_max_bytes_seen() const noexcept;

  std::int64_t last_insert_rowid() const noexcept;
  std::int64_t changes() const noexcept;
  bool in_transaction() const noexcept;
  bool read_only() const noexcept { return mode_ == open_mode::read_only; }
  const std::string& path() const noexcept { return path_; }
  sqlite3* handle() const noexcept { return db_; }

  // Throws store_error: "sqlite: <what> (<path>): <errmsg> [<code name>]".
  [[noreturn]] void fail(int rc, std::string_view what) const;

 private:
  struct wal_hook;
  static int on_wal_commit(void* hook, sqlite3* db, const char* schema, int frames);
  sqlite3* db_ = nullptr;
  std::string path_;
  open_mode mode_ = open_mode::read_only;
  std::chrono::milliseconds busy_timeout_{5000};
  // Heap-held so that the hook's pointer stays valid when the database moves.
  std::unique_ptr<wal_hook> wal_;
};

// A prepared statement. Bind indexes are 1-based as in SQLite; column
// indexes are 0-based. An empty std::optional or a null json binds NULL.
class statement {
 public:
  statement(database& db, std::string_view sql);
  ~statement();
  statement(statement&& other) noexcept;
  statement& operator=(statement&& other) noexcept;
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  statement& bind(int index, std::nullptr_t);
  statement& bind(int index, std::int64_t value);
  statement& bind(int index, int value) { return bind(index, static_cast<std::int64_t>(value)); }
  statement& bind(int index, bool value) { return bind(index, static_cast<std::int64_t>(value)); }
  statement& bind(int index, double value);
  statement& bind(int index, std::string_view value);
  statement& bind(int index, const std::string& value) {
    return bind(index, std::string_view(value));
  }
  statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  // JSON is stored as its compact text; null binds SQL NULL.
  statement& bind(int index, const nlohmann::json& value);
  template <typename T>
  statement& bind(int index, const std::optional<T>& value) {
    if (value) return bind(index, *value);
    return bind(index, nullptr);
  }
  // Binds every argument in order, starting at index 1.
  template <typename... Args>
  statement& bind_all(const Args&... args) {
    int i = 0;
    (bind(++i, args), ...);
    return *this;
  }

  // Advances; true when a row is available.
  bool step();
  // Steps to completion; for statements that return no rows.
  void run();
  void reset();

  bool is_null(int col) const;
  std::int64_t get_int(int col) const;
  double get_double(int col) const;
  std::string get_text(int col) const;
  std::optional<std::int64_t> get_opt_int(int col) const;
  std::optional<double> get_opt_double(int col) const;
  std::optional<std::string> get_opt_text(int col) const;
  // NULL reads as json(nullptr); text that is not JSON throws store_error.
  nlohmann::json get_json(int col) const;
  int column_count() const;
  std::string column_name(int col) const;

 private:
  void check_bind(int rc, int index);
  database* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

// BEGIN IMMEDIATE when the connection is in autocommit mode (takes the write
// lock up front, so a read-then-write inside never fails with SQLITE_BUSY
// half-way), otherwise a SAVEPOINT so that typed store calls nest inside a
// caller's transaction. Rolls back on destruction unless committed.
class transaction {
 public:
  // deferred: for readers that want one consistent snapshot across several
  // queries (WAL keeps it without blocking the writer).
  enum class kind { immediate, deferred };
  explicit transaction(database& db, kind k = kind::immediate);
  ~transaction();
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  void commit();

 private:
  database& db_;
  bool nested_ = false;
  bool done_ = false;
  std::string savepoint_;
};

}  // namespace kopt::store
