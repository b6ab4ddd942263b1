#include "daemon/queue.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "campaign/submission.hpp"
#include "common/error.hpp"
#include "common/hash.hpp"
#include "store/scheduling.hpp"

namespace kopt::daemon {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

void add_event(store::store& db, store::row_id id, const std::string& kind,
               const std::string& message, json data = json::object(),
               const std::string& level = "info") {
  store::event_record e;
  e.campaign_id = id;
  e.kind = kind;
  e.level = level;
  e.message = message;
  e.data = std::move(data);
  db.add_event(e);
}

struct campaign_row {
  std::string state;
  std::optional<std::string> requested;
  bool started = false;
};

campaign_row read_row(store::store& db, store::row_id id) {
  const auto c = store::find_campaign_control(db, id);
  if (!c) throw kopt::not_found_error(fmt::format("no campaign {}", id));
  return {c->state, c->requested_action, c->started};
}

bool terminal(const std::string& s) {
  return s == "done" || s == "failed" || s == "cancelled";
}

void set_request(store::store& db, store::row_id id, std::optional<std::string> action) {
  store::set_requested_action(db, id, action);
}

}  // namespace

submit_result submit_campaign(store::store& db, const config::operator_config& op,
                              std::int64_t priority, const std::string& team,
                              const std::string& origin) {
  store::transaction tx(db.db());
  const auto put = campaign::store_operator(db, op);
  store::campaign_record c;
  c.operator_id = put.operator_id;
  c.provider = op.campaign.provider;
  c.model = op.campaign.model;
  c.settings = campaign::campaign_settings_json(op.campaign);
  c.budget = {op.campaign.limits.iterations, op.campaign.limits.wall_time_s,
              op.campaign.limits.tokens, op.campaign.limits.cost_usd};
  c.priority = priority;
  c.team = team;
  const auto id = db.create_campaign(c);
  add_event(db, id, "submitted", "queued from " + origin,
            {{"operator_id", put.operator_id},
             {"new_operator", put.created},
             {"content_hash", op.content_hash()},
             {"priority", priority},
             {"team", team},
             {"origin", origin}});
  tx.commit();
  return {id, put.operator_id, put.created};
}

// --- spool -----------------------------------------------------------------------

