#include "store/sqlite.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <limits>
#include <mutex>

#include "common/error.hpp"

namespace kopt::store {

namespace {

// SQLITE_TRANSIENT is an old-style cast in a macro; spell it once here.
sqlite3_destructor_type transient_destructor() noexcept {
  return reinterpret_cast<sqlite3_destructor_type>(static_cast<std::intptr_t>(-1));
}

std::string error_text(sqlite3* db, int rc) {
  std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  msg += " [";
  msg += sqlite3_errstr(rc);
  msg += ", code ";
  msg += std::to_string(rc);
  msg += "]";
  return msg;
}

int to_int_size(std::size_t n, std::string_view what) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw store_error("sqlite: " + std::string(what) + " is too large (" + std::to_string(n) +
                      " bytes)");
  }
  return static_cast<int>(n);
}

// Process-wide: the daemon's step connections come and go.
struct wal_counters {
  std::atomic<std::int64_t> truncated{0}, busy{0}, locked{0}, skipped{0}, longest_ms{0}, passive{0},
      errors{0}, wal_max_bytes{0};
  std::atomic<bool> truncating{false};
};
wal_counters g_wal;

// While a checkpoint runs, this process's writers wait before they take
// the write lock (transaction's BEGIN IMMEDIATE): SQLite's locks are
// polled, not queued, so without this a dozen writers kept re-taking the
// write lock that TRUNCATE waited for, and the WAL grew to 80 MiB while one
// TRUNCATE waited (bench/store_scale.sh, 2026-12-02).
std::mutex g_checkpoint_mu;
std::condition_variable g_checkpoint_done;

bool begin_checkpoint() {
  std::lock_guard lk(g_checkpoint_mu);
  return !g_wal.truncating.exchange(true);
}

void end_checkpoint() {
  {
    std::lock_guard lk(g_checkpoint_mu);
    g_wal.truncating = false;
  }
  g_checkpoint_done.notify_all();
}

// Bounded: a checkpoint ends within its own wait (5 s by default); a writer
// that holds a read snapshot while it waits here only makes that wait run out.
void wait_for_checkpoint() {
  if (!g_wal.truncating.load()) return;
  std::unique_lock lk(g_checkpoint_mu);
  g_checkpoint_done.wait_for(lk, std::chrono::seconds(10), [] { return !g_wal.truncating.load(); });
}

void raise_to(std::atomic<std::int64_t>& max, std::int64_t v) {
  for (auto seen = max.load(); v > seen && !max.compare_exchange_weak(seen, v);) {
  }
}

}  // namespace

wal_stats process_wal_stats() noexcept {
  return {g_wal.truncated.load(), g_wal.busy.load(),         g_wal.locked.load(),
          g_wal.skipped.load(),   g_wal.longest_ms.load(),   g_wal.passive.load(),
          g_wal.errors.load(),    g_wal.wal_max_bytes.load()};
}

struct database::wal_hook {
  wal_policy policy;
  std::chrono::milliseconds busy{5000};  // the connection's own busy timeout, restored after
  std::int64_t frame_bytes = 0;          // page size + the 24-byte frame header
  std::int64_t max_bytes = 0;            // this connection's largest, after a commit
};

std::int64_t database::wal_max_bytes_seen() const noexcept {
  return wal_ ? wal_->max_bytes : 0;
}

// --- database ---------------------------------------------------------------

database::database(const std::filesystem::path& path, open_mode mode,
                   std::chrono::milliseconds busy_timeout)
    : path_(path.string()), mode_(mode), busy_timeout_(busy_timeout) {
  int flags = SQLITE_OPEN_EXRESCODE;
  switch (mode) {
    case open_mode::read_write_create:
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      break;
    case open_mode::read_write:
      flags |= SQLITE_OPEN_READWRITE;
      break;
    case open_mode::read_only:
      flags |= SQLITE_OPEN_READONLY;
      break;
  }
  const int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = "sqlite: cannot open database (" + path_ + "): " + error_text(db_, rc);
    sqlite3_close_v2(db_);  // a handle is returned even on failure
    db_ = nullptr;
    throw store_error(msg);
  }
  sqlite3_extended_result_codes(db_, 1);
  const auto ms = busy_timeout.count();
  const int timeout = ms > std::numeric_limits<int>::max()
                          ? std::numeric_limits<int>::max()
                          : static_cast<int>(std::max<std::int64_t>(ms, 0));
  if (const int brc = sqlite3_busy_timeout(db_, timeout); brc != SQLITE_OK) {
    std::string msg = "sqlite: busy_timeout (" + path_ + "): " + error_text(db_, brc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw store_error(msg);
  }
}

