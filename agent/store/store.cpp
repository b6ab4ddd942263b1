#include "store/store.hpp"

#include <algorithm>
#include <cctype>
#include <system_error>
#include <unordered_map>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "store/migrations.hpp"

namespace kopt::store {

namespace {

std::int64_t stamp(std::int64_t t) {
  return t != 0 ? t : now_ms();
}

campaign_state read_state(const statement& st, int col) {
  const std::string s = st.get_text(col);
  if (auto v = parse_campaign_state(s)) return *v;
  throw store_error("store: unknown campaign state '" + s + "' in the database");
}

// Keys that name a credential; a request_json holding one is refused so that
// a provider cannot leak a key into the store by accident.
bool is_credential_key(std::string key) {
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* bad : {"authorization", "api_key", "api-key", "apikey", "x-api-key",
                          "proxy-authorization", "access_token", "secret"}) {
    if (key == bad) return true;
  }
  return false;
}

void refuse_credentials(const nlohmann::json& j, const std::string& where) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (is_credential_key(k)) {
        throw store_error("store: refusing to store " + where + " with a credential field '" + k +
                          "' (API keys are never stored)");
      }
      refuse_credentials(v, where);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) refuse_credentials(v, where);
  }
}

// --- row readers (column order matches the SELECT lists below) ---------------

constexpr std::string_view operator_cols =
    "id, name, op_type, config_json, content_hash, source_path, created_at";
operator_record read_operator(const statement& st) {
  operator_record r;
  r.id = st.get_int(0);
  r.name = st.get_text(1);
  r.op_type = st.get_text(2);
  r.config = st.get_json(3);
  r.content_hash = st.get_text(4);
  r.source_path = st.get_opt_text(5);
  r.created_at = st.get_int(6);
  return r;
}

constexpr std::string_view campaign_select =
    "SELECT c.id, c.operator_id, c.state, c.provider, c.model, c.settings_json, "
    "c.budget_iterations, c.budget_wall_time_s, c.budget_tokens, c.budget_cost_usd, "
    "c.spent_iterations, c.spent_tokens, c.spent_cost_usd, c.spent_wall_time_s, "
    "c.best_candidate_id, c.best_score, c.priority, c.team, c.created_at, c.updated_at, "
    "c.started_at, c.finished_at, c.stop_reason, o.name "
    "FROM campaigns c JOIN operators o ON o.id = c.operator_id";
campaign_record read_campaign(const statement& st) {
  campaign_record r;
  r.id = st.get_int(0);
  r.operator_id = st.get_int(1);
  r.state = read_state(st, 2);
  r.provider = st.get_text(3);
  r.model = st.get_text(4);
  r.settings = st.get_json(5);
  r.budget.iterations = st.get_opt_int(6);
  r.budget.wall_time_s = st.get_opt_double(7);
  r.budget.tokens = st.get_opt_int(8);
  r.budget.cost_usd = st.get_opt_double(9);
  r.spent_iterations = st.get_int(10);
  r.spent_tokens = st.get_int(11);
  r.spent_cost_usd = st.get_double(12);
  r.spent_wall_time_s = st.get_double(13);
  r.best_candidate_id = st.get_opt_int(14);
  r.best_score = st.get_opt_double(15);
  r.priority = st.get_int(16);
  r.team = st.get_text(17);
  r.created_at = st.get_int(18);
  r.updated_at = st.get_int(19);
  r.started_at = st.get_opt_int(20);
  r.finished_at = st.get_opt_int(21);
  r.stop_reason = st.get_opt_text(22);
  r.operator_name = st.get_text(23);
  return r;
}

constexpr std::string_view iteration_cols =
    "id, campaign_id, number, parent_candidate_id, strategy, dropout_p, prompt_info_json, "
    "status, note, started_at, finished_at";
iteration_record read_iteration(const statement& st) {
  iteration_record r;
  r.id = st.get_int(0);
  r.campaign_id = st.get_int(1);
  r.number = st.get_int(2);
  r.parent_candidate_id = st.get_opt_int(3);
  r.strategy = st.get_text(4);
  r.dropout_p = st.get_opt_double(5);
  r.prompt_info = st.get_json(6);
  r.status = st.get_text(7);
  r.note = st.get_opt_text(8);
  r.started_at = st.get_int(9);
  r.finished_at = st.get_opt_int(10);
  return r;
}

