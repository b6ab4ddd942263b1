#include "store/retention.hpp"

#include <system_error>

#include "common/error.hpp"

namespace kopt::store {

namespace {

// Each slimming is one UPDATE whose WHERE picks the rows and whose SET is
// the new value; dry runs evaluate the same expressions in a SELECT, so
// what is reported is what a real run removes.
struct rule {
  const char* table;
  const char* where;  // ?1 = campaign id
  const char* value;  // the new value of `column`
  const char* column;
};

constexpr rule samples_rule{
    "evaluations",
    "candidate_id IN (SELECT id FROM candidates WHERE campaign_id = ?1 AND id IS NOT "
    "(SELECT best_candidate_id FROM campaigns WHERE id = ?1)) "
    "AND json_type(timing_json, '$.samples_ns') IS NOT NULL",
    "json_remove(timing_json, '$.samples_ns')", "timing_json"};

constexpr rule checkpoint_rule{
    "events",
    "campaign_id = ?1 AND kind = 'loop_state' AND json_type(data_json, '$.gc') IS NULL "
    "AND id < (SELECT max(id) FROM events WHERE campaign_id = ?1 AND kind = 'loop_state')",
    // Removing keys (not rebuilding the object from json_extract) keeps the
    // numbers' text as written: json_extract would turn best_sol into an
    // SQL REAL and print it back with 15 digits, changing the report.
    "json_set(json_remove(data_json, '$.elites', '$.history', '$.masked', '$.gains', "
    "'$.screen_workloads'), '$.gc', 1)",
    "data_json"};

constexpr rule evaluated_rule{
    "events", "campaign_id = ?1 AND kind = 'evaluated' AND json_type(data_json, '$.gc') IS NULL",
    "json_set(json_remove(data_json, '$.events'), '$.subjects', "
    "json((SELECT json_group_array(json(json_remove(s.value, '$.result'))) "
    "FROM json_each(data_json, '$.subjects') s)), '$.gc', 1)",
    "data_json"};

struct rule_count {
  std::int64_t rows = 0;
  std::int64_t bytes = 0;
};

rule_count measure(database& d, const rule& r, row_id campaign) {
  const std::string sql = std::string("SELECT count(*), coalesce(sum(length(") + r.column +
                          ") - length(" + r.value + ")), 0) FROM " + r.table + " WHERE " + r.where;
  auto st = d.prepare(sql);
  st.bind(1, campaign);
  st.step();
  return {st.get_int(0), st.get_int(1)};
}

void apply(database& d, const rule& r, row_id campaign) {
  const std::string sql =
      std::string("UPDATE ") + r.table + " SET " + r.column + " = " + r.value + " WHERE " + r.where;
  auto st = d.prepare(sql);
  st.bind(1, campaign);
  st.run();
}

std::int64_t pragma_or_zero(database& d, const char* name) {
  try {
    return d.pragma_int(name);
  } catch (const store_error&) {
    return 0;
  }
}

}  // namespace

nlohmann::json gc_report::to_json() const {
  auto one = [](const gc_campaign_report& c) {
    nlohmann::json j = {{"sample_rows", c.sample_rows},
                        {"checkpoints", c.checkpoints},
                        {"debug_events", c.debug_events},
                        {"journal_rows", c.journal_rows},
                        {"json_bytes", c.bytes}};
    if (c.campaign_id != 0) j["campaign_id"] = c.campaign_id;
    return j;
  };
  nlohmann::json cs = nlohmann::json::array();
  for (const auto& c : campaigns) cs.push_back(one(c));
  return {{"dry_run", dry_run},
          {"campaigns", cs},
          {"total", one(total)},
          {"file_bytes", file_bytes},
          {"free_bytes", free_bytes}};
}

std::vector<row_id> gc_candidates(store& db, const gc_options& o) {
  auto st = db.db().prepare(
      "SELECT id FROM campaigns WHERE state IN ('done','failed','cancelled') "
      "AND finished_at IS NOT NULL AND finished_at <= ?1 "
      "AND (?2 OR collected_at IS NULL) AND (?3 IS NULL OR id = ?3) "
      "ORDER BY finished_at, id LIMIT ?4");
  st.bind(1, now_ms() - o.min_age_ms);
  st.bind(2, o.again || o.campaign.has_value());
  st.bind(3, o.campaign);
  st.bind(4, o.max_campaigns);
  std::vector<row_id> out;
  while (st.step()) out.push_back(st.get_int(0));
  return out;
}

gc_report collect_garbage(store& db, const gc_options& o) {
  if (db.read_only()) throw store_error("store: gc needs a writable store (" + db.path() + ")");
  if (o.campaign) {
    const auto c = db.find_campaign(*o.campaign);
    if (!c)
      throw not_found_error("no campaign " + std::to_string(*o.campaign) + " in " + db.path());
    if (!is_terminal(c->state))
      throw not_found_error("campaign " + std::to_string(*o.campaign) + " is " +
                            std::string(to_string(c->state)) +
                            ": only finished (done, failed, cancelled) campaigns are collected");
  }
  gc_report rep;
  rep.dry_run = o.dry_run;
  auto& d = db.db();
  for (const row_id id : gc_candidates(db, o)) {
    transaction tx(d);  // one short write transaction per campaign
    gc_campaign_report c;
    c.campaign_id = id;
    const auto s = measure(d, samples_rule, id);
    const auto k = measure(d, checkpoint_rule, id);
    const auto e = measure(d, evaluated_rule, id);
    c.sample_rows = s.rows;
    c.checkpoints = k.rows;
    c.debug_events = e.rows;
    c.bytes = s.bytes + k.bytes + e.bytes;
    {
      auto st = d.prepare("SELECT count(*) FROM eval_journal WHERE campaign_id = ?");
      st.bind(1, id);
      st.step();
      c.journal_rows = st.get_int(0);
    }
    if (!o.dry_run) {
      apply(d, samples_rule, id);
      apply(d, checkpoint_rule, id);
      apply(d, evaluated_rule, id);
      auto del = d.prepare("DELETE FROM eval_journal WHERE campaign_id = ?");
      del.bind(1, id);
      del.run();
      auto mark = d.prepare("UPDATE campaigns SET collected_at = ? WHERE id = ?");
      mark.bind_all(now_ms(), id).run();
      tx.commit();
    }
    rep.total.sample_rows += c.sample_rows;
    rep.total.checkpoints += c.checkpoints;
    rep.total.debug_events += c.debug_events;
    rep.total.journal_rows += c.journal_rows;
    rep.total.bytes += c.bytes;
    rep.campaigns.push_back(c);
  }
  const std::int64_t page = pragma_or_zero(d, "page_size");
  rep.file_bytes = pragma_or_zero(d, "page_count") * page;
  rep.free_bytes = pragma_or_zero(d, "freelist_count") * page;
  return rep;
}

std::string checkpoint_wal(store& db, std::chrono::milliseconds wait,
                           std::chrono::milliseconds restore) {
  auto& d = db.db();
  d.set_busy_timeout(wait);
  std::string result;
  try {
    if (!d.checkpoint(database::checkpoint_mode::truncate).busy) {
      result = "truncated";
    } else {
      result = d.checkpoint(database::checkpoint_mode::passive).busy ? "busy" : "passive";
    }
  } catch (...) {
    d.set_busy_timeout(restore);
    throw;
  }
  d.set_busy_timeout(restore);
  return result;
}

void archive(store& db, const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::exists(file, ec))
    throw store_error("store: the archive " + file.string() +
                      " exists already; give a new file name");
  auto st = db.db().prepare("VACUUM INTO ?");
  st.bind(1, file.string());
  st.run();
}

}  // namespace kopt::store
