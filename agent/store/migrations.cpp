#include "store/migrations.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <string>

#include "common/error.hpp"

namespace kopt::store {

namespace {

// Schema v1. Timestamps are unix epoch milliseconds (UTC) in INTEGER columns:
// they sort, subtract and compare without parsing; docs/schema.md shows how
// to print them as ISO-8601. JSON columns are TEXT checked with json_valid.
// Enumerations are TEXT with CHECK constraints so that a query reads well and
// a bad value fails at insert time rather than confusing a report later.
constexpr std::string_view schema_v1 = R"sql(
CREATE TABLE schema_migrations (
  version     INTEGER PRIMARY KEY,
  description TEXT NOT NULL,
  applied_at  INTEGER NOT NULL
);

CREATE TABLE operators (
  id           INTEGER PRIMARY KEY,
  name         TEXT NOT NULL,
  op_type      TEXT NOT NULL,
  config_json  TEXT NOT NULL CHECK (json_valid(config_json)),
  content_hash TEXT NOT NULL UNIQUE,
  source_path  TEXT,
  created_at   INTEGER NOT NULL
);
CREATE INDEX operators_by_name ON operators(name, created_at);

CREATE TABLE workloads (
  id          INTEGER PRIMARY KEY,
  operator_id INTEGER NOT NULL REFERENCES operators(id) ON DELETE CASCADE,
  key         TEXT NOT NULL,
  position    INTEGER NOT NULL,
  axes_json   TEXT NOT NULL CHECK (json_valid(axes_json)),
  weight      REAL NOT NULL CHECK (weight > 0),
  UNIQUE (operator_id, key)
);

CREATE TABLE campaigns (
  id                 INTEGER PRIMARY KEY,
  operator_id        INTEGER NOT NULL REFERENCES operators(id),
  state              TEXT NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued','running','paused','done','failed','cancelled')),
  provider           TEXT NOT NULL,
  model              TEXT NOT NULL DEFAULT '',
  settings_json      TEXT NOT NULL CHECK (json_valid(settings_json)),
  budget_iterations  INTEGER CHECK (budget_iterations IS NULL OR budget_iterations >= 0),
  budget_wall_time_s REAL    CHECK (budget_wall_time_s IS NULL OR budget_wall_time_s >= 0),
  budget_tokens      INTEGER CHECK (budget_tokens IS NULL OR budget_tokens >= 0),
  budget_cost_usd    REAL    CHECK (budget_cost_usd IS NULL OR budget_cost_usd >= 0),
  spent_iterations   INTEGER NOT NULL DEFAULT 0,
  spent_tokens       INTEGER NOT NULL DEFAULT 0,
  spent_cost_usd     REAL    NOT NULL DEFAULT 0,
  spent_wall_time_s  REAL    NOT NULL DEFAULT 0,
  best_candidate_id  INTEGER REFERENCES candidates(id),
  best_score         REAL,
  priority           INTEGER NOT NULL DEFAULT 0,
  team               TEXT NOT NULL DEFAULT '',
  created_at         INTEGER NOT NULL,
  updated_at         INTEGER NOT NULL,
  started_at         INTEGER,
  finished_at        INTEGER,
  stop_reason        TEXT
);
CREATE INDEX campaigns_by_state ON campaigns(state, priority DESC, created_at);
CREATE INDEX campaigns_by_operator ON campaigns(operator_id);
CREATE INDEX campaigns_by_team ON campaigns(team, created_at);

CREATE TABLE iterations (
  id                  INTEGER PRIMARY KEY,
  campaign_id         INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  number              INTEGER NOT NULL CHECK (number >= 0),
  parent_candidate_id INTEGER REFERENCES candidates(id),
  strategy            TEXT NOT NULL DEFAULT '',
  dropout_p           REAL CHECK (dropout_p IS NULL OR (dropout_p >= 0 AND dropout_p <= 1)),
  prompt_info_json    TEXT CHECK (prompt_info_json IS NULL OR json_valid(prompt_info_json)),
  status              TEXT NOT NULL DEFAULT 'running'
                      CHECK (status IN ('running','done','failed','interrupted')),
  note                TEXT,
  started_at          INTEGER NOT NULL,
  finished_at         INTEGER,
  UNIQUE (campaign_id, number)
);

CREATE TABLE llm_calls (
  id                INTEGER PRIMARY KEY,
  campaign_id       INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  iteration_id      INTEGER REFERENCES iterations(id) ON DELETE CASCADE,
  provider          TEXT NOT NULL,
  model             TEXT NOT NULL DEFAULT '',
  request_json      TEXT CHECK (request_json IS NULL OR json_valid(request_json)),
  prompt            TEXT NOT NULL,
  response          TEXT,
  status            TEXT NOT NULL
                    CHECK (status IN ('ok','http_error','network_error','timeout','rate_limited',
                                      'refused','parse_error','cancelled')),
  http_status       INTEGER,
  attempts          INTEGER NOT NULL DEFAULT 1 CHECK (attempts >= 1),
  prompt_tokens     INTEGER NOT NULL DEFAULT 0,
  completion_tokens INTEGER NOT NULL DEFAULT 0,
  cached_tokens     INTEGER NOT NULL DEFAULT 0,
  reasoning_tokens  INTEGER NOT NULL DEFAULT 0,
  cost_usd          REAL NOT NULL DEFAULT 0,
  latency_ms        REAL,
  error             TEXT,
  created_at        INTEGER NOT NULL
);
CREATE INDEX llm_calls_by_campaign ON llm_calls(campaign_id, created_at);
CREATE INDEX llm_calls_by_iteration ON llm_calls(iteration_id);

CREATE TABLE candidates (
  id               INTEGER PRIMARY KEY,
  campaign_id      INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  iteration_id     INTEGER REFERENCES iterations(id) ON DELETE CASCADE,
  parent_id        INTEGER REFERENCES candidates(id),
  origin           TEXT NOT NULL CHECK (origin IN ('reference','baseline','seed','llm','tuned')),
  source           TEXT NOT NULL,
  source_hash      TEXT NOT NULL,
  launch_plan_json TEXT NOT NULL CHECK (json_valid(launch_plan_json)),
  parameters_json  TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(parameters_json)),
  provider         TEXT,
  model            TEXT,
  llm_call_id      INTEGER REFERENCES llm_calls(id),
  note             TEXT,
  created_at       INTEGER NOT NULL
);
CREATE INDEX candidates_by_campaign ON candidates(campaign_id, iteration_id);
CREATE INDEX candidates_by_iteration ON candidates(iteration_id);
CREATE INDEX candidates_by_parent ON candidates(parent_id);
CREATE INDEX candidates_by_source_hash ON candidates(source_hash);

CREATE TABLE compilations (
  id                    INTEGER PRIMARY KEY,
  candidate_id          INTEGER NOT NULL REFERENCES candidates(id) ON DELETE CASCADE,
  parameter_values_json TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(parameter_values_json)),
  arch                  TEXT NOT NULL,
  options_json          TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(options_json)),
  status                TEXT NOT NULL
                        CHECK (status IN ('ok','error','timeout','crashed','rejected')),
  log                   TEXT NOT NULL DEFAULT '',
  registers             INTEGER,
  shared_bytes          INTEGER,
  spill_bytes           INTEGER,
  duration_ms           REAL,
  cubin_hash            TEXT,
  compiler_version      TEXT,
  created_at            INTEGER NOT NULL
);
CREATE INDEX compilations_by_candidate ON compilations(candidate_id);
CREATE INDEX compilations_by_cubin ON compilations(cubin_hash);