constexpr std::string_view candidate_cols =
    "id, campaign_id, iteration_id, parent_id, origin, source, source_hash, launch_plan_json, "
    "parameters_json, provider, model, llm_call_id, note, created_at, content_key";
candidate_record read_candidate(const statement& st) {
  candidate_record r;
  r.id = st.get_int(0);
  r.campaign_id = st.get_int(1);
  r.iteration_id = st.get_opt_int(2);
  r.parent_id = st.get_opt_int(3);
  const std::string origin = st.get_text(4);
  if (auto o = parse_candidate_origin(origin)) {
    r.origin = *o;
  } else {
    throw store_error("store: unknown candidate origin '" + origin + "' in the database");
  }
  r.source = st.get_text(5);
  r.source_hash = st.get_text(6);
  r.launch_plan = st.get_json(7);
  r.parameters = st.get_json(8);
  r.provider = st.get_opt_text(9);
  r.model = st.get_opt_text(10);
  r.llm_call_id = st.get_opt_int(11);
  r.note = st.get_opt_text(12);
  r.created_at = st.get_int(13);
  r.content_key = st.get_opt_text(14).value_or("");
  return r;
}

constexpr std::string_view compilation_cols =
    "id, candidate_id, parameter_values_json, arch, options_json, status, log, registers, "
    "shared_bytes, spill_bytes, duration_ms, cubin_hash, compiler_version, created_at";
compilation_record read_compilation(const statement& st) {
  compilation_record r;
  r.id = st.get_int(0);
  r.candidate_id = st.get_int(1);
  r.parameter_values = st.get_json(2);
  r.arch = st.get_text(3);
  r.options = st.get_json(4);
  r.status = st.get_text(5);
  r.log = st.get_text(6);
  r.registers = st.get_opt_int(7);
  r.shared_bytes = st.get_opt_int(8);
  r.spill_bytes = st.get_opt_int(9);
  r.duration_ms = st.get_opt_double(10);
  r.cubin_hash = st.get_opt_text(11);
  r.compiler_version = st.get_opt_text(12);
  r.created_at = st.get_int(13);
  return r;
}

constexpr std::string_view evaluation_select =
    "SELECT e.id, e.candidate_id, e.compilation_id, e.workload_id, e.stage, e.status, "
    "e.max_abs_err, e.max_rel_err, e.matched_ratio, e.median_ns, e.min_ns, e.mean_ns, "
    "e.stdev_ns, e.q1_ns, e.q3_ns, e.samples, e.timing_stop_reason, e.discarded_samples, "
    "e.timing_json, e.correctness_json, e.counters_json, e.sol_fraction, e.device_json, "
    "e.seeds_json, e.error, e.created_at, w.key "
    "FROM evaluations e JOIN workloads w ON w.id = e.workload_id";
evaluation_record read_evaluation(const statement& st) {
  evaluation_record r;
  r.id = st.get_int(0);
  r.candidate_id = st.get_int(1);
  r.compilation_id = st.get_opt_int(2);
  r.workload_id = st.get_int(3);
  r.stage = st.get_text(4);
  const std::string status = st.get_text(5);
  if (auto s = parse_eval_status(status)) {
    r.status = *s;
  } else {
    throw store_error("store: unknown evaluation status '" + status + "' in the database");
  }
  r.max_abs_err = st.get_opt_double(6);
  r.max_rel_err = st.get_opt_double(7);
  r.matched_ratio = st.get_opt_double(8);
  r.timing.median_ns = st.get_opt_double(9);
  r.timing.min_ns = st.get_opt_double(10);
  r.timing.mean_ns = st.get_opt_double(11);
  r.timing.stdev_ns = st.get_opt_double(12);
  r.timing.q1_ns = st.get_opt_double(13);
  r.timing.q3_ns = st.get_opt_double(14);
  r.timing.samples = st.get_opt_int(15);
  r.timing.stop_reason = st.get_opt_text(16);
  r.timing.discarded = st.get_opt_int(17);
  r.timing.detail = st.get_json(18);
  r.correctness = st.get_json(19);
  r.counters = st.get_json(20);
  r.sol_fraction = st.get_opt_double(21);
  r.device = st.get_json(22);
  r.seeds = st.get_json(23);
  r.error = st.get_opt_text(24);
  r.created_at = st.get_int(25);
  r.workload_key = st.get_text(26);
  return r;
}

constexpr std::string_view llm_call_cols =
    "id, campaign_id, iteration_id, provider, model, request_json, prompt, response, status, "
    "http_status, attempts, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, "
    "cost_usd, latency_ms, error, created_at";