database::~database() {
  if (db_ != nullptr) {
    // The hook's state is freed with this object; close_v2 may keep a
    // zombie connection until its last statement is finalized.
    if (wal_) sqlite3_wal_hook(db_, nullptr, nullptr);
    // close_v2 defers the close until outstanding statements finish instead
    // of failing with SQLITE_BUSY; nothing to report from a destructor.
    sqlite3_close_v2(db_);
  }
}

database::database(database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      path_(std::move(other.path_)),
      mode_(other.mode_),
      busy_timeout_(other.busy_timeout_),
      wal_(std::move(other.wal_)) {}

database& database::operator=(database&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) {
      if (wal_) sqlite3_wal_hook(db_, nullptr, nullptr);
      sqlite3_close_v2(db_);
    }
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
    mode_ = other.mode_;
    busy_timeout_ = other.busy_timeout_;
    wal_ = std::move(other.wal_);
  }
  return *this;
}

void database::fail(int rc, std::string_view what) const {
  throw store_error("sqlite: " + std::string(what) + " (" + path_ + "): " + error_text(db_, rc));
}

void database::exec(std::string_view sql) {
  const std::string text(sql);
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    std::string head = text.substr(0, 80);
    throw store_error("sqlite: exec \"" + head + (text.size() > 80 ? "...\"" : "\"") + " (" +
                      path_ + "): " + msg + " [" + sqlite3_errstr(rc) + ", code " +
                      std::to_string(rc) + "]");
  }
}

statement database::prepare(std::string_view sql) {
  return statement(*this, sql);
}

std::int64_t database::pragma_int(std::string_view name) {
  statement st(*this, "PRAGMA " + std::string(name));
  if (!st.step())
    throw store_error("sqlite: PRAGMA " + std::string(name) + " returned no row (" + path_ + ")");
  return st.get_int(0);
}

std::string database::pragma_text(std::string_view name) {
  statement st(*this, "PRAGMA " + std::string(name));
  if (!st.step())
    throw store_error("sqlite: PRAGMA " + std::string(name) + " returned no row (" + path_ + ")");
  return st.get_text(0);
}

database::checkpoint_result database::checkpoint(checkpoint_mode mode) {
  int m = SQLITE_CHECKPOINT_PASSIVE;
  switch (mode) {
    case checkpoint_mode::passive:
      m = SQLITE_CHECKPOINT_PASSIVE;
      break;
    case checkpoint_mode::full:
      m = SQLITE_CHECKPOINT_FULL;
      break;
    case checkpoint_mode::restart:
      m = SQLITE_CHECKPOINT_RESTART;
      break;
    case checkpoint_mode::truncate:
      m = SQLITE_CHECKPOINT_TRUNCATE;
      break;
  }
  checkpoint_result r;
  // One checkpoint at a time in the process, whoever runs it: SQLite's
  // checkpoint lock would turn the second into an immediate SQLITE_BUSY.
  if (!begin_checkpoint()) {
    r.busy = true;
    return r;
  }
  const int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, m, &r.wal_frames, &r.checkpointed_frames);
  end_checkpoint();
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
    r.busy = true;
    return r;
  }
  if (rc != SQLITE_OK) fail(rc, "wal_checkpoint");
  return r;
}

std::int64_t database::wal_bytes() const {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path_ + "-wal", ec);
  return ec ? 0 : static_cast<std::int64_t>(n);
}

namespace {
int clamp_ms(std::chrono::milliseconds timeout) {
  const auto ms = timeout.count();
  return ms > std::numeric_limits<int>::max() ? std::numeric_limits<int>::max()
                                              : static_cast<int>(std::max<std::int64_t>(ms, 0));
}
}  // namespace