CREATE TABLE evaluations (
  id                 INTEGER PRIMARY KEY,
  candidate_id       INTEGER NOT NULL REFERENCES candidates(id) ON DELETE CASCADE,
  compilation_id     INTEGER REFERENCES compilations(id),
  workload_id        INTEGER NOT NULL REFERENCES workloads(id),
  stage              TEXT NOT NULL DEFAULT 'full'
                     CHECK (stage IN ('screen','full','verify','compare')),
  status             TEXT NOT NULL
                     CHECK (status IN ('ok','compile_error','incorrect','crashed','timeout',
                                       'rejected_integrity','launch_error','skipped')),
  max_abs_err        REAL,
  max_rel_err        REAL,
  matched_ratio      REAL CHECK (matched_ratio IS NULL OR (matched_ratio >= 0 AND matched_ratio <= 1)),
  median_ns          REAL,
  min_ns             REAL,
  mean_ns            REAL,
  stdev_ns           REAL,
  q1_ns              REAL,
  q3_ns              REAL,
  samples            INTEGER,
  timing_stop_reason TEXT,
  discarded_samples  INTEGER,
  timing_json        TEXT CHECK (timing_json IS NULL OR json_valid(timing_json)),
  correctness_json   TEXT CHECK (correctness_json IS NULL OR json_valid(correctness_json)),
  counters_json      TEXT CHECK (counters_json IS NULL OR json_valid(counters_json)),
  sol_fraction       REAL,
  device_json        TEXT CHECK (device_json IS NULL OR json_valid(device_json)),
  seeds_json         TEXT CHECK (seeds_json IS NULL OR json_valid(seeds_json)),
  error              TEXT,
  created_at         INTEGER NOT NULL
);
CREATE INDEX evaluations_by_candidate ON evaluations(candidate_id, workload_id);
CREATE INDEX evaluations_by_workload ON evaluations(workload_id, status);
CREATE INDEX evaluations_by_compilation ON evaluations(compilation_id);