llm_call_record read_llm_call(const statement& st) {
  llm_call_record r;
  r.id = st.get_int(0);
  r.campaign_id = st.get_int(1);
  r.iteration_id = st.get_opt_int(2);
  r.provider = st.get_text(3);
  r.model = st.get_text(4);
  r.request = st.get_json(5);
  r.prompt = st.get_text(6);
  r.response = st.get_opt_text(7);
  r.status = st.get_text(8);
  r.http_status = st.get_opt_int(9);
  r.attempts = st.get_int(10);
  r.prompt_tokens = st.get_int(11);
  r.completion_tokens = st.get_int(12);
  r.cached_tokens = st.get_int(13);
  r.reasoning_tokens = st.get_int(14);
  r.cost_usd = st.get_double(15);
  r.latency_ms = st.get_opt_double(16);
  r.error = st.get_opt_text(17);
  r.created_at = st.get_int(18);
  return r;
}

constexpr std::string_view event_cols =
    "id, campaign_id, kind, level, message, data_json, created_at";
event_record read_event(const statement& st) {
  event_record r;
  r.id = st.get_int(0);
  r.campaign_id = st.get_opt_int(1);
  r.kind = st.get_text(2);
  r.level = st.get_text(3);
  r.message = st.get_text(4);
  r.data = st.get_json(5);
  r.created_at = st.get_int(6);
  return r;
}

std::string select_from(std::string_view cols, std::string_view table, std::string_view rest) {
  std::string sql = "SELECT ";
  sql += cols;
  sql += " FROM ";
  sql += table;
  sql += ' ';
  sql += rest;
  return sql;
}

template <typename Reader>
auto collect(statement& st, Reader read) {
  std::vector<decltype(read(st))> out;
  while (st.step()) out.push_back(read(st));
  return out;
}

}  // namespace

// --- open ---------------------------------------------------------------------

store store::open(const std::filesystem::path& path, const open_options& options) {
  if (path.empty()) throw store_error("store: empty database path");
  const bool memory = path == ":memory:";
  if (std::error_code dir_ec; !memory && std::filesystem::is_directory(path, dir_ec)) {
    throw store_error("store: " + path.string() + " is a directory, not a database file");
  }
  if (options.read_only) {
    std::error_code ec;
    if (!memory && !std::filesystem::exists(path, ec)) {
      throw not_found_error("store: no kopt database at " + path.string() +
                            (ec ? " (" + ec.message() + ")" : std::string()) +
                            "; submit a campaign first or pass --db");
    }
    database db(path, database::open_mode::read_only, options.busy_timeout);
    db.exec("PRAGMA foreign_keys = ON");
    check_compatible(db, schema_version());
    return store(std::move(db));
  }

  if (!memory && options.create_directories && path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      throw store_error("store: cannot create the directory " + path.parent_path().string() +
                        " for the database: " + ec.message());
    }
  }
  database db(path, database::open_mode::read_write_create, options.busy_timeout);
  // Per-connection settings first: they do not touch the file, so they are
  // safe even on a file that migrate() is about to refuse.
  db.exec("PRAGMA foreign_keys = ON");
  migrate(db, migrations());
  if (!memory) {
    // WAL: readers keep a snapshot while the one writer appends, so the CLI
    // never blocks the daemon. Persistent in the file once set.
    const std::string mode = db.pragma_text("journal_mode = WAL");
    if (mode != "wal") {
      throw store_error("store: cannot switch " + db.path() + " to WAL mode (journal_mode is '" +
                        mode + "'); is it on a network file system?");
    }
  }
  // NORMAL in WAL mode: a commit is durable once the WAL is synced at
  // checkpoint; a power loss may lose the last transactions but never
  // corrupts the file. FULL would fsync on every commit of every sample.
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec("PRAGMA journal_size_limit = " + std::to_string(options.journal_size_limit));
  if (!memory) db.set_wal_policy(options.checkpoint_policy());
  if (db.pragma_int("foreign_keys") != 1) {
    throw store_error("store: this SQLite build does not enforce foreign keys (" + db.path() + ")");
  }
  return store(std::move(db));
}

// --- operators and workloads -------------------------------------------------