void database::set_busy_timeout(std::chrono::milliseconds timeout) {
  if (const int rc = sqlite3_busy_timeout(db_, clamp_ms(timeout)); rc != SQLITE_OK)
    fail(rc, "busy_timeout");
  busy_timeout_ = timeout;
  if (wal_) wal_->busy = timeout;
}

void database::set_wal_policy(const wal_policy& policy) {
  if (mode_ == open_mode::read_only) return;  // readers never commit
  auto hook = std::make_unique<wal_hook>();
  hook->policy = policy;
  hook->busy = busy_timeout_;
  hook->frame_bytes = pragma_int("page_size") + 24;
  // sqlite3_wal_hook replaces the automatic checkpoint (sqlite3_wal_autocheckpoint
  // is a wal hook too): the policy's own passes take its place.
  sqlite3_wal_hook(db_, &database::on_wal_commit, hook.get());
  wal_ = std::move(hook);
}

// Runs inside sqlite3_step of the COMMIT, after the commit is durable and the
// write lock released. It must not throw (C frames) and returns SQLITE_OK
// whatever happened: an error code would make the committed statement
// report a failure. Busy and errors are counted (process_wal_stats).
int database::on_wal_commit(void* ctx, sqlite3* db, const char* schema, int frames) {
  auto* h = static_cast<wal_hook*>(ctx);
  const std::int64_t bytes = frames > 0 ? 32 + frames * h->frame_bytes : 0;
  h->max_bytes = std::max(h->max_bytes, bytes);
  raise_to(g_wal.wal_max_bytes, bytes);
  const auto& p = h->policy;
  if (p.truncate_bytes > 0 && bytes > p.truncate_bytes) {
    // One at a time: the others would only find the checkpoint lock taken
    // (SQLITE_BUSY at once) and count a failure that is not one.
    if (!begin_checkpoint()) {
      ++g_wal.skipped;
      return SQLITE_OK;
    }
    // TRUNCATE waits through the busy handler: for its own bounded wait,
    // then the connection's timeout again.
    const auto t0 = std::chrono::steady_clock::now();
    sqlite3_busy_timeout(db, clamp_ms(p.wait));
    const int rc =
        sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
    sqlite3_busy_timeout(db, clamp_ms(h->busy));
    end_checkpoint();
    raise_to(g_wal.longest_ms, std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now() - t0)
                                   .count());
    if (rc == SQLITE_OK)
      ++g_wal.truncated;
    else if ((rc & 0xff) == SQLITE_BUSY)
      ++g_wal.busy;
    else if ((rc & 0xff) == SQLITE_LOCKED)
      ++g_wal.locked;
    else
      ++g_wal.errors;
  } else if (p.passive_pages > 0 && frames >= p.passive_pages) {
    const int rc =
        sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    if (rc == SQLITE_OK)
      ++g_wal.passive;
    else if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
      ++g_wal.errors;
  }
  return SQLITE_OK;
}

std::int64_t database::last_insert_rowid() const noexcept {
  return sqlite3_last_insert_rowid(db_);
}
std::int64_t database::changes() const noexcept {
  return sqlite3_changes64(db_);
}
bool database::in_transaction() const noexcept {
  return sqlite3_get_autocommit(db_) == 0;
}

// --- statement --------------------------------------------------------------

statement::statement(database& db, std::string_view sql) : db_(&db), sql_(sql) {
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v2(db.handle(), sql_.data(), to_int_size(sql_.size(), "statement"),
                                    &stmt_, &tail);
  if (rc != SQLITE_OK) db.fail(rc, "prepare \"" + sql_.substr(0, 120) + "\"");
  if (stmt_ == nullptr)
    throw store_error("sqlite: empty statement \"" + sql_ + "\" (" + db.path() + ")");
}

statement::~statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);  // the error, if any, was reported by step()
}

statement::statement(statement&& other) noexcept
    : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)), sql_(std::move(other.sql_)) {}