CREATE TABLE dropout_decisions (
  id           INTEGER PRIMARY KEY,
  iteration_id INTEGER NOT NULL REFERENCES iterations(id) ON DELETE CASCADE,
  item_id      TEXT NOT NULL,
  item_kind    TEXT NOT NULL DEFAULT '',
  kept         INTEGER NOT NULL CHECK (kept IN (0, 1)),
  p            REAL NOT NULL CHECK (p >= 0 AND p <= 1),
  UNIQUE (iteration_id, item_id)
);
CREATE INDEX dropout_by_item ON dropout_decisions(item_id, kept);

CREATE TABLE events (
  id          INTEGER PRIMARY KEY,
  campaign_id INTEGER REFERENCES campaigns(id) ON DELETE CASCADE,
  kind        TEXT NOT NULL,
  level       TEXT NOT NULL DEFAULT 'info' CHECK (level IN ('debug','info','warning','error')),
  message     TEXT NOT NULL,
  data_json   TEXT CHECK (data_json IS NULL OR json_valid(data_json)),
  created_at  INTEGER NOT NULL
);
CREATE INDEX events_by_campaign ON events(campaign_id, created_at);
CREATE INDEX events_by_kind ON events(kind, created_at);
)sql";

// Schema v2: what the daemon (agent/daemon) needs. `submissions` accounts
// for every file the daemon took from its spool (accepted or rejected) under
// a unique key, written in the transaction that creates the campaign, so a
// daemon killed between that commit and moving the file away does not
// submit it twice. The campaign columns carry a pause/cancel request from
// the CLI to the daemon (applied at the next checkpoint of a running step)
// and the daemon's backoff after failed steps (worker crashes).
constexpr std::string_view schema_v2 = R"sql(
CREATE TABLE submissions (
  id          INTEGER PRIMARY KEY,
  origin      TEXT NOT NULL CHECK (origin IN ('spool','cli')),
  key         TEXT NOT NULL UNIQUE,
  path        TEXT NOT NULL,
  team        TEXT NOT NULL DEFAULT '',
  status      TEXT NOT NULL CHECK (status IN ('accepted','rejected')),
  campaign_id INTEGER REFERENCES campaigns(id) ON DELETE SET NULL,
  error       TEXT,
  created_at  INTEGER NOT NULL
);
CREATE INDEX submissions_by_status ON submissions(status, created_at);

ALTER TABLE campaigns ADD COLUMN requested_action TEXT
  CHECK (requested_action IS NULL OR requested_action IN ('pause','cancel'));
ALTER TABLE campaigns ADD COLUMN step_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE campaigns ADD COLUMN not_before INTEGER;
ALTER TABLE campaigns ADD COLUMN last_error TEXT;
)sql";