store::put_operator_result store::put_operator(const operator_record& op,
                                               std::span<const workload_record> workloads) {
  if (op.name.empty()) throw store_error("store: operator without a name");
  if (op.content_hash.empty())
    throw store_error("store: operator '" + op.name + "' without a content hash");
  transaction tx(db_);
  if (auto existing = find_operator_by_hash(op.content_hash)) {
    tx.commit();
    return {existing->id, false};
  }
  auto st = db_.prepare(
      "INSERT INTO operators(name, op_type, config_json, content_hash, source_path, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?)");
  st.bind_all(op.name, op.op_type, op.config.is_null() ? nlohmann::json::object() : op.config,
              op.content_hash, op.source_path, stamp(op.created_at))
      .run();
  const row_id id = db_.last_insert_rowid();
  auto wst = db_.prepare(
      "INSERT INTO workloads(operator_id, key, position, axes_json, weight) VALUES (?, ?, ?, ?, "
      "?)");
  int position = 0;
  for (const workload_record& w : workloads) {
    wst.reset();
    wst.bind_all(id, w.key, position++, w.axes.is_null() ? nlohmann::json::object() : w.axes,
                 w.weight)
        .run();
  }
  tx.commit();
  return {id, true};
}

std::optional<operator_record> store::find_operator(row_id id) {
  auto st = db_.prepare(select_from(operator_cols, "operators", "WHERE id = ?"));
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  return read_operator(st);
}

std::optional<operator_record> store::find_operator_by_hash(std::string_view content_hash) {
  auto st = db_.prepare(select_from(operator_cols, "operators", "WHERE content_hash = ?"));
  st.bind(1, content_hash);
  if (!st.step()) return std::nullopt;
  return read_operator(st);
}

std::vector<workload_record> store::workloads_of(row_id operator_id) {
  auto st = db_.prepare(
      "SELECT id, operator_id, key, position, axes_json, weight FROM workloads "
      "WHERE operator_id = ? ORDER BY position");
  st.bind(1, operator_id);
  return collect(st, [](const statement& s) {
    workload_record w;
    w.id = s.get_int(0);
    w.operator_id = s.get_int(1);
    w.key = s.get_text(2);
    w.position = static_cast<int>(s.get_int(3));
    w.axes = s.get_json(4);
    w.weight = s.get_double(5);
    return w;
  });
}

// --- campaigns ----------------------------------------------------------------

row_id store::create_campaign(const campaign_record& c) {
  const std::int64_t now = stamp(c.created_at);
  auto st = db_.prepare(
      "INSERT INTO campaigns(operator_id, state, provider, model, settings_json, "
      "budget_iterations, budget_wall_time_s, budget_tokens, budget_cost_usd, priority, team, "
      "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind_all(c.operator_id, to_string(c.state), c.provider, c.model,
              c.settings.is_null() ? nlohmann::json::object() : c.settings, c.budget.iterations,
              c.budget.wall_time_s, c.budget.tokens, c.budget.cost_usd, c.priority, c.team, now,
              now)
      .run();
  return db_.last_insert_rowid();
}

std::optional<campaign_record> store::find_campaign(row_id id) {
  auto st = db_.prepare(std::string(campaign_select) + " WHERE c.id = ?");
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  return read_campaign(st);
}

std::vector<campaign_record> store::list_campaigns(std::optional<campaign_state> state,
                                                   std::optional<std::string> team,
                                                   std::optional<std::int64_t> limit,
                                                   std::int64_t offset) {
  std::string sql = std::string(campaign_select) +
                    " WHERE (?1 IS NULL OR c.state = ?1) AND (?2 IS NULL OR c.team = ?2)"
                    " ORDER BY c.id DESC LIMIT coalesce(?3, -1) OFFSET ?4";
  auto st = db_.prepare(sql);
  st.bind(1, state ? std::optional<std::string>(std::string(to_string(*state))) : std::nullopt);
  st.bind(2, team);
  st.bind(3, limit);
  st.bind(4, std::max<std::int64_t>(offset, 0));
  return collect(st, read_campaign);
}

std::int64_t store::count_campaigns(std::optional<campaign_state> state,
                                    std::optional<std::string> team) {
  auto st = db_.prepare(
      "SELECT count(*) FROM campaigns c WHERE (?1 IS NULL OR c.state = ?1) AND "
      "(?2 IS NULL OR c.team = ?2)");
  st.bind(1, state ? std::optional<std::string>(std::string(to_string(*state))) : std::nullopt);
  st.bind(2, team);
  st.step();
  return st.get_int(0);
}

