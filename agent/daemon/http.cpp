#include "daemon/http.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "common/error.hpp"
#include "daemon/daemon.hpp"

namespace kopt::daemon {

using json = nlohmann::json;

namespace {

json opt(const store::statement& st, int col, bool real) {
  if (st.is_null(col)) return nullptr;
  return real ? json(st.get_double(col)) : json(st.get_int(col));
}

json time_or_null(const store::statement& st, int col) {
  return st.is_null(col) ? json(nullptr) : json(store::format_time(st.get_int(col)));
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

json campaigns_json(store::store& reader, std::optional<store::row_id> only) {
  std::string sql =
      "SELECT c.id, o.name, c.state, c.provider, c.model, c.team, c.priority, c.spent_iterations, "
      "c.budget_iterations, c.spent_tokens, c.budget_tokens, c.spent_cost_usd, c.budget_cost_usd, "
      "c.spent_wall_time_s, c.budget_wall_time_s, c.best_candidate_id, c.best_score, c.created_at, "
      "c.updated_at, "
      "c.started_at, c.finished_at, c.stop_reason, c.requested_action, c.step_failures, "
      "c.last_error, c.not_before, "
      "json_extract(c.settings_json, '$.target_sol_fraction') "
      "FROM campaigns c JOIN operators o ON o.id = c.operator_id WHERE c.provider <> 'eval'";
  if (only) sql += " AND c.id = ?";
  sql += " ORDER BY c.id DESC";
  auto st = reader.db().prepare(sql);
  if (only) st.bind(1, *only);
  json out = json::array();
  while (st.step()) {
    json c = {{"id", st.get_int(0)},
              {"operator", st.get_text(1)},
              {"state", st.get_text(2)},
              {"provider", st.get_text(3)},
              {"model", st.get_text(4)},
              {"team", st.get_text(5)},
              {"priority", st.get_int(6)},
              {"spent",
               {{"iterations", st.get_int(7)},
                {"tokens", st.get_int(9)},
                {"cost_usd", st.get_double(11)},
                {"wall_time_s", st.get_double(13)}}},
              {"budget",
               {{"iterations", opt(st, 8, false)},
                {"tokens", opt(st, 10, false)},
                {"cost_usd", opt(st, 12, true)},
                {"wall_time_s", opt(st, 14, true)}}},
              {"best_candidate_id", opt(st, 15, false)},
              {"best_sol_fraction", opt(st, 16, true)},
              {"target_sol_fraction", opt(st, 26, true)},
              {"created_at", time_or_null(st, 17)},
              {"updated_at", time_or_null(st, 18)},
              {"started_at", time_or_null(st, 19)},
              {"finished_at", time_or_null(st, 20)},
              {"stop_reason", st.is_null(21) ? json(nullptr) : json(st.get_text(21))},
              {"requested_action", st.is_null(22) ? json(nullptr) : json(st.get_text(22))},
              {"step_failures", st.get_int(23)},
              {"last_error", st.is_null(24) ? json(nullptr) : json(st.get_text(24))},
              {"retry_at", time_or_null(st, 25)}};
    // Progress: the share of the most binding budget spent (null without a
    // budget), so the dashboard can draw a bar.
    double p = -1;
    if (!st.is_null(8) && st.get_int(8) > 0)
      p = std::max(p, static_cast<double>(st.get_int(7)) / static_cast<double>(st.get_int(8)));
    if (!st.is_null(14) && st.get_double(14) > 0)
      p = std::max(p, st.get_double(13) / st.get_double(14));
    if (!st.is_null(10) && st.get_int(10) > 0)
      p = std::max(p, static_cast<double>(st.get_int(9)) / static_cast<double>(st.get_int(10)));
    if (!st.is_null(12) && st.get_double(12) > 0)
      p = std::max(p, st.get_double(11) / st.get_double(12));
    const std::string state = c["state"];
    if (state == "done" || state == "failed" || state == "cancelled") p = 1;
    c["progress"] = p < 0 ? json(nullptr) : json(std::min(1.0, p));
    out.push_back(std::move(c));
  }
  return out;
}

std::string metrics_text(store::store& reader, const json& status) {
  std::ostringstream o;
  auto& db = reader.db();
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
    auto st = db.prepare("SELECT count(*) FROM campaigns WHERE state = ? AND provider <> 'eval'");
    st.bind_all(std::string(s));
    st.step();
    o << "kopt_campaigns{state=\"" << s << "\"} " << st.get_int(0) << '\n';
  }
  family(o, "kopt_evaluations_total", "counter",
         "Evaluation rows (candidate x workload x stage) by status.");
  {
    std::map<std::string, std::int64_t> by;
    for (const auto& s : store::eval_status_names()) by[std::string(s)] = 0;
    auto st = db.prepare("SELECT status, count(*) FROM evaluations GROUP BY status");
    while (st.step()) by[st.get_text(0)] = st.get_int(1);
    for (const auto& [k, v] : by)
      o << "kopt_evaluations_total{status=\"" << label(k) << "\"} " << v << '\n';
  }
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
  {
    auto st = db.prepare("SELECT status, count(*) FROM llm_calls GROUP BY status");
    bool any = false;
    while (st.step()) {
      any = true;
      o << "kopt_llm_calls_total{status=\"" << label(st.get_text(0)) << "\"} " << st.get_int(1)
        << '\n';
    }
    if (!any) o << "kopt_llm_calls_total{status=\"ok\"} 0\n";
  }
  {
    auto st = db.prepare(
        "SELECT coalesce(sum(prompt_tokens),0), coalesce(sum(completion_tokens),0), "
        "coalesce(sum(cached_tokens),0), "
        "coalesce(sum(reasoning_tokens),0), coalesce(sum(cost_usd),0), coalesce(sum(attempts - "
        "1),0) FROM llm_calls");
    st.step();
    family(o, "kopt_llm_tokens_total", "counter", "LLM tokens by kind.");
    o << "kopt_llm_tokens_total{kind=\"prompt\"} " << st.get_int(0) << '\n';
    o << "kopt_llm_tokens_total{kind=\"completion\"} " << st.get_int(1) << '\n';
    o << "kopt_llm_tokens_total{kind=\"cached\"} " << st.get_int(2) << '\n';
    o << "kopt_llm_tokens_total{kind=\"reasoning\"} " << st.get_int(3) << '\n';
    family(o, "kopt_llm_cost_usd_total", "counter", "LLM cost in US dollars.");
    o << "kopt_llm_cost_usd_total " << st.get_double(4) << '\n';
    family(o, "kopt_llm_retries_total", "counter", "LLM attempts beyond the first (retries).");
    o << "kopt_llm_retries_total " << st.get_int(5) << '\n';
  }
  family(o, "kopt_submissions_total", "counter", "Spool files taken, by status.");
  {
    std::map<std::string, std::int64_t> by{{"accepted", 0}, {"rejected", 0}};
    auto st = db.prepare("SELECT status, count(*) FROM submissions GROUP BY status");
    while (st.step()) by[st.get_text(0)] = st.get_int(1);
    for (const auto& [k, v] : by)
      o << "kopt_submissions_total{origin=\"spool\",status=\"" << k << "\"} " << v << '\n';
  }
  family(o, "kopt_step_failures_total", "counter",
         "Failed campaign steps recorded (events step_failed).");
  {
    auto st = db.prepare("SELECT count(*) FROM events WHERE kind = 'step_failed'");
    st.step();
    o << "kopt_step_failures_total " << st.get_int(0) << '\n';
  }
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
td.err{white-space:normal;color:#a00;max-width:30em}
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
   const note=c.last_error||c.stop_reason||c.requested_action||'';
   return '<tr><td>'+c.id+'</td><td>'+esc(c.operator)+'</td><td>'+esc(c.team)+'</td><td>'+c.priority+
    '</td><td class="'+c.state+'">'+c.state+'</td><td>'+p+'</td><td>'+c.spent.iterations+
    (c.budget.iterations!=null?' / '+c.budget.iterations:'')+'</td><td>'+
    (c.best_sol_fraction==null?'-':(100*c.best_sol_fraction).toFixed(1))+'</td><td>'+c.spent.tokens+
    '</td><td>'+c.spent.cost_usd.toFixed(2)+'</td><td class="err">'+esc(note)+'</td></tr>';}).join('');
 }catch(e){document.getElementById('st').textContent='cannot reach the daemon: '+e;}
}
refresh();setInterval(refresh,5000);
</script></body></html>
)HTML";
}

http_api::http_api(const service& svc) : svc_(svc), server_(std::make_unique<httplib::Server>()) {}

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
  s.Get("/metrics", guarded([this, reader](const httplib::Request&, httplib::Response& res) {
          auto db = reader();
          res.set_content(metrics_text(db, svc_.status()),
                          "text/plain; version=0.0.4; charset=utf-8");
        }));
  s.Get("/api/daemon", guarded([this, send_json](const httplib::Request&, httplib::Response& res) {
          send_json(res, svc_.status());
        }));
  s.Get("/api/campaigns",
        guarded([reader, send_json](const httplib::Request&, httplib::Response& res) {
          auto db = reader();
          send_json(res, campaigns_json(db));
        }));
  s.Get(R"(/api/campaigns/(\d+))",
        guarded([reader, send_json](const httplib::Request& req, httplib::Response& res) {
          const store::row_id id = std::stoll(req.matches[1]);
          auto db = reader();
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
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return port_;
}

void http_api::stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

}  // namespace kopt::daemon