// Schema v3: evaluations.status keeps every outcome of the worker protocol
// (profiler/protocol/protocol.hpp): compile_timeout, rejected_format and
// reference_failed were stored as compile_error or skipped, which lost what
// happened. SQLite cannot change a CHECK constraint in place, so the table
// is rebuilt with the same columns, rows and indexes (no other table refers
// to evaluations, so the rebuild touches no foreign key).
constexpr std::string_view schema_v3 = R"sql(
CREATE TABLE evaluations_v3 (
  id                 INTEGER PRIMARY KEY,
  candidate_id       INTEGER NOT NULL REFERENCES candidates(id) ON DELETE CASCADE,
  compilation_id     INTEGER REFERENCES compilations(id),
  workload_id        INTEGER NOT NULL REFERENCES workloads(id),
  stage              TEXT NOT NULL DEFAULT 'full'
                     CHECK (stage IN ('screen','full','verify','compare')),
  status             TEXT NOT NULL
                     CHECK (status IN ('ok','compile_error','incorrect','crashed','timeout',
                                       'rejected_integrity','launch_error','skipped',
                                       'compile_timeout','rejected_format','reference_failed')),
  max_abs_err        REAL,
  max_rel_err        REAL,
  matched_ratio      REAL CHECK (matched_ratio IS NULL OR (matched_ratio >= 0 AND matched_ratio <= 1)),
  median_ns          REAL,
  min_ns             REAL,
  mean_ns            REAL,
  stdev_ns           REAL,
  q1_ns              REAL,
  q3_ns              REAL,
  samples            INTEGER,
  timing_stop_reason TEXT,
  discarded_samples  INTEGER,
  timing_json        TEXT CHECK (timing_json IS NULL OR json_valid(timing_json)),
  correctness_json   TEXT CHECK (correctness_json IS NULL OR json_valid(correctness_json)),
  counters_json      TEXT CHECK (counters_json IS NULL OR json_valid(counters_json)),
  sol_fraction       REAL,
  device_json        TEXT CHECK (device_json IS NULL OR json_valid(device_json)),
  seeds_json         TEXT CHECK (seeds_json IS NULL OR json_valid(seeds_json)),
  error              TEXT,
  created_at         INTEGER NOT NULL
);
INSERT INTO evaluations_v3 SELECT * FROM evaluations;
DROP TABLE evaluations;
ALTER TABLE evaluations_v3 RENAME TO evaluations;
CREATE INDEX evaluations_by_candidate ON evaluations(candidate_id, workload_id);
CREATE INDEX evaluations_by_workload ON evaluations(workload_id, status);
CREATE INDEX evaluations_by_compilation ON evaluations(compilation_id);
)sql";

// Schema v4: agent-driven campaigns (provider "agent", docs/agents.md).
// `agent_submissions` holds the candidates an external agent submitted (MCP
// candidate_submit, `kopt propose`) until the campaign's next iteration takes
// them: pending -> taken (with the iteration that took them and the content
// key of the candidate row it became) or rejected. `campaigns.waiting_for`
// says that a running campaign is blocked on someone outside kopt ("agent"),
// so that the daemon does not step it until a submission arrives and `kopt
// list` and /health can show it.
constexpr std::string_view schema_v4 = R"sql(
CREATE TABLE agent_submissions (
  id             INTEGER PRIMARY KEY,
  campaign_id    INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  agent          TEXT NOT NULL,
  candidate_json TEXT NOT NULL CHECK (json_valid(candidate_json)),
  note           TEXT,
  brief_hash     TEXT,
  status         TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending','taken','rejected')),
  iteration      INTEGER,
  candidate_key  TEXT,
  error          TEXT,
  created_at     INTEGER NOT NULL,
  taken_at       INTEGER
);
CREATE INDEX agent_submissions_by_campaign ON agent_submissions(campaign_id, status, id);

ALTER TABLE campaigns ADD COLUMN waiting_for TEXT;
)sql";

// Schema v5: a store that runs for a week costs no more per evaluation than
// in its first hour (issue #26).
// - candidates.content_key: the loop's content key (SHA-256 of the candidate
//   JSON) stored with the row and indexed per campaign, so resuming a step
//   looks a candidate up instead of re-serialising every stored source.
//   Rows written before v5 hold NULL; the loop fills them once per campaign.
// - eval_journal: where each finished evaluation of the loop's cache is
//   journaled (the "evaluated" event and the subject's index in it), keyed
//   by the loop's cache key, so a resumed step reads the results it needs
//   by key instead of every event of the campaign. Back-filled here.
// - events_by_campaign_kind: the latest checkpoint ("loop_state"), the
//   latest proposals and the "finished" event of a campaign by index.
// - store_counts: the totals the daemon reports (/metrics), kept by
//   triggers in the transaction that writes the rows, so a scrape reads a
//   few rows instead of counting millions. Seeded here from the rows.
// - campaigns.collected_at: when `kopt gc` (or the daemon's retention)
//   last slimmed a finished campaign (store/retention.hpp).
constexpr std::string_view schema_v5 = R"sql(
ALTER TABLE candidates ADD COLUMN content_key TEXT;
CREATE INDEX candidates_by_content_key ON candidates(campaign_id, content_key);
CREATE INDEX events_by_campaign_kind ON events(campaign_id, kind, id);

