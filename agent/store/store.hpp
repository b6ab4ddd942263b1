// The kopt store: one SQLite file (WAL mode) that keeps everything a
// campaign produces, opened by one writer (the daemon, or `kopt submit`) and
// any number of read-only readers (CLI inspection), which never block the
// writer. Opening applies the pragmas kopt relies on and migrates the schema
// (see migrations.hpp); the typed calls below cover what the CLI and the
// campaign loop need, and db() gives raw SQL access for anything else, so a
// subsystem can add its own queries without widening this class first.
// docs/schema.md documents every table and column.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "store/records.hpp"
#include "store/sqlite.hpp"

namespace kopt::store {

struct open_options {
  bool read_only = false;
  // How long a statement waits for another connection's lock before it
  // fails with "database is locked".
  std::chrono::milliseconds busy_timeout{5000};
  // Create missing parent directories (writers only).
  bool create_directories = true;
  // Writers: PRAGMA journal_size_limit, the size the WAL file is truncated
  // to after a checkpoint resets it (without it the file keeps its largest
  // size for ever). 64 MiB; -1: no limit.
  std::int64_t journal_size_limit = std::int64_t{64} << 20;
  // Writers: the WAL policy (wal_policy in sqlite.hpp; this is the one place it is
  // decided). After every commit past a quarter of journal_size_limit the
  // committing connection truncates the WAL, waiting up to this long for
  // readers; the quarter leaves room under the limit for one more
  // transaction of each of the other writing connections and for a
  // TRUNCATE that found a reader. No PASSIVE pass below it: with a dozen
  // writing connections, SQLite's PASSIVE every commit past 1000 pages held
  // the checkpoint lock so often that most TRUNCATEs found it taken and the
  // WAL reached twice the threshold (bench/store_scale.sh, 2026-12-02).
  std::chrono::milliseconds wal_checkpoint_wait{5000};
  wal_policy checkpoint_policy() const {
    return {.truncate_bytes = journal_size_limit > 0 ? journal_size_limit / 4 : 0,
            .passive_pages = 0,
            .wait = wal_checkpoint_wait};
  }
};

class store {
 public:
  // Writers create the file if needed, set WAL + synchronous=NORMAL +
  // foreign_keys, and migrate. Readers open read-only and refuse a file
  // that is absent, foreign, or at another schema version.
  static store open(const std::filesystem::path& path, const open_options& options = {});

  database& db() noexcept { return db_; }
  bool read_only() const noexcept { return db_.read_only(); }
  const std::string& path() const noexcept { return db_.path(); }
  // The schema version of the open file (PRAGMA user_version).
  std::int64_t file_schema_version() { return db_.pragma_int("user_version"); }

  // --- operators and workloads ---------------------------------------------
  struct put_operator_result {
    row_id operator_id = 0;
    bool created = false;  // false: a row with the same content hash existed
  };
  // Same content hash -> the existing row (its workloads are not touched:
  // the hash covers them). Otherwise inserts the operator and its workloads.
  put_operator_result put_operator(const operator_record& op,
                                   std::span<const workload_record> workloads);
  std::optional<operator_record> find_operator(row_id id);
  std::optional<operator_record> find_operator_by_hash(std::string_view content_hash);
  std::vector<workload_record> workloads_of(row_id operator_id);