std::map<std::string, std::int64_t> store::campaign_counts() {
  std::map<std::string, std::int64_t> out;
  for (auto name : campaign_state_names()) out[std::string(name)] = 0;
  auto st = db_.prepare("SELECT state, count(*) FROM campaigns GROUP BY state");
  while (st.step()) out[st.get_text(0)] = st.get_int(1);
  return out;
}

void store::set_campaign_state(row_id id, campaign_state state,
                               std::optional<std::string> stop_reason) {
  const std::int64_t now = now_ms();
  auto st = db_.prepare(
      "UPDATE campaigns SET state = ?1, updated_at = ?2, "
      "started_at = CASE WHEN ?1 = 'running' AND started_at IS NULL THEN ?2 ELSE started_at END, "
      "finished_at = CASE WHEN ?3 THEN ?2 ELSE finished_at END, "
      "stop_reason = coalesce(?4, stop_reason) WHERE id = ?5");
  st.bind_all(to_string(state), now, is_terminal(state), stop_reason, id).run();
  if (db_.changes() == 0) throw not_found_error("store: no campaign " + std::to_string(id));
}

void store::add_campaign_spend(row_id id, std::int64_t iterations, std::int64_t tokens,
                               double cost_usd, double wall_time_s) {
  auto st = db_.prepare(
      "UPDATE campaigns SET spent_iterations = spent_iterations + ?, spent_tokens = spent_tokens + "
      "?, "
      "spent_cost_usd = spent_cost_usd + ?, spent_wall_time_s = spent_wall_time_s + ?, "
      "updated_at = ? WHERE id = ?");
  st.bind_all(iterations, tokens, cost_usd, wall_time_s, now_ms(), id).run();
  if (db_.changes() == 0) throw not_found_error("store: no campaign " + std::to_string(id));
}

void store::set_best_candidate(row_id campaign_id, row_id candidate_id,
                               std::optional<double> score) {
  auto st = db_.prepare(
      "UPDATE campaigns SET best_candidate_id = ?, best_score = ?, updated_at = ? WHERE id = ?");
  st.bind_all(candidate_id, score, now_ms(), campaign_id).run();
  if (db_.changes() == 0)
    throw not_found_error("store: no campaign " + std::to_string(campaign_id));
}

// --- iterations -----------------------------------------------------------------

row_id store::add_iteration(const iteration_record& it) {
  auto st = db_.prepare(
      "INSERT INTO iterations(campaign_id, number, parent_candidate_id, strategy, dropout_p, "
      "prompt_info_json, status, note, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
      "?)");
  st.bind_all(it.campaign_id, it.number, it.parent_candidate_id, it.strategy, it.dropout_p,
              it.prompt_info, it.status, it.note, stamp(it.started_at), it.finished_at)
      .run();
  return db_.last_insert_rowid();
}

void store::finish_iteration(row_id id, std::string_view status, std::optional<std::string> note) {
  auto st = db_.prepare(
      "UPDATE iterations SET status = ?, finished_at = ?, note = coalesce(?, note) WHERE id = ?");
  st.bind_all(status, now_ms(), note, id).run();
  if (db_.changes() == 0) throw not_found_error("store: no iteration " + std::to_string(id));
}

std::optional<iteration_record> store::find_iteration(row_id campaign_id, std::int64_t number) {
  auto st = db_.prepare(
      select_from(iteration_cols, "iterations", "WHERE campaign_id = ? AND number = ?"));
  st.bind(1, campaign_id);
  st.bind(2, number);
  if (!st.step()) return std::nullopt;
  return read_iteration(st);
}

std::vector<iteration_record> store::iterations_of(row_id campaign_id) {
  auto st = db_.prepare(
      select_from(iteration_cols, "iterations", "WHERE campaign_id = ? ORDER BY number"));
  st.bind(1, campaign_id);
  return collect(st, read_iteration);
}