CREATE TABLE eval_journal (
  campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  cache_key   TEXT NOT NULL,
  event_id    INTEGER NOT NULL REFERENCES events(id) ON DELETE CASCADE,
  subject     INTEGER NOT NULL CHECK (subject >= 0),
  PRIMARY KEY (campaign_id, cache_key)
) WITHOUT ROWID;
CREATE INDEX eval_journal_by_event ON eval_journal(event_id);
INSERT OR REPLACE INTO eval_journal(campaign_id, cache_key, event_id, subject)
  SELECT e.campaign_id, json_extract(s.value, '$.cache_key'), e.id, CAST(s.key AS INTEGER)
  FROM events e, json_each(e.data_json, '$.subjects') s
  WHERE e.kind = 'evaluated' AND e.campaign_id IS NOT NULL
    AND json_extract(s.value, '$.cache_key') IS NOT NULL
  ORDER BY e.id;

CREATE TABLE store_counts (
  key TEXT PRIMARY KEY,
  n   INTEGER NOT NULL DEFAULT 0,
  x   REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO store_counts(key) VALUES
  ('evaluations:ok'), ('evaluations:compile_error'), ('evaluations:incorrect'),
  ('evaluations:crashed'), ('evaluations:timeout'), ('evaluations:rejected_integrity'),
  ('evaluations:launch_error'), ('evaluations:skipped'), ('evaluations:compile_timeout'),
  ('evaluations:rejected_format'), ('evaluations:reference_failed'),
  ('llm_calls:ok'), ('llm_calls:http_error'), ('llm_calls:network_error'), ('llm_calls:timeout'),
  ('llm_calls:rate_limited'), ('llm_calls:refused'), ('llm_calls:parse_error'),
  ('llm_calls:cancelled'),
  ('llm:prompt_tokens'), ('llm:completion_tokens'), ('llm:cached_tokens'),
  ('llm:reasoning_tokens'), ('llm:cost_usd'), ('llm:retries'),
  ('submissions:accepted'), ('submissions:rejected'),
  ('candidates'), ('events:step_failed');
UPDATE store_counts SET n = (SELECT count(*) FROM evaluations e
  WHERE 'evaluations:' || e.status = store_counts.key) WHERE key LIKE 'evaluations:%';
UPDATE store_counts SET n = (SELECT count(*) FROM llm_calls c
  WHERE 'llm_calls:' || c.status = store_counts.key) WHERE key LIKE 'llm_calls:%';
UPDATE store_counts SET n = (SELECT count(*) FROM submissions s
  WHERE 'submissions:' || s.status = store_counts.key) WHERE key LIKE 'submissions:%';
UPDATE store_counts SET n = (SELECT coalesce(sum(prompt_tokens), 0) FROM llm_calls)
  WHERE key = 'llm:prompt_tokens';
UPDATE store_counts SET n = (SELECT coalesce(sum(completion_tokens), 0) FROM llm_calls)
  WHERE key = 'llm:completion_tokens';
UPDATE store_counts SET n = (SELECT coalesce(sum(cached_tokens), 0) FROM llm_calls)
  WHERE key = 'llm:cached_tokens';
UPDATE store_counts SET n = (SELECT coalesce(sum(reasoning_tokens), 0) FROM llm_calls)
  WHERE key = 'llm:reasoning_tokens';
UPDATE store_counts SET x = (SELECT coalesce(sum(cost_usd), 0) FROM llm_calls)
  WHERE key = 'llm:cost_usd';
UPDATE store_counts SET n = (SELECT coalesce(sum(attempts - 1), 0) FROM llm_calls)
  WHERE key = 'llm:retries';
UPDATE store_counts SET n = (SELECT count(*) FROM candidates) WHERE key = 'candidates';
UPDATE store_counts SET n = (SELECT count(*) FROM events WHERE kind = 'step_failed')
  WHERE key = 'events:step_failed';

CREATE TRIGGER count_evaluations_insert AFTER INSERT ON evaluations BEGIN
  UPDATE store_counts SET n = n + 1 WHERE key = 'evaluations:' || NEW.status;
END;
CREATE TRIGGER count_evaluations_delete AFTER DELETE ON evaluations BEGIN
  UPDATE store_counts SET n = n - 1 WHERE key = 'evaluations:' || OLD.status;
END;
CREATE TRIGGER count_evaluations_status AFTER UPDATE OF status ON evaluations
  WHEN NEW.status IS NOT OLD.status BEGIN
  UPDATE store_counts SET n = n - 1 WHERE key = 'evaluations:' || OLD.status;
  UPDATE store_counts SET n = n + 1 WHERE key = 'evaluations:' || NEW.status;
END;
CREATE TRIGGER count_llm_calls_insert AFTER INSERT ON llm_calls BEGIN
  UPDATE store_counts SET n = n + 1 WHERE key = 'llm_calls:' || NEW.status;
  UPDATE store_counts SET n = n + NEW.prompt_tokens WHERE key = 'llm:prompt_tokens';
  UPDATE store_counts SET n = n + NEW.completion_tokens WHERE key = 'llm:completion_tokens';
  UPDATE store_counts SET n = n + NEW.cached_tokens WHERE key = 'llm:cached_tokens';
  UPDATE store_counts SET n = n + NEW.reasoning_tokens WHERE key = 'llm:reasoning_tokens';
  UPDATE store_counts SET x = x + NEW.cost_usd WHERE key = 'llm:cost_usd';
  UPDATE store_counts SET n = n + NEW.attempts - 1 WHERE key = 'llm:retries';
END;
CREATE TRIGGER count_llm_calls_delete AFTER DELETE ON llm_calls BEGIN
  UPDATE store_counts SET n = n - 1 WHERE key = 'llm_calls:' || OLD.status;
  UPDATE store_counts SET n = n - OLD.prompt_tokens WHERE key = 'llm:prompt_tokens';
  UPDATE store_counts SET n = n - OLD.completion_tokens WHERE key = 'llm:completion_tokens';
  UPDATE store_counts SET n = n - OLD.cached_tokens WHERE key = 'llm:cached_tokens';
  UPDATE store_counts SET n = n - OLD.reasoning_tokens WHERE key = 'llm:reasoning_tokens';
  UPDATE store_counts SET x = x - OLD.cost_usd WHERE key = 'llm:cost_usd';
  UPDATE store_counts SET n = n - (OLD.attempts - 1) WHERE key = 'llm:retries';
END;
CREATE TRIGGER count_submissions_insert AFTER INSERT ON submissions BEGIN
  UPDATE store_counts SET n = n + 1 WHERE key = 'submissions:' || NEW.status;
END;
CREATE TRIGGER count_submissions_delete AFTER DELETE ON submissions BEGIN
  UPDATE store_counts SET n = n - 1 WHERE key = 'submissions:' || OLD.status;
END;
CREATE TRIGGER count_candidates_insert AFTER INSERT ON candidates BEGIN
  UPDATE store_counts SET n = n + 1 WHERE key = 'candidates';
END;
CREATE TRIGGER count_candidates_delete AFTER DELETE ON candidates BEGIN
  UPDATE store_counts SET n = n - 1 WHERE key = 'candidates';
END;
CREATE TRIGGER count_step_failed_insert AFTER INSERT ON events
  WHEN NEW.kind = 'step_failed' BEGIN
  UPDATE store_counts SET n = n + 1 WHERE key = 'events:step_failed';
END;
CREATE TRIGGER count_step_failed_delete AFTER DELETE ON events
  WHEN OLD.kind = 'step_failed' BEGIN
  UPDATE store_counts SET n = n - 1 WHERE key = 'events:step_failed';
END;

ALTER TABLE campaigns ADD COLUMN collected_at INTEGER;
)sql";