statement& statement::operator=(statement&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = std::exchange(other.stmt_, nullptr);
    sql_ = std::move(other.sql_);
  }
  return *this;
}

void statement::check_bind(int rc, int index) {
  if (rc != SQLITE_OK) {
    db_->fail(rc,
              "bind parameter " + std::to_string(index) + " of \"" + sql_.substr(0, 120) + "\"");
  }
}

statement& statement::bind(int index, std::nullptr_t) {
  check_bind(sqlite3_bind_null(stmt_, index), index);
  return *this;
}
statement& statement::bind(int index, std::int64_t value) {
  check_bind(sqlite3_bind_int64(stmt_, index, value), index);
  return *this;
}
statement& statement::bind(int index, double value) {
  check_bind(sqlite3_bind_double(stmt_, index, value), index);
  return *this;
}
statement& statement::bind(int index, std::string_view value) {
  check_bind(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), transient_destructor(),
                                 SQLITE_UTF8),
             index);
  return *this;
}
statement& statement::bind(int index, const nlohmann::json& value) {
  if (value.is_null()) return bind(index, nullptr);
  return bind(index, std::string_view(value.dump()));
}

bool statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Leave the statement reusable and report the statement that failed.
  sqlite3_reset(stmt_);
  db_->fail(rc, "step \"" + sql_.substr(0, 120) + "\"");
}

void statement::run() {
  while (step()) {
  }
}

void statement::reset() {
  // sqlite3_reset repeats the error of the last step, already reported.
  sqlite3_reset(stmt_);
  if (const int rc = sqlite3_clear_bindings(stmt_); rc != SQLITE_OK)
    db_->fail(rc, "clear bindings");
}

bool statement::is_null(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}
std::int64_t statement::get_int(int col) const {
  return sqlite3_column_int64(stmt_, col);
}
double statement::get_double(int col) const {
  return sqlite3_column_double(stmt_, col);
}

std::string statement::get_text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  const int n = sqlite3_column_bytes(stmt_, col);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
}

std::optional<std::int64_t> statement::get_opt_int(int col) const {
  if (is_null(col)) return std::nullopt;
  return get_int(col);
}
std::optional<double> statement::get_opt_double(int col) const {
  if (is_null(col)) return std::nullopt;
  return get_double(col);
}
std::optional<std::string> statement::get_opt_text(int col) const {
  if (is_null(col)) return std::nullopt;
  return get_text(col);
}

nlohmann::json statement::get_json(int col) const {
  if (is_null(col)) return nullptr;
  const std::string text = get_text(col);
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw store_error("sqlite: column " + column_name(col) + " holds text that is not JSON (" +
                      db_->path() + ")");
  }
  return j;
}

int statement::column_count() const {
  return sqlite3_column_count(stmt_);
}
std::string statement::column_name(int col) const {
  const char* n = sqlite3_column_name(stmt_, col);
  return n != nullptr ? n : "?";
}

// --- transaction ------------------------------------------------------------

namespace {
std::atomic<std::uint64_t> savepoint_counter{0};
}

transaction::transaction(database& db, kind k) : db_(db), nested_(db.in_transaction()) {
  if (nested_) {
    savepoint_ = "kopt_sp_" + std::to_string(savepoint_counter.fetch_add(1));
    db_.exec("SAVEPOINT " + savepoint_);
  } else {
    if (k == kind::immediate) wait_for_checkpoint();
    db_.exec(k == kind::immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED");
  }
}

transaction::~transaction() {
  if (done_) return;
  // Best effort: a rollback that fails leaves SQLite to roll back when the
  // connection closes; a destructor cannot report it.
  if (nested_) {
    const std::string sql = "ROLLBACK TO " + savepoint_ + "; RELEASE " + savepoint_;
    sqlite3_exec(db_.handle(), sql.c_str(), nullptr, nullptr, nullptr);
  } else if (db_.in_transaction()) {
    sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void transaction::commit() {
  if (done_) throw store_error("sqlite: transaction committed twice (" + db_.path() + ")");
  db_.exec(nested_ ? "RELEASE " + savepoint_ : std::string("COMMIT"));
  done_ = true;
}

}  // namespace kopt::store