std::vector<iteration_summary> store::iteration_summaries(row_id campaign_id) {
  // One consistent snapshot for the several aggregate queries below.
  transaction tx(db_, transaction::kind::deferred);
  std::vector<iteration_summary> out;
  std::unordered_map<row_id, std::size_t> index;
  for (auto& it : iterations_of(campaign_id)) {
    index[it.id] = out.size();
    iteration_summary s;
    s.iteration = std::move(it);
    out.push_back(std::move(s));
  }
  auto each = [&](std::string_view sql, auto&& fn) {
    auto st = db_.prepare(sql);
    st.bind(1, campaign_id);
    while (st.step()) {
      if (st.is_null(0)) continue;
      auto found = index.find(st.get_int(0));
      if (found != index.end()) fn(out[found->second], st);
    }
  };
  each("SELECT iteration_id, count(*) FROM candidates WHERE campaign_id = ? GROUP BY iteration_id",
       [](iteration_summary& s, const statement& st) { s.candidates = st.get_int(1); });
  each(
      "SELECT c.iteration_id, count(*) FROM candidates c WHERE c.campaign_id = ? "
      "AND EXISTS (SELECT 1 FROM compilations k WHERE k.candidate_id = c.id) "
      "AND NOT EXISTS (SELECT 1 FROM compilations k WHERE k.candidate_id = c.id AND k.status = "
      "'ok') "
      "GROUP BY c.iteration_id",
      [](iteration_summary& s, const statement& st) { s.compile_errors = st.get_int(1); });
  each(
      "SELECT c.iteration_id, e.status, count(*) FROM evaluations e "
      "JOIN candidates c ON c.id = e.candidate_id WHERE c.campaign_id = ? "
      "GROUP BY c.iteration_id, e.status",
      [](iteration_summary& s, const statement& st) {
        s.outcomes[st.get_text(1)] = st.get_int(2);
        s.evaluations += st.get_int(2);
      });
  each(
      "SELECT iteration_id, count(*), sum(prompt_tokens + completion_tokens), sum(cost_usd) "
      "FROM llm_calls WHERE campaign_id = ? GROUP BY iteration_id",
      [](iteration_summary& s, const statement& st) {
        s.llm_calls = st.get_int(1);
        s.tokens = st.get_int(2);
        s.cost_usd = st.get_double(3);
      });
  each(
      "SELECT c.iteration_id, c.id, sum(w.weight * e.sol_fraction) / sum(w.weight) AS score "
      "FROM candidates c JOIN evaluations e ON e.candidate_id = c.id "
      "JOIN workloads w ON w.id = e.workload_id WHERE c.campaign_id = ? "
      "GROUP BY c.id HAVING sum(e.status <> 'ok') = 0 AND count(e.sol_fraction) = count(*) "
      "ORDER BY score DESC, c.id",
      [](iteration_summary& s, const statement& st) {
        if (!s.best_candidate_id) {
          s.best_candidate_id = st.get_int(1);
          s.best_score = st.get_double(2);
        }
      });
  tx.commit();
  return out;
}

void store::add_dropout_decisions(row_id iteration_id,
                                  std::span<const dropout_decision> decisions) {
  transaction tx(db_);
  auto st = db_.prepare(
      "INSERT INTO dropout_decisions(iteration_id, item_id, item_kind, kept, p) VALUES (?, ?, ?, "
      "?, ?)");
  for (const auto& d : decisions) {
    st.reset();
    st.bind_all(iteration_id, d.item_id, d.item_kind, d.kept, d.p).run();
  }
  tx.commit();
}

std::vector<dropout_decision> store::dropout_decisions_of(row_id iteration_id) {
  auto st = db_.prepare(
      "SELECT id, iteration_id, item_id, item_kind, kept, p FROM dropout_decisions "
      "WHERE iteration_id = ? ORDER BY id");
  st.bind(1, iteration_id);
  return collect(st, [](const statement& s) {
    dropout_decision d;
    d.id = s.get_int(0);
    d.iteration_id = s.get_int(1);
    d.item_id = s.get_text(2);
    d.item_kind = s.get_text(3);
    d.kept = s.get_int(4) != 0;
    d.p = s.get_double(5);
    return d;
  });
}

// --- candidates, compilations, evaluations --------------------------------------

row_id store::add_candidate(const candidate_record& c) {
  auto st = db_.prepare(
      "INSERT INTO candidates(campaign_id, iteration_id, parent_id, origin, source, source_hash, "
      "launch_plan_json, parameters_json, provider, model, llm_call_id, note, created_at, "
      "content_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind_all(c.campaign_id, c.iteration_id, c.parent_id, to_string(c.origin), c.source,
              c.source_hash.empty() ? sha256_hex(c.source) : c.source_hash,
              c.launch_plan.is_null() ? nlohmann::json::object() : c.launch_plan,
              c.parameters.is_null() ? nlohmann::json::object() : c.parameters, c.provider, c.model,
              c.llm_call_id, c.note, stamp(c.created_at),
              c.content_key.empty() ? std::optional<std::string>() : c.content_key)
      .run();
  return db_.last_insert_rowid();
}

