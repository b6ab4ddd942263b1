#include "store/scheduling.hpp"

#include "common/error.hpp"

namespace kopt::store {

std::optional<campaign_control> find_campaign_control(store& db, row_id id) {
  auto st = db.db().prepare(
      "SELECT state, requested_action, started_at, step_failures FROM campaigns WHERE id = ?");
  st.bind_all(id);
  if (!st.step()) return std::nullopt;
  return campaign_control{st.get_text(0), st.get_opt_text(1), !st.is_null(2), st.get_int(3)};
}

void set_requested_action(store& db, row_id id, const std::optional<std::string>& action) {
  auto st =
      db.db().prepare("UPDATE campaigns SET requested_action = ?, updated_at = ? WHERE id = ?");
  st.bind_all(action, now_ms(), id).run();
}

std::vector<row_id> campaigns_with_requests(store& db) {
  auto st = db.db().prepare("SELECT id FROM campaigns WHERE requested_action IS NOT NULL");
  std::vector<row_id> ids;
  while (st.step()) ids.push_back(st.get_int(0));
  return ids;
}

void reopen_campaign(store& db, row_id id, campaign_state to) {
  auto st = db.db().prepare(
      "UPDATE campaigns SET state = ?, stop_reason = NULL, requested_action = NULL, step_failures "
      "= 0, "
      "not_before = NULL, last_error = NULL, updated_at = ? WHERE id = ?");
  st.bind_all(std::string(to_string(to)), now_ms(), id).run();
}

std::vector<runnable_row> runnable_campaign_rows(store& db, std::int64_t now) {
  auto st = db.db().prepare(
      "SELECT id, team, priority, created_at FROM campaigns WHERE state IN ('queued','running') "
      "AND requested_action IS NULL AND (not_before IS NULL OR not_before <= ?) AND provider <> "
      "'eval' "
      // A campaign waiting for an agent runs again when a submission arrives.
      "AND (waiting_for IS NULL OR EXISTS (SELECT 1 FROM agent_submissions a WHERE a.campaign_id = "
      "campaigns.id AND a.status = 'pending')) "
      "ORDER BY created_at, id");
  st.bind_all(now);
  std::vector<runnable_row> out;
  while (st.step()) out.push_back({st.get_int(0), st.get_text(1), st.get_int(2), st.get_int(3)});
  return out;
}

void clear_step_failures(store& db, row_id id) {
  auto st = db.db().prepare(
      "UPDATE campaigns SET step_failures = 0, not_before = NULL, last_error = NULL WHERE id = ? "
      "AND (step_failures <> 0 OR not_before IS NOT NULL OR last_error IS NOT NULL)");
  st.bind_all(id).run();
}

void set_step_failures(store& db, row_id id, std::int64_t failures, std::int64_t not_before_ms,
                       const std::string& last_error) {
  auto st = db.db().prepare(
      "UPDATE campaigns SET step_failures = ?, not_before = ?, last_error = ?, updated_at = ? "
      "WHERE id = ?");
  st.bind_all(failures, not_before_ms, last_error, now_ms(), id).run();
}

std::optional<submission_record> find_submission(store& db, const std::string& key) {
  auto st = db.db().prepare(
      "SELECT id, origin, key, path, team, status, campaign_id, error, created_at FROM submissions "
      "WHERE key = ?");
  st.bind_all(key);
  if (!st.step()) return std::nullopt;
  return submission_record{st.get_int(0),     st.get_text(1),     st.get_text(2),
                           st.get_text(3),    st.get_text(4),     st.get_text(5),
                           st.get_opt_int(6), st.get_opt_text(7), st.get_int(8)};
}

row_id add_submission(store& db, const submission_record& s) {
  auto st = db.db().prepare(
      "INSERT INTO submissions(origin, key, path, team, status, campaign_id, error, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind_all(s.origin, s.key, s.path, s.team, s.status, s.campaign_id, s.error,
              s.created_at ? s.created_at : now_ms())
      .run();
  return db.db().last_insert_rowid();
}

std::int64_t count_campaign_overviews(store& db) {
  auto st = db.db().prepare("SELECT count(*) FROM campaigns WHERE provider <> 'eval'");
  st.step();
  return st.get_int(0);
}

std::vector<campaign_overview> campaign_overviews(store& db, std::optional<row_id> only,
                                                  std::optional<std::int64_t> limit,
                                                  std::int64_t offset) {
  std::string sql =
      "SELECT c.id, o.name, c.state, c.provider, c.model, c.team, c.priority, c.spent_iterations, "
      "c.budget_iterations, c.spent_tokens, c.budget_tokens, c.spent_cost_usd, c.budget_cost_usd, "
      "c.spent_wall_time_s, c.budget_wall_time_s, c.best_candidate_id, c.best_score, c.created_at, "
      "c.updated_at, c.started_at, c.finished_at, c.stop_reason, c.requested_action, "
      "c.step_failures, "
      "c.last_error, c.not_before, json_extract(c.settings_json, '$.target_sol_fraction') "
      "FROM campaigns c JOIN operators o ON o.id = c.operator_id WHERE c.provider <> 'eval'";
  if (only) sql += " AND c.id = ?";
  sql += " ORDER BY c.id DESC LIMIT ? OFFSET ?";
  auto st = db.db().prepare(sql);
  int i = 0;
  if (only) st.bind(++i, *only);
  st.bind(++i, limit.value_or(-1));
  st.bind(++i, std::max<std::int64_t>(offset, 0));
  std::vector<campaign_overview> out;
  while (st.step()) {
    campaign_overview c;
    c.id = st.get_int(0);
    c.operator_name = st.get_text(1);
    c.state = st.get_text(2);
    c.provider = st.get_text(3);
    c.model = st.get_text(4);
    c.team = st.get_text(5);
    c.priority = st.get_int(6);
    c.spent_iterations = st.get_int(7);
    c.budget_iterations = st.get_opt_int(8);
    c.spent_tokens = st.get_int(9);
    c.budget_tokens = st.get_opt_int(10);
    c.spent_cost_usd = st.get_double(11);
    c.budget_cost_usd = st.get_opt_double(12);
    c.spent_wall_time_s = st.get_double(13);
    c.budget_wall_time_s = st.get_opt_double(14);
    c.best_candidate_id = st.get_opt_int(15);
    c.best_score = st.get_opt_double(16);
    c.created_at = st.get_int(17);
    c.updated_at = st.get_int(18);
    c.started_at = st.get_opt_int(19);
    c.finished_at = st.get_opt_int(20);
    c.stop_reason = st.get_opt_text(21);
    c.requested_action = st.get_opt_text(22);
    c.step_failures = st.get_int(23);
    c.last_error = st.get_opt_text(24);
    c.not_before = st.get_opt_int(25);
    c.target_sol_fraction = st.get_opt_double(26);
    out.push_back(std::move(c));
  }
  return out;
}

store_totals totals(store& db) {
  auto& d = db.db();
  store_totals t;
  // One snapshot, short: the counters are read, not computed (schema v5
  // keeps them with triggers), so a scrape costs the same at 1M rows as at
  // 100 and holds no read transaction that would stall a WAL checkpoint.
  transaction tx(d, transaction::kind::deferred);
  {
    // Campaigns are few (hundreds): counted, on the state index.
    for (const auto& s : campaign_state_names()) t.campaigns_by_state[std::string(s)] = 0;
    auto st =
        d.prepare("SELECT state, count(*) FROM campaigns WHERE provider <> 'eval' GROUP BY state");
    while (st.step()) t.campaigns_by_state[st.get_text(0)] = st.get_int(1);
  }
  for (const auto& s : eval_status_names()) t.evaluations_by_status[std::string(s)] = 0;
  t.submissions_by_status = {{"accepted", 0}, {"rejected", 0}};
  auto st = d.prepare("SELECT key, n, x FROM store_counts");
  while (st.step()) {
    const std::string key = st.get_text(0);
    const std::int64_t n = st.get_int(1);
    const auto colon = key.find(':');
    const std::string group = key.substr(0, colon);
    const std::string name = colon == std::string::npos ? std::string() : key.substr(colon + 1);
    if (group == "evaluations") {
      t.evaluations_by_status[name] = n;
    } else if (group == "llm_calls") {
      if (n != 0) t.llm_calls_by_status[name] = n;  // only statuses present
    } else if (group == "submissions") {
      t.submissions_by_status[name] = n;
    } else if (key == "llm:prompt_tokens") {
      t.prompt_tokens = n;
    } else if (key == "llm:completion_tokens") {
      t.completion_tokens = n;
    } else if (key == "llm:cached_tokens") {
      t.cached_tokens = n;
    } else if (key == "llm:reasoning_tokens") {
      t.reasoning_tokens = n;
    } else if (key == "llm:cost_usd") {
      t.llm_cost_usd = st.get_double(2);
    } else if (key == "llm:retries") {
      t.llm_retries = n;
    } else if (key == "candidates") {
      t.candidates = n;
    } else if (key == "events:step_failed") {
      t.step_failed_events = n;
    }
  }
  tx.commit();
  return t;
}

}  // namespace kopt::store
