#include "store/agent_submissions.hpp"

namespace kopt::store {

namespace {

constexpr const char* columns =
    "id, campaign_id, agent, candidate_json, note, brief_hash, status, iteration, candidate_key, "
    "error, "
    "created_at, taken_at";

agent_submission read_row(statement& st) {
  agent_submission s;
  s.id = st.get_int(0);
  s.campaign_id = st.get_int(1);
  s.agent = st.get_text(2);
  s.candidate = st.get_json(3);
  s.note = st.get_opt_text(4);
  s.brief_hash = st.get_opt_text(5);
  s.status = st.get_text(6);
  s.iteration = st.get_opt_int(7);
  s.candidate_key = st.get_opt_text(8);
  s.error = st.get_opt_text(9);
  s.created_at = st.get_int(10);
  s.taken_at = st.get_opt_int(11);
  return s;
}

template <typename T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json agent_submission::to_json() const {
  return {
      {"id", id},
      {"campaign_id", campaign_id},
      {"agent", agent},
      {"note", opt(note)},
      {"brief_hash", opt(brief_hash)},
      {"status", status},
      {"iteration", opt(iteration)},
      {"candidate_key", opt(candidate_key)},
      {"error", opt(error)},
      {"created_at", format_time(created_at)},
      {"taken_at", taken_at ? nlohmann::json(format_time(*taken_at)) : nlohmann::json(nullptr)}};
}

row_id add_agent_submission(store& db, const agent_submission& s) {
  auto st = db.db().prepare(
      "INSERT INTO agent_submissions(campaign_id, agent, candidate_json, note, brief_hash, status, "
      "created_at) "
      "VALUES (?, ?, ?, ?, ?, 'pending', ?)");
  st.bind_all(s.campaign_id, s.agent, s.candidate, s.note, s.brief_hash, now_ms()).run();
  return db.db().last_insert_rowid();
}

std::vector<agent_submission> agent_submissions_of(store& db, row_id campaign_id,
                                                   const std::string& status) {
  auto st = db.db().prepare(
      std::string("SELECT ") + columns +
      " FROM agent_submissions WHERE campaign_id = ? AND (? = '' OR status = ?) ORDER BY id");
  st.bind_all(campaign_id, status, status);
  std::vector<agent_submission> out;
  while (st.step()) out.push_back(read_row(st));
  return out;
}

std::optional<agent_submission> find_agent_submission(store& db, row_id id) {
  auto st =
      db.db().prepare(std::string("SELECT ") + columns + " FROM agent_submissions WHERE id = ?");
  st.bind_all(id);
  if (!st.step()) return std::nullopt;
  return read_row(st);
}

void mark_agent_submission_taken(store& db, row_id id, std::int64_t iteration,
                                 const std::string& candidate_key) {
  auto st = db.db().prepare(
      "UPDATE agent_submissions SET status = 'taken', iteration = ?, candidate_key = ?, taken_at = "
      "? WHERE id = ?");
  st.bind_all(iteration, candidate_key, now_ms(), id).run();
}

void mark_agent_submission_rejected(store& db, row_id id, const std::string& error) {
  auto st = db.db().prepare(
      "UPDATE agent_submissions SET status = 'rejected', error = ?, taken_at = ? WHERE id = ?");
  st.bind_all(error, now_ms(), id).run();
}

void set_campaign_waiting(store& db, row_id campaign_id, const std::optional<std::string>& what) {
  auto st =
      db.db().prepare("UPDATE campaigns SET waiting_for = ? WHERE id = ? AND waiting_for IS NOT ?");
  st.bind_all(what, campaign_id, what).run();
}

std::optional<std::string> campaign_waiting(store& db, row_id campaign_id) {
  auto st = db.db().prepare("SELECT waiting_for FROM campaigns WHERE id = ?");
  st.bind_all(campaign_id);
  if (!st.step()) return std::nullopt;
  return st.get_opt_text(0);
}

std::map<row_id, std::string> waiting_campaigns(store& db) {
  auto st = db.db().prepare(
      "SELECT id, waiting_for FROM campaigns WHERE waiting_for IS NOT NULL "
      "AND state NOT IN ('done', 'failed', 'cancelled')");
  std::map<row_id, std::string> out;
  while (st.step()) out[st.get_int(0)] = st.get_text(1);
  return out;
}

}  // namespace kopt::store