std::optional<candidate_record> store::find_candidate(row_id id) {
  auto st = db_.prepare(select_from(candidate_cols, "candidates", "WHERE id = ?"));
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  return read_candidate(st);
}

std::optional<row_id> store::find_candidate_by_key(row_id campaign_id, std::string_view key) {
  auto st = db_.prepare(
      "SELECT id FROM candidates WHERE campaign_id = ? AND content_key = ? ORDER BY id LIMIT 1");
  st.bind(1, campaign_id);
  st.bind(2, key);
  if (!st.step()) return std::nullopt;
  return st.get_int(0);
}

bool store::has_candidates(row_id campaign_id) {
  auto st = db_.prepare("SELECT EXISTS (SELECT 1 FROM candidates WHERE campaign_id = ?)");
  st.bind(1, campaign_id);
  st.step();
  return st.get_int(0) != 0;
}

std::vector<candidate_record> store::candidates_without_key(row_id campaign_id) {
  auto st = db_.prepare(select_from(candidate_cols, "candidates",
                                    "WHERE campaign_id = ? AND content_key IS NULL ORDER BY id"));
  st.bind(1, campaign_id);
  return collect(st, read_candidate);
}

void store::set_candidate_key(row_id candidate_id, std::string_view key) {
  auto st = db_.prepare("UPDATE candidates SET content_key = ? WHERE id = ?");
  st.bind(1, key);
  st.bind(2, candidate_id);
  st.run();
  if (db_.changes() == 0)
    throw not_found_error("store: no candidate " + std::to_string(candidate_id));
}

std::vector<candidate_record> store::candidates_of(row_id campaign_id) {
  auto st =
      db_.prepare(select_from(candidate_cols, "candidates", "WHERE campaign_id = ? ORDER BY id"));
  st.bind(1, campaign_id);
  return collect(st, read_candidate);
}

row_id store::add_compilation(const compilation_record& c) {
  auto st = db_.prepare(
      "INSERT INTO compilations(candidate_id, parameter_values_json, arch, options_json, status, "
      "log, registers, shared_bytes, spill_bytes, duration_ms, cubin_hash, compiler_version, "
      "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind_all(c.candidate_id,
              c.parameter_values.is_null() ? nlohmann::json::object() : c.parameter_values, c.arch,
              c.options.is_null() ? nlohmann::json::array() : c.options, c.status, c.log,
              c.registers, c.shared_bytes, c.spill_bytes, c.duration_ms, c.cubin_hash,
              c.compiler_version, stamp(c.created_at))
      .run();
  return db_.last_insert_rowid();
}

std::vector<compilation_record> store::compilations_of(row_id candidate_id) {
  auto st = db_.prepare(
      select_from(compilation_cols, "compilations", "WHERE candidate_id = ? ORDER BY id"));
  st.bind(1, candidate_id);
  return collect(st, read_compilation);
}