  // --- campaigns -------------------------------------------------------------
  row_id create_campaign(const campaign_record& c);
  std::optional<campaign_record> find_campaign(row_id id);
  // Newest first; filters are optional; `offset` skips that many of the
  // newest rows (paging: `kopt list --limit/--offset`).
  std::vector<campaign_record> list_campaigns(std::optional<campaign_state> state = std::nullopt,
                                              std::optional<std::string> team = std::nullopt,
                                              std::optional<std::int64_t> limit = std::nullopt,
                                              std::int64_t offset = 0);
  // How many rows list_campaigns would return without a limit.
  std::int64_t count_campaigns(std::optional<campaign_state> state = std::nullopt,
                               std::optional<std::string> team = std::nullopt);
  // Counts per state (every state present, zero when none).
  std::map<std::string, std::int64_t> campaign_counts();
  // Sets updated_at; started_at on the first `running`; finished_at on a
  // terminal state. Throws not_found_error for an unknown id.
  void set_campaign_state(row_id id, campaign_state state,
                          std::optional<std::string> stop_reason = std::nullopt);
  // Adds to the spent counters (all deltas may be zero).
  void add_campaign_spend(row_id id, std::int64_t iterations, std::int64_t tokens, double cost_usd,
                          double wall_time_s = 0.0);
  void set_best_candidate(row_id campaign_id, row_id candidate_id, std::optional<double> score);

  // --- iterations ------------------------------------------------------------
  row_id add_iteration(const iteration_record& it);
  void finish_iteration(row_id id, std::string_view status, std::optional<std::string> note = {});
  std::vector<iteration_record> iterations_of(row_id campaign_id);
  // One iteration by its number (UNIQUE (campaign_id, number)).
  std::optional<iteration_record> find_iteration(row_id campaign_id, std::int64_t number);
  std::vector<iteration_summary> iteration_summaries(row_id campaign_id);
  void add_dropout_decisions(row_id iteration_id, std::span<const dropout_decision> decisions);
  std::vector<dropout_decision> dropout_decisions_of(row_id iteration_id);

  // --- candidates, compilations, evaluations ---------------------------------
  row_id add_candidate(const candidate_record& c);
  std::optional<candidate_record> find_candidate(row_id id);
  std::vector<candidate_record> candidates_of(row_id campaign_id);
  // Schema v5 content keys: the oldest candidate of the campaign with that
  // key; whether the campaign has any candidate; the rows still without a
  // key (written before v5) and setting one.
  std::optional<row_id> find_candidate_by_key(row_id campaign_id, std::string_view key);
  bool has_candidates(row_id campaign_id);
  std::vector<candidate_record> candidates_without_key(row_id campaign_id);
  void set_candidate_key(row_id candidate_id, std::string_view key);
  row_id add_compilation(const compilation_record& c);
  std::vector<compilation_record> compilations_of(row_id candidate_id);
  row_id add_evaluation(const evaluation_record& e);
  std::vector<evaluation_record> evaluations_of(row_id candidate_id);

  // --- LLM calls and events --------------------------------------------------
  row_id add_llm_call(const llm_call_record& call);
  std::vector<llm_call_record> llm_calls_of(row_id campaign_id);
  row_id add_event(const event_record& e);
  // The newest event of a kind (index events_by_campaign_kind), and the
  // newest "evaluated" event of a stage.
  std::optional<event_record> latest_event(row_id campaign_id, std::string_view kind);
  std::optional<event_record> latest_evaluated(row_id campaign_id, std::string_view stage);
  // Every event of one kind, oldest first (the same index).
  std::vector<event_record> events_of_kind(row_id campaign_id, std::string_view kind);

  // --- the campaign loop's evaluation journal (schema v5) -------------------
  // Which "evaluated" event (and which subject in it) holds the result of a
  // cache key; the loop writes it in the event's transaction and reads one
  // result at a time, so resuming costs the same after 10 or 10,000
  // iterations. journaled_result: that subject's "result" object.
  void journal_result(row_id campaign_id, std::string_view cache_key, row_id event_id,
                      std::int64_t subject);
  std::optional<nlohmann::json> journaled_result(row_id campaign_id, std::string_view cache_key);
  std::int64_t journal_size(row_id campaign_id);

  // Newest first when limited: the last `limit` events, returned oldest first.
  std::vector<event_record> events_of(std::optional<row_id> campaign_id,
                                      std::optional<std::int64_t> limit = std::nullopt);

 private:
  explicit store(database db) : db_(std::move(db)) {}
  database db_;
};

}  // namespace kopt::store