constexpr std::array<migration, 5> all_steps{{
    {1,
     "initial schema: operators, workloads, campaigns, iterations, candidates, "
     "compilations, evaluations, llm_calls, dropout_decisions, events",
     schema_v1},
    {2,
     "daemon: submissions (spool accounting), campaign requests (pause/cancel), step "
     "failures and backoff",
     schema_v2},
    {3,
     "evaluations.status keeps every worker outcome: compile_timeout, rejected_format, "
     "reference_failed",
     schema_v3},
    {4, "agent campaigns: agent_submissions, campaigns.waiting_for", schema_v4},
    {5,
     "scale: candidates.content_key, eval_journal, events_by_campaign_kind, store_counts "
     "(triggers), campaigns.collected_at",
     schema_v5},
}};

std::string hex32(std::int64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  auto u = static_cast<std::uint32_t>(v);
  std::string out = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) out.push_back(digits[(u >> shift) & 0xFu]);
  return out;
}

std::int64_t count_schema_objects(database& db) {
  auto st = db.prepare("SELECT count(*) FROM sqlite_schema");
  st.step();
  return st.get_int(0);
}

// Returns the version found; throws if the file is not kopt's or too new.
std::int64_t check_identity(database& db, int known_version) {
  const std::int64_t app = db.pragma_int("application_id");
  const std::int64_t version = db.pragma_int("user_version");
  if (app == 0 && version == 0) {
    if (count_schema_objects(db) != 0) {
      throw store_error("store: " + db.path() +
                        " is a SQLite database that kopt did not create (it has tables but no kopt "
                        "application_id); refusing to touch it");
    }
    return 0;
  }
  if (app != application_id) {
    throw store_error("store: " + db.path() + " is not a kopt database (application_id " +
                      hex32(app) + ", kopt uses " + hex32(application_id) +
                      "); refusing to touch it");
  }
  if (version > known_version) {
    throw store_error("store: " + db.path() + " has schema version " + std::to_string(version) +
                      ", newer than this kopt knows (" + std::to_string(known_version) +
                      "); upgrade kopt or use another --db");
  }
  return version;
}