row_id store::add_evaluation(const evaluation_record& e) {
  auto st = db_.prepare(
      "INSERT INTO evaluations(candidate_id, compilation_id, workload_id, stage, status, "
      "max_abs_err, max_rel_err, matched_ratio, median_ns, min_ns, mean_ns, stdev_ns, q1_ns, "
      "q3_ns, samples, timing_stop_reason, discarded_samples, timing_json, correctness_json, "
      "counters_json, sol_fraction, device_json, seeds_json, error, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  const timing_summary& t = e.timing;
  st.bind_all(e.candidate_id, e.compilation_id, e.workload_id, e.stage, to_string(e.status),
              e.max_abs_err, e.max_rel_err, e.matched_ratio, t.median_ns, t.min_ns, t.mean_ns,
              t.stdev_ns, t.q1_ns, t.q3_ns, t.samples, t.stop_reason, t.discarded, t.detail,
              e.correctness, e.counters, e.sol_fraction, e.device, e.seeds, e.error,
              stamp(e.created_at))
      .run();
  return db_.last_insert_rowid();
}

std::vector<evaluation_record> store::evaluations_of(row_id candidate_id) {
  auto st = db_.prepare(std::string(evaluation_select) +
                        " WHERE e.candidate_id = ? ORDER BY w.position, e.id");
  st.bind(1, candidate_id);
  return collect(st, read_evaluation);
}

// --- LLM calls and events -----------------------------------------------------------

row_id store::add_llm_call(const llm_call_record& call) {
  refuse_credentials(call.request, "an LLM request");
  auto st = db_.prepare(
      "INSERT INTO llm_calls(campaign_id, iteration_id, provider, model, request_json, prompt, "
      "response, status, http_status, attempts, prompt_tokens, completion_tokens, cached_tokens, "
      "reasoning_tokens, cost_usd, latency_ms, error, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind_all(call.campaign_id, call.iteration_id, call.provider, call.model, call.request,
              call.prompt, call.response, call.status, call.http_status, call.attempts,
              call.prompt_tokens, call.completion_tokens, call.cached_tokens, call.reasoning_tokens,
              call.cost_usd, call.latency_ms, call.error, stamp(call.created_at))
      .run();
  return db_.last_insert_rowid();
}

std::vector<llm_call_record> store::llm_calls_of(row_id campaign_id) {
  auto st =
      db_.prepare(select_from(llm_call_cols, "llm_calls", "WHERE campaign_id = ? ORDER BY id"));
  st.bind(1, campaign_id);
  return collect(st, read_llm_call);
}

row_id store::add_event(const event_record& e) {
  if (e.kind.empty()) throw store_error("store: event without a kind");
  auto st = db_.prepare(
      "INSERT INTO events(campaign_id, kind, level, message, data_json, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?)");
  st.bind_all(e.campaign_id, e.kind, e.level, e.message, e.data, stamp(e.created_at)).run();
  return db_.last_insert_rowid();
}

std::optional<event_record> store::latest_event(row_id campaign_id, std::string_view kind) {
  auto st = db_.prepare(select_from(event_cols, "events",
                                    "WHERE campaign_id = ? AND kind = ? ORDER BY id DESC LIMIT 1"));
  st.bind(1, campaign_id);
  st.bind(2, kind);
  if (!st.step()) return std::nullopt;
  return read_event(st);
}

std::vector<event_record> store::events_of_kind(row_id campaign_id, std::string_view kind) {
  auto st = db_.prepare(
      select_from(event_cols, "events", "WHERE campaign_id = ? AND kind = ? ORDER BY id"));
  st.bind(1, campaign_id);
  st.bind(2, kind);
  return collect(st, read_event);
}

std::optional<event_record> store::latest_evaluated(row_id campaign_id, std::string_view stage) {
  auto st = db_.prepare(select_from(
      event_cols, "events",
      "WHERE campaign_id = ? AND kind = 'evaluated' AND json_extract(data_json, '$.stage') = ? "
      "ORDER BY id DESC LIMIT 1"));
  st.bind(1, campaign_id);
  st.bind(2, stage);
  if (!st.step()) return std::nullopt;
  return read_event(st);
}

void store::journal_result(row_id campaign_id, std::string_view cache_key, row_id event_id,
                           std::int64_t subject) {
  auto st = db_.prepare(
      "INSERT OR REPLACE INTO eval_journal(campaign_id, cache_key, event_id, subject) "
      "VALUES (?, ?, ?, ?)");
  st.bind_all(campaign_id, cache_key, event_id, subject).run();
}

std::optional<nlohmann::json> store::journaled_result(row_id campaign_id,
                                                      std::string_view cache_key) {
  // The subject's result is read out of the event by SQLite, so only that
  // part of the event's JSON is handed back and parsed.
  auto st = db_.prepare(
      "SELECT json_extract(e.data_json, '$.subjects[' || j.subject || '].result') "
      "FROM eval_journal j JOIN events e ON e.id = j.event_id "
      "WHERE j.campaign_id = ? AND j.cache_key = ?");
  st.bind(1, campaign_id);
  st.bind(2, cache_key);
  if (!st.step() || st.is_null(0)) return std::nullopt;
  return st.get_json(0);
}

std::int64_t store::journal_size(row_id campaign_id) {
  auto st = db_.prepare("SELECT count(*) FROM eval_journal WHERE campaign_id = ?");
  st.bind(1, campaign_id);
  st.step();
  return st.get_int(0);
}

std::vector<event_record> store::events_of(std::optional<row_id> campaign_id,
                                           std::optional<std::int64_t> limit) {
  // The newest `limit` rows, then back to chronological order.
  const std::string sql =
      "SELECT * FROM (" +
      select_from(event_cols, "events",
                  "WHERE (?1 IS NULL AND campaign_id IS NULL) OR campaign_id = ?1 "
                  "ORDER BY id DESC LIMIT coalesce(?2, -1)") +
      ") ORDER BY id";
  auto st = db_.prepare(sql);
  st.bind(1, campaign_id);
  st.bind(2, limit);
  return collect(st, read_event);
}

}  // namespace kopt::store