namespace {

bool valid_team_name(const std::string& s) {
  static const std::regex re("[A-Za-z0-9_][A-Za-z0-9._-]{0,63}");
  return std::regex_match(s, re);
}

fs::path unique_target(const fs::path& dir, const std::string& name, store::row_id tag) {
  fs::path p = dir / name;
  std::error_code ec;
  if (!fs::exists(p, ec)) return p;
  return dir / fmt::format("{}.{}", name, tag);
}

void move_file(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  fs::rename(from, to, ec);
  if (ec)
    spdlog::error("spool: cannot move {} to {}: {}", from.string(), to.string(), ec.message());
}

void write_error_file(const fs::path& target, const std::string& rel, const std::string& error) {
  const fs::path ef = target.string() + ".error.txt";
  std::ofstream out(ef, std::ios::trunc);
  out << "kopt daemon rejected " << rel << " (" << store::format_time(store::now_ms()) << "):\n"
      << error;
  if (!error.empty() && error.back() != '\n') out << '\n';
  if (!out) spdlog::error("spool: cannot write {}", ef.string());
}

void finish_file(const fs::path& file, const fs::path& dir, const std::string& name,
                 const std::string& rel, store::row_id sub_id, const std::string& status,
                 std::optional<store::row_id> campaign, const std::string& error) {
  if (status == "accepted") {
    move_file(file, unique_target(dir / "accepted",
                                  fmt::format("{}-{}", campaign.value_or(0), name), sub_id));
  } else {
    const fs::path target = unique_target(dir / "rejected", name, sub_id);
    fs::create_directories(target.parent_path());
    // The error file first: whoever sees the file in rejected/ finds why.
    write_error_file(target, rel, error);
    move_file(file, target);
  }
}

struct spool_item {
  fs::path file;
  fs::path dir;  // the directory it is in (accepted/ and rejected/ live beside it)
  std::string name;
  std::string rel;  // relative to the spool: team/name.json
  std::string team;
};

void process_one(store::store& db, const spool_item& it, std::int64_t max_bytes,
                 spool_report& rep) {
  struct stat sb {};
  if (lstat(it.file.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    ++rep.skipped;
    return;
  }
  const std::int64_t mtime_ns =
      static_cast<std::int64_t>(sb.st_mtim.tv_sec) * 1000000000LL + sb.st_mtim.tv_nsec;
  std::string content;
  std::string error;
  if (sb.st_size > max_bytes) {
    error = fmt::format(
        "{}: {} bytes, more than the spool limit of {} bytes (limits.spool_max_bytes)\n", it.rel,
        static_cast<std::int64_t>(sb.st_size), max_bytes);
  } else {
    std::ifstream in(it.file, std::ios::binary);
    if (!in) {
      ++rep.skipped;
      return;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    content = ss.str();
  }
  // Same path, same bytes, same modification time: the same submission.
  const std::string key = sha256_hex(
      fmt::format("{}\n{}\n{}\n", it.rel, mtime_ns, static_cast<std::int64_t>(sb.st_size)) +
      content);

  std::optional<config::operator_config> op;
  if (error.empty()) {
    // Validate exactly the bytes that were hashed; relative source files
    // resolve against the file's own directory.
    auto r = config::load_operator_text(content, it.rel, it.dir);
    for (const auto& d : r.diagnostics)
      if (d.level == config::diagnostic::severity::error) error += d.to_string() + "\n";
    if (r.ok())
      op = std::move(r.op);
    else if (error.empty())
      error = it.rel + ": not a valid operator config\n";
  }

  store::transaction tx(db.db());
  {
    if (const auto seen = store::find_submission(db, key)) {
      const auto sub_id = seen->id;
      const std::string status = seen->status;
      const auto cid = seen->campaign_id;
      const std::string err = seen->error.value_or("");
      tx.commit();
      // Recorded by a run that died before moving the file: move it now.
      finish_file(it.file, it.dir, it.name, it.rel, sub_id, status, cid, err);
      ++rep.already_done;
      return;
    }
  }
  std::optional<store::row_id> cid;
  if (op) cid = submit_campaign(db, *op, 0, it.team, "spool " + it.rel).campaign_id;
  const std::string status = op ? "accepted" : "rejected";
  const auto sub_id = store::add_submission(
      db, {.origin = "spool",
           .key = key,
           .path = it.rel,
           .team = it.team,
           .status = status,
           .campaign_id = cid,
           .error = op ? std::optional<std::string>() : std::optional(error)});
  tx.commit();
  if (op) {
    spdlog::info("spool: {} queued as campaign {} (team '{}')", it.rel, *cid, it.team);
    ++rep.accepted;
  } else {
    spdlog::warn("spool: {} rejected: {}", it.rel, error.substr(0, error.find('\n')));
    ++rep.rejected;
  }
  finish_file(it.file, it.dir, it.name, it.rel, sub_id, status, cid, error);
}

void collect(const fs::path& dir, const std::string& team, std::vector<spool_item>& out) {
  std::error_code ec;
  for (fs::directory_iterator d(dir, ec), end; !ec && d != end; d.increment(ec)) {
    const std::string name = d->path().filename().string();
    if (name.empty() || name[0] == '.') continue;  // temporary files of an atomic write
    std::error_code e2;
    if (d->is_directory(e2)) {
      if (team.empty() && name != "accepted" && name != "rejected" && valid_team_name(name))
        collect(d->path(), name, out);
      continue;
    }
    if (d->path().extension() != ".json") continue;  // name.json.part etc.: not finished yet
    out.push_back({d->path(), dir, name, team.empty() ? name : team + "/" + name, team});
  }
}

}  // namespace

spool_report scan_spool(store::store& db, const fs::path& spool_dir, std::int64_t max_bytes) {
  spool_report rep;
  std::vector<spool_item> items;
  collect(spool_dir, "", items);
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.rel < b.rel; });
  for (const auto& it : items) {
    try {
      process_one(db, it, max_bytes, rep);
    } catch (const kopt::store_error& e) {
      // The file stays in the spool and is tried again on the next scan.
      spdlog::error("spool: {}: {}", it.rel, e.what());
      ++rep.skipped;
    }
  }
  return rep;
}

