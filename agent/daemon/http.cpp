#include "daemon/http.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>

#include "common/error.hpp"
#include "common/sched.hpp"
#include "daemon/daemon.hpp"
#include "store/scheduling.hpp"

namespace kopt::daemon {

using json = nlohmann::json;

namespace {

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json time_or_null(const std::optional<std::int64_t>& ms) {
  return ms ? json(store::format_time(*ms)) : json(nullptr);
}

// Prometheus label values: backslash, quote and newline escaped.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void family(std::ostringstream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

}  // namespace

page parse_page(const std::string& limit, const std::string& offset) {
  auto number = [](const std::string& v, const char* name) -> std::int64_t {
    std::size_t used = 0;
    std::int64_t n = 0;
    try {
      n = std::stoll(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != v.size() || n < 0)
      throw kopt::config_error(fmt::format("?{}= must be a number >= 0, not '{}'", name, v));
    return n;
  };
  page p;
  if (!limit.empty()) p.limit = std::clamp<std::int64_t>(number(limit, "limit"), 1, 1000);
  if (!offset.empty()) p.offset = number(offset, "offset");
  return p;
}

json campaigns_json(store::store& reader, std::optional<store::row_id> only,
                    std::optional<std::int64_t> limit, std::int64_t offset) {
  json out = json::array();
  for (const auto& r : store::campaign_overviews(reader, only, limit, offset)) {
    json c = {{"id", r.id},
              {"operator", r.operator_name},
              {"state", r.state},
              {"provider", r.provider},
              {"model", r.model},
              {"team", r.team},
              {"priority", r.priority},
              {"spent",
               {{"iterations", r.spent_iterations},
                {"tokens", r.spent_tokens},
                {"cost_usd", r.spent_cost_usd},
                {"wall_time_s", r.spent_wall_time_s}}},
              {"budget",
               {{"iterations", opt(r.budget_iterations)},
                {"tokens", opt(r.budget_tokens)},
                {"cost_usd", opt(r.budget_cost_usd)},
                {"wall_time_s", opt(r.budget_wall_time_s)}}},
              {"best_candidate_id", opt(r.best_candidate_id)},
              {"best_sol_fraction", opt(r.best_score)},
              {"target_sol_fraction", opt(r.target_sol_fraction)},
              {"created_at", store::format_time(r.created_at)},
              {"updated_at", store::format_time(r.updated_at)},
              {"started_at", time_or_null(r.started_at)},
              {"finished_at", time_or_null(r.finished_at)},
              {"stop_reason", opt(r.stop_reason)},
              {"requested_action", opt(r.requested_action)},
              {"step_failures", r.step_failures},
              {"last_error", opt(r.last_error)},
              {"retry_at", time_or_null(r.not_before)}};
    // Progress: the share of the most binding budget spent (null without a
    // budget), so the dashboard can draw a bar.
    double p = -1;
    if (r.budget_iterations && *r.budget_iterations > 0)
      p = std::max(
          p, static_cast<double>(r.spent_iterations) / static_cast<double>(*r.budget_iterations));
    if (r.budget_wall_time_s && *r.budget_wall_time_s > 0)
      p = std::max(p, r.spent_wall_time_s / *r.budget_wall_time_s);
    if (r.budget_tokens && *r.budget_tokens > 0)
      p = std::max(p, static_cast<double>(r.spent_tokens) / static_cast<double>(*r.budget_tokens));
    if (r.budget_cost_usd && *r.budget_cost_usd > 0)
      p = std::max(p, r.spent_cost_usd / *r.budget_cost_usd);
    const std::string state = c["state"];
    if (state == "done" || state == "failed" || state == "cancelled") p = 1;
    c["progress"] = p < 0 ? json(nullptr) : json(std::min(1.0, p));
    out.push_back(std::move(c));
  }
  return out;
}

std::string metrics_text(store::store& reader, const json& status) {
  std::ostringstream o;
  const store::store_totals t = store::totals(reader);
  family(o, "kopt_daemon_ready", "gauge",
         "1 when the daemon is ready (store migrated, a worker handshake done).");
  o << "kopt_daemon_ready " << (status.value("ready", false) ? 1 : 0) << '\n';
  family(o, "kopt_daemon_active_steps", "gauge", "Campaign steps running now.");
  o << "kopt_daemon_active_steps " << status.value("active_campaigns", json::array()).size()
    << '\n';
  family(o, "kopt_daemon_max_active_campaigns", "gauge",
         "The limit on steps at once (limits.max_active_campaigns).");
  o << "kopt_daemon_max_active_campaigns "
    << status.value("limits", json::object()).value("max_active_campaigns", 0) << '\n';
  family(o, "kopt_daemon_steps_total", "counter",
         "Campaign steps ended since the daemon started, by outcome.");
  if (const json steps = status.value("steps", json::object()); steps.is_object())
    for (const auto& [k, v] : steps.items())
      if (v.is_number())
        o << "kopt_daemon_steps_total{outcome=\"" << label(k) << "\"} " << v.get<std::int64_t>()
          << '\n';
  family(o, "kopt_daemon_reloads_total", "counter", "Configuration reloads (SIGHUP) applied.");
  o << "kopt_daemon_reloads_total " << status.value("reloads", 0) << '\n';

  family(o, "kopt_campaigns", "gauge", "Campaigns by state.");
  for (const auto& s : store::campaign_state_names()) {
    const auto it = t.campaigns_by_state.find(std::string(s));
    o << "kopt_campaigns{state=\"" << s << "\"} "
      << (it == t.campaigns_by_state.end() ? 0 : it->second) << '\n';
  }
  family(o, "kopt_evaluations_total", "counter",
         "Evaluation rows (candidate x workload x stage) by status.");
  for (const auto& [k, v] : t.evaluations_by_status)
    o << "kopt_evaluations_total{status=\"" << label(k) << "\"} " << v << '\n';
  family(o, "kopt_gpu_busy_seconds_total", "counter",
         "Seconds each GPU was leased to an evaluation (this daemon run).");
  const json gpus = status.value("gpus", json::array());
  for (const auto& g : gpus)
    o << "kopt_gpu_busy_seconds_total{gpu=\"" << g.value("gpu", 0) << "\"} "
      << g.value("busy_s", 0.0) << '\n';
  family(o, "kopt_gpu_evaluations_total", "counter",
         "Evaluation requests served by each GPU (this daemon run).");
  for (const auto& g : gpus)
    o << "kopt_gpu_evaluations_total{gpu=\"" << g.value("gpu", 0) << "\"} "
      << g.value("evaluations", 0) << '\n';
  family(o, "kopt_gpu_busy", "gauge", "1 while the GPU is leased.");
  for (const auto& g : gpus)
    o << "kopt_gpu_busy{gpu=\"" << g.value("gpu", 0) << "\"} "
      << (g.value("state", "") == "busy" ? 1 : 0) << '\n';
  family(o, "kopt_worker_starts_total", "counter",
         "Worker start attempts per GPU (this daemon run).");
  for (const auto& g : gpus)
    o << "kopt_worker_starts_total{gpu=\"" << g.value("gpu", 0) << "\"} "
      << g.value("worker_starts", 0) << '\n';
  family(o, "kopt_worker_failures_total", "counter",
         "Worker start failures and crash loops per GPU (this daemon run).");
  for (const auto& g : gpus)
    o << "kopt_worker_failures_total{gpu=\"" << g.value("gpu", 0) << "\"} "
      << g.value("worker_failures", 0) << '\n';
  family(o, "kopt_worker_restarts_total", "counter",
         "Worker restarts inside requests (a candidate killed it).");
  for (const auto& g : gpus)
    o << "kopt_worker_restarts_total{gpu=\"" << g.value("gpu", 0) << "\"} "
      << g.value("worker_restarts", 0) << '\n';
  family(o, "kopt_team_gpu_seconds_total", "counter",
         "GPU seconds per team (this daemon run; fair sharing uses it).");
  if (const json teams = status.value("team_gpu_seconds", json::object()); teams.is_object())
    for (const auto& [t, v] : teams.items())
      if (v.is_number())
        o << "kopt_team_gpu_seconds_total{team=\"" << label(t) << "\"} " << v.get<double>() << '\n';

  family(o, "kopt_llm_calls_total", "counter", "LLM calls by status.");
  for (const auto& [k, v] : t.llm_calls_by_status)
    o << "kopt_llm_calls_total{status=\"" << label(k) << "\"} " << v << '\n';
  if (t.llm_calls_by_status.empty()) o << "kopt_llm_calls_total{status=\"ok\"} 0\n";
  family(o, "kopt_llm_tokens_total", "counter", "LLM tokens by kind.");
  o << "kopt_llm_tokens_total{kind=\"prompt\"} " << t.prompt_tokens << '\n';
  o << "kopt_llm_tokens_total{kind=\"completion\"} " << t.completion_tokens << '\n';
  o << "kopt_llm_tokens_total{kind=\"cached\"} " << t.cached_tokens << '\n';
  o << "kopt_llm_tokens_total{kind=\"reasoning\"} " << t.reasoning_tokens << '\n';
  family(o, "kopt_llm_cost_usd_total", "counter", "LLM cost in US dollars.");
  o << "kopt_llm_cost_usd_total " << t.llm_cost_usd << '\n';
  family(o, "kopt_llm_retries_total", "counter", "LLM attempts beyond the first (retries).");
  o << "kopt_llm_retries_total " << t.llm_retries << '\n';
  family(o, "kopt_submissions_total", "counter", "Spool files taken, by status.");
  for (const auto& [k, v] : t.submissions_by_status)
    o << "kopt_submissions_total{origin=\"spool\",status=\"" << k << "\"} " << v << '\n';
  family(o, "kopt_step_failures_total", "counter",
         "Failed campaign steps recorded (events step_failed).");
  o << "kopt_step_failures_total " << t.step_failed_events << '\n';
  family(o, "kopt_candidates_total", "counter", "Candidate rows in the store.");
  o << "kopt_candidates_total " << t.candidates << '\n';
  const json store_j = status.value("store", json::object());
  family(o, "kopt_store_wal_bytes", "gauge",
         "Size of the store's WAL file at the last maintenance tick.");
  o << "kopt_store_wal_bytes " << store_j.value("wal_bytes", std::int64_t{0}) << '\n';
  family(o, "kopt_store_wal_max_bytes", "gauge",
         "Largest WAL size since the daemon started (its ticks and every commit's own "
         "count of WAL frames).");
  o << "kopt_store_wal_max_bytes " << store_j.value("wal_max_bytes", std::int64_t{0}) << '\n';
  family(o, "kopt_store_wal_checkpoints_total", "counter",
         "Periodic WAL checkpoints by result (truncated, passive, busy, error).");
  if (const json c = store_j.value("checkpoints", json::object()); c.is_object())
    for (const auto& [k, v] : c.items())
      if (v.is_number())
        o << "kopt_store_wal_checkpoints_total{result=\"" << label(k) << "\"} "
          << v.get<std::int64_t>() << '\n';
  family(o, "kopt_store_wal_size_checkpoints_total", "counter",
         "WAL checkpoints run by a commit that left the WAL past its threshold (truncated, "
         "busy, locked, skipped: another was running) or past the PASSIVE page count "
         "(passive).");
  if (const json c = store_j.value("size_checkpoints", json::object()); c.is_object())
    for (const auto& [k, v] : c.items())
      if (v.is_number())
        o << "kopt_store_wal_size_checkpoints_total{result=\"" << label(k) << "\"} "
          << v.get<std::int64_t>() << '\n';
  family(o, "kopt_store_gc_campaigns_total", "counter",
         "Finished campaigns collected by the retention setting (this daemon run).");
  o << "kopt_store_gc_campaigns_total " << store_j.value("gc_campaigns", std::int64_t{0}) << '\n';
  return o.str();
}

const char* dashboard_html() {
  return R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kopt daemon</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em} table{border-collapse:collapse;width:100%}
th,td{padding:4px 8px;border-bottom:1px solid #ddd;text-align:left;white-space:nowrap}
td.note{white-space:normal;color:#555;max-width:30em}td.note.err{color:#a00}
.bar{background:#eee;width:120px;height:10px;display:inline-block}
.bar i{background:#3a7;height:10px;display:block}
.running{color:#06c}.done{color:#080}.failed,.cancelled{color:#a00}.paused{color:#a60}
#st{margin-bottom:1em}
</style></head><body>
<h1>kopt daemon</h1><div id="st">loading...</div>
<table><thead><tr><th>id</th><th>operator</th><th>team</th><th>prio</th><th>state</th><th>progress</th>
<th>iterations</th><th>best % SOL</th><th>tokens</th><th>cost $</th><th>note</th></tr></thead>
<tbody id="rows"></tbody></table>
<p><a href="/metrics">metrics</a> · <a href="/api/campaigns">api/campaigns</a> · <a href="/api/daemon">api/daemon</a> · <a href="/health">health</a></p>
<script>
function esc(s){return String(s==null?'':s).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));}
async function refresh(){
 try{
  const d=await (await fetch('/api/daemon')).json();
  const g=(d.gpus||[]).map(x=>'GPU '+x.gpu+': '+x.state+(x.campaign?' ('+esc(x.campaign)+')':'')).join(' · ');
  document.getElementById('st').innerHTML='<b>'+esc(d.state)+'</b> '+esc(d.reason||'')+' — '+g+
   ' — active steps: '+(d.active_campaigns||[]).length+' / '+d.limits.max_active_campaigns;
  const cs=await (await fetch('/api/campaigns')).json();
  document.getElementById('rows').innerHTML=cs.map(c=>{
   const p=c.progress==null?'':'<span class="bar"><i style="width:'+Math.round(100*c.progress)+'%"></i></span>';
   // Red only for errors; a normal stop reason (budget, target reached,
   // search space exhausted) is plain text.
   const note=c.last_error||c.stop_reason||c.requested_action||'';
   const bad=!!c.last_error||c.state==='failed';
   return '<tr><td>'+c.id+'</td><td>'+esc(c.operator)+'</td><td>'+esc(c.team)+'</td><td>'+c.priority+
    '</td><td class="'+c.state+'">'+c.state+'</td><td>'+p+'</td><td>'+c.spent.iterations+
    (c.budget.iterations!=null?' / '+c.budget.iterations:'')+'</td><td>'+
    (c.best_sol_fraction==null?'-':(100*c.best_sol_fraction).toFixed(1))+'</td><td>'+c.spent.tokens+
    '</td><td>'+c.spent.cost_usd.toFixed(2)+'</td><td class="note'+(bad?' err':'')+'">'+esc(note)+'</td></tr>';}).join('');
 }catch(e){document.getElementById('st').textContent='cannot reach the daemon: '+e;}
}
refresh();setInterval(refresh,5000);
</script></body></html>
)HTML";
}

namespace {

// httplib's thread pool, with each of its threads asking the kernel for a
// short time slice before its first request (common/sched.hpp says why):
// a scrape then waits for at most about one such slice, not for the step
// threads' default slices, when every core is busy with campaign steps.
class short_slice_queue : public httplib::TaskQueue {
 public:
  short_slice_queue(std::size_t threads, std::chrono::microseconds slice)
      : pool_(threads), slice_(slice) {}
  void enqueue(std::function<void()> fn) override {
    pool_.enqueue([slice = slice_, fn = std::move(fn)] {
      apply_slice_once(slice);
      fn();
    });
  }
  void shutdown() override { pool_.shutdown(); }

  // Once per thread; the first outcome of the process is logged, because
  // every thread of one host gets the same answer.
  static void apply_slice_once(std::chrono::microseconds slice) {
    thread_local bool done = false;
    if (done) return;
    done = true;
    const slice_request r = request_thread_slice(slice);
    static std::once_flag logged;
    std::call_once(logged, [&] {
      if (r.outcome == slice_request::result::applied)
        spdlog::info("daemon: HTTP threads run with a {} us scheduling slice", slice.count());
      else
        spdlog::info("daemon: HTTP threads keep the default scheduling slice: {}", r.detail);
    });
  }

 private:
  httplib::ThreadPool pool_;
  std::chrono::microseconds slice_;
};

}  // namespace

http_api::http_api(const service& svc) : svc_(svc), server_(std::make_unique<httplib::Server>()) {
  const auto slice = std::chrono::microseconds(svc_.config().http.slice_us);
  if (slice.count() > 0)
    server_->new_task_queue = [slice] {
      return new short_slice_queue(CPPHTTPLIB_THREAD_POOL_COUNT, slice);
    };
}

http_api::~http_api() {
  stop();
}

int http_api::start(const std::string& address, int port) {
  auto& s = *server_;
  const auto db_path = svc_.config().db_path;
  auto reader = [db_path] {
    return store::store::open(db_path, {.read_only = true,
                                        .busy_timeout = std::chrono::milliseconds(5000),
                                        .create_directories = false});
  };
  auto send_json = [](httplib::Response& res, const json& j, int code = 200) {
    res.status = code;
    res.set_content(j.dump(2, ' ', false, json::error_handler_t::replace) + "\n",
                    "application/json");
  };
  auto guarded = [send_json](auto fn) {
    return [fn, send_json](const httplib::Request& req, httplib::Response& res) {
      try {
        fn(req, res);
      } catch (const kopt::not_found_error& e) {
        send_json(res, {{"error", e.what()}}, 404);
      } catch (const std::exception& e) {
        send_json(res, {{"error", e.what()}}, 500);
      }
    };
  };
  s.Get("/health", guarded([this, send_json](const httplib::Request&, httplib::Response& res) {
          const json st = svc_.status();
          json h = {{"state", st.value("state", "starting")},
                    {"ready", st.value("ready", false)},
                    {"reason", st.value("reason", "")},
                    {"pid", st.value("pid", 0)},
                    {"waiting_for_agent", st.value("waiting_for_agent", json::array())}};
          send_json(res, h, h["ready"].get<bool>() ? 200 : 503);
        }));
  s.Get("/metrics",
        guarded([this, reader, db_path](const httplib::Request&, httplib::Response& res) {
          // One read-only connection per HTTP thread, kept between scrapes:
          // opening one (schema read, compatibility check) was most of a
          // scrape's time under load (docs/benchmarks.md). An idle
          // connection holds no snapshot, so it never pins the WAL;
          // metrics_text's reads are one statement each.
          thread_local std::optional<store::store> kept;
          thread_local std::filesystem::path kept_path;
          if (!kept || kept_path != db_path) {
            kept.reset();
            kept.emplace(reader());
            kept_path = db_path;
          }
          std::string text;
          try {
            text = metrics_text(*kept, svc_.status());
          } catch (...) {
            kept.reset();  // a broken connection is not kept for the next scrape
            throw;
          }
          res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
        }));
  s.Get("/api/daemon", guarded([this, send_json](const httplib::Request&, httplib::Response& res) {
          send_json(res, svc_.status());
        }));
  s.Get("/api/campaigns",
        guarded([reader, send_json](const httplib::Request& req, httplib::Response& res) {
          page p;
          try {
            p = parse_page(req.get_param_value("limit"), req.get_param_value("offset"));
          } catch (const kopt::config_error& e) {
            send_json(res, {{"error", e.what()}}, 400);
            return;
          }
          json body;
          std::int64_t total = 0;
          {
            auto db = reader();
            store::transaction snapshot(db.db(), store::transaction::kind::deferred);
            body = campaigns_json(db, std::nullopt, p.limit, p.offset);
            total = store::count_campaign_overviews(db);
            snapshot.commit();
          }  // the read snapshot ends before the response is written
          res.set_header("X-Total-Count", std::to_string(total));
          send_json(res, body);
        }));
  s.Get(R"(/api/campaigns/(\d+))",
        guarded([reader, send_json](const httplib::Request& req, httplib::Response& res) {
          const store::row_id id = std::stoll(req.matches[1]);
          auto db = reader();
          store::transaction snapshot(db.db(), store::transaction::kind::deferred);
          json c = campaigns_json(db, id);
          if (c.empty()) throw kopt::not_found_error(fmt::format("no campaign {}", id));
          json one = c.at(0);
          json ev = json::array();
          for (const auto& e : db.events_of(id, 50))
            ev.push_back({{"id", e.id},
                          {"kind", e.kind},
                          {"level", e.level},
                          {"message", e.message},
                          {"at", store::format_time(e.created_at)}});
          one["events"] = ev;
          snapshot.commit();
          send_json(res, one);
        }));
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(dashboard_html(), "text/html; charset=utf-8");
  });
  s.set_error_handler([send_json](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404 && res.body.empty())
      send_json(res, {{"error", "no such endpoint: " + req.path}}, 404);
  });
  if (port == 0) {
    port_ = s.bind_to_any_port(address);
    if (port_ <= 0)
      throw kopt::error(fmt::format("daemon: cannot bind HTTP on {} (any port)", address));
  } else {
    if (!s.bind_to_port(address, port))
      throw kopt::error(
          fmt::format("daemon: cannot bind HTTP on {}:{} (in use? set http.port, or 0 for any)",
                      address, port));
    port_ = port;
  }
  // Read here, not on the thread: a reload replaces the configuration.
  const auto slice = std::chrono::microseconds(svc_.config().http.slice_us);
  thread_ = std::thread([this, slice] {
    // The accepting thread wakes first on every request: it needs the short
    // slice as much as the handlers do.
    if (slice.count() > 0) short_slice_queue::apply_slice_once(slice);
    server_->listen_after_bind();
  });
  return port_;
}

void http_api::stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

}  // namespace kopt::daemon