std::int64_t now_unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::span<const migration> migrations() noexcept {
  return all_steps;
}
int schema_version() noexcept {
  return all_steps.back().version;
}

void check_compatible(database& db, int expected_version) {
  const std::int64_t version = check_identity(db, expected_version);
  if (version == 0) {
    throw store_error("store: " + db.path() +
                      " is empty (not initialised by kopt); run a command "
                      "that writes, such as `kopt submit`, first");
  }
  if (version < expected_version) {
    throw store_error("store: " + db.path() + " has schema version " + std::to_string(version) +
                      ", older than this kopt (" + std::to_string(expected_version) +
                      "); open it once for writing (any write command) to migrate it");
  }
}

void migrate(database& db, std::span<const migration> steps) {
  if (steps.empty()) throw store_error("store: no migrations given");
  const int known = steps.back().version;
  std::int64_t seen = check_identity(db, known);
  for (const migration& step : steps) {
    // Up-to-date databases take no write lock, so opening a second
    // connection never waits for the writer.
    if (seen >= step.version) continue;
    transaction tx(db);
    // Read the version again under the write lock: another process may have
    // migrated while this one waited.
    const std::int64_t current = check_identity(db, known);
    seen = current;
    if (current >= step.version) continue;  // tx rolls back an empty transaction
    if (current != step.version - 1) {
      throw store_error("store: " + db.path() + " is at schema version " + std::to_string(current) +
                        " but the next migration step is " + std::to_string(step.version));
    }
    try {
      db.exec(step.sql);
      auto st = db.prepare(
          "INSERT INTO schema_migrations(version, description, applied_at) VALUES (?, ?, ?)");
      st.bind_all(static_cast<std::int64_t>(step.version), step.description, now_unix_ms()).run();
      db.exec("PRAGMA application_id = " + std::to_string(application_id));
      db.exec("PRAGMA user_version = " + std::to_string(step.version));
      tx.commit();
      seen = step.version;
      spdlog::info("store: {} migrated to schema version {} ({})", db.path(), step.version,
                   step.description);
    } catch (const store_error& e) {
      throw store_error("store: migration to schema version " + std::to_string(step.version) +
                        " failed; the database stays at version " + std::to_string(current) + ": " +
                        e.what());
    }
  }
}

}  // namespace kopt::store