// --- control ---------------------------------------------------------------------

json control_result::to_json() const {
  return {{"campaign_id", campaign_id}, {"before", before},   {"after", after},
          {"deferred", deferred},       {"changed", changed}, {"message", message}};
}

control_result pause_campaign(store::store& db, store::row_id id) {
  store::transaction tx(db.db());
  const auto row = read_row(db, id);
  control_result r{id, row.state, row.state, false, false, ""};
  if (terminal(row.state))
    throw kopt::error(fmt::format("campaign {} is {}: there is nothing to pause", id, row.state));
  if (row.state == "paused") {
    r.message = fmt::format("campaign {} is already paused", id);
  } else if (row.state == "queued") {
    db.set_campaign_state(id, store::campaign_state::paused, "paused by user");
    add_event(db, id, "paused", "paused by user (kopt pause)");
    r.after = "paused";
    r.changed = true;
    r.message = fmt::format("campaign {} paused", id);
  } else if (row.requested == std::optional<std::string>("pause") ||
             row.requested == std::optional<std::string>("cancel")) {
    r.deferred = true;
    r.message = fmt::format("campaign {} already has a {} request pending", id, *row.requested);
  } else {
    set_request(db, id, "pause");
    add_event(db, id, "pause_requested",
              "pause requested (kopt pause); applied at the next checkpoint");
    r.deferred = true;
    r.changed = true;
    r.message = fmt::format(
        "campaign {} is running: the daemon pauses it at its next checkpoint (or when it starts, "
        "if none runs)",
        id);
  }
  tx.commit();
  return r;
}

control_result resume_campaign(store::store& db, store::row_id id) {
  store::transaction tx(db.db());
  const auto row = read_row(db, id);
  control_result r{id, row.state, row.state, false, false, ""};
  if (terminal(row.state))
    throw kopt::error(fmt::format(
        "campaign {} is {}: it cannot be resumed (submit the operator again)", id, row.state));
  if (row.state == "paused") {
    const std::string to = row.started ? "running" : "queued";
    store::reopen_campaign(
        db, id, row.started ? store::campaign_state::running : store::campaign_state::queued);
    add_event(db, id, "resumed_by_user", "resumed by user (kopt resume)");
    r.after = to;
    r.changed = true;
    r.message = fmt::format("campaign {} is {} again", id, to);
  } else if (row.requested == std::optional<std::string>("pause")) {
    set_request(db, id, std::nullopt);
    add_event(db, id, "pause_withdrawn", "pending pause withdrawn (kopt resume)");
    r.changed = true;
    r.message = fmt::format("campaign {}: pending pause withdrawn", id);
  } else if (row.requested == std::optional<std::string>("cancel")) {
    throw kopt::error(fmt::format("campaign {} is being cancelled; it cannot be resumed", id));
  } else {
    r.message = fmt::format("campaign {} is {}, not paused", id, row.state);
  }
  tx.commit();
  return r;
}

control_result cancel_campaign(store::store& db, store::row_id id) {
  store::transaction tx(db.db());
  const auto row = read_row(db, id);
  control_result r{id, row.state, row.state, false, false, ""};
  if (row.state == "cancelled") {
    r.message = fmt::format("campaign {} is already cancelled", id);
  } else if (terminal(row.state)) {
    throw kopt::error(
        fmt::format("campaign {} is already {}; there is nothing to cancel", id, row.state));
  } else if (row.state == "queued" || row.state == "paused") {
    db.set_campaign_state(id, store::campaign_state::cancelled, "cancelled by user");
    set_request(db, id, std::nullopt);
    add_event(db, id, "cancelled", "cancelled by user (kopt cancel)");
    r.after = "cancelled";
    r.changed = true;
    r.message = fmt::format("campaign {} cancelled", id);
  } else if (row.requested == std::optional<std::string>("cancel")) {
    r.deferred = true;
    r.message = fmt::format("campaign {} already has a cancel request pending", id);
  } else {
    set_request(db, id, "cancel");
    add_event(db, id, "cancel_requested",
              "cancel requested (kopt cancel); applied at the next checkpoint");
    r.deferred = true;
    r.changed = true;
    r.message = fmt::format(
        "campaign {} is running: the daemon cancels it at its next checkpoint (or when it starts, "
        "if none runs)",
        id);
  }
  tx.commit();
  return r;
}

std::optional<std::string> apply_request(store::store& db, store::row_id id) {
  store::transaction tx(db.db());
  const auto row = read_row(db, id);
  if (!row.requested) return std::nullopt;
  set_request(db, id, std::nullopt);
  std::optional<std::string> done;
  if (!terminal(row.state)) {
    if (*row.requested == "pause") {
      db.set_campaign_state(id, store::campaign_state::paused, "paused by user");
      add_event(db, id, "paused", "paused by user at a checkpoint");
    } else {
      db.set_campaign_state(id, store::campaign_state::cancelled, "cancelled by user");
      add_event(db, id, "cancelled", "cancelled by user at a checkpoint");
    }
    done = row.requested;
  }
  tx.commit();
  return done;
}

// --- scheduling ------------------------------------------------------------------

std::vector<runnable> runnable_campaigns(store::store& db, std::int64_t now_ms) {
  // provider 'eval' rows are `kopt eval` records, not campaigns to run.
  std::vector<runnable> out;
  for (const auto& r : store::runnable_campaign_rows(db, now_ms))
    out.push_back({r.id, r.team, r.priority, r.created_at, 0});
  return out;
}

std::optional<store::row_id> pick_next(const std::vector<runnable>& cands,
                                       const std::set<store::row_id>& active,
                                       const std::map<std::string, double>& team_gpu_s) {
  const runnable* best = nullptr;
  auto usage = [&](const std::string& t) {
    auto it = team_gpu_s.find(t);
    return it == team_gpu_s.end() ? 0.0 : it->second;
  };
  auto better = [&](const runnable& a, const runnable& b) {
    const double ua = usage(a.team), ub = usage(b.team);
    if (ua != ub) return ua < ub;
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.last_step != b.last_step) return a.last_step < b.last_step;
    if (a.created_at != b.created_at) return a.created_at < b.created_at;
    return a.id < b.id;
  };
  for (const auto& c : cands) {
    if (active.count(c.id)) continue;
    if (!best || better(c, *best)) best = &c;
  }
  if (!best) return std::nullopt;
  return best->id;
}

void record_step_success(store::store& db, store::row_id id) {
  store::clear_step_failures(db, id);
}

bool record_step_failure(store::store& db, store::row_id id, const std::string& reason,
                         int max_failures, double backoff_initial_s, double backoff_max_s) {
  store::transaction tx(db.db());
  const auto row = store::find_campaign_control(db, id);
  if (!row) throw kopt::not_found_error(fmt::format("no campaign {}", id));
  const std::int64_t failures = row->step_failures + 1;
  const std::string state = row->state;
  const double delay =
      std::min(backoff_max_s,
               backoff_initial_s *
                   std::pow(2.0, static_cast<double>(std::min<std::int64_t>(failures - 1, 30))));
  const std::int64_t not_before = store::now_ms() + static_cast<std::int64_t>(delay * 1000);
  store::set_step_failures(db, id, failures, not_before, reason);
  const bool give_up = failures >= max_failures && !terminal(state);
  add_event(
      db, id, "step_failed",
      fmt::format("step failed ({} in a row){}: {}", failures,
                  give_up ? "; campaign paused" : fmt::format("; next try in {:.1f} s", delay),
                  reason),
      {{"failures", failures}, {"backoff_s", delay}, {"reason", reason}, {"paused", give_up}},
      "error");
  if (give_up)
    db.set_campaign_state(id, store::campaign_state::paused,
                          fmt::format("daemon: {} steps failed in a row: {}", failures, reason));
  tx.commit();
  return give_up;
}

}  // namespace kopt::daemon
