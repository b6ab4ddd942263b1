#include "daemon/daemon.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>

#include "campaign/session.hpp"
#include "common/error.hpp"
#include "daemon/http.hpp"
#include "daemon/logging.hpp"
#include "daemon/notify.hpp"
#include "daemon/pool.hpp"
#include "daemon/queue.hpp"
#include "store/agent_submissions.hpp"
#include "store/retention.hpp"
#include "store/scheduling.hpp"

namespace kopt::daemon {

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

namespace {

// Signals reach the scheduling loop through a self-pipe: the handler only
// writes one byte (async-signal-safe); the loop reads and acts. Blocking the
// signals instead would leak the mask into workers spawned with posix_spawn.
int g_pipe[2] = {-1, -1};

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const char c = static_cast<char>(sig);
  if (g_pipe[1] >= 0) [[maybe_unused]]
    auto n = write(g_pipe[1], &c, 1);
  errno = saved;
}

// A step thread wakes the scheduling loop at once when it ends, so the next
// campaign starts without waiting for the tick.
void wake_loop() {
  const char c = 0;
  if (g_pipe[1] >= 0) [[maybe_unused]]
    auto n = write(g_pipe[1], &c, 1);
}

void install_signals() {
  if (g_pipe[0] < 0) {
    if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
      throw kopt::error(std::string("daemon: cannot create the signal pipe: ") +
                        std::strerror(errno));
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaction(s, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// A step ends at a checkpoint: an iteration (or the set-up) is complete and
// someone else is waiting, or a pause/cancel request arrived.
struct step_yield : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::optional<std::string> pending_request(store::store& db, store::row_id id) {
  const auto c = store::find_campaign_control(db, id);
  return c ? c->requested_action : std::nullopt;
}

}  // namespace

std::optional<campaign::session_options> session_options_for(const daemon_config& cfg,
                                                             const std::string& provider) {
  campaign::session_options so;
  // autotune and agent campaigns call no LLM: no provider section.
  if (provider != "autotune" && provider != "agent") {
    auto it = cfg.providers.find(provider);
    if (it == cfg.providers.end()) return std::nullopt;
    so.llm_section = it->second;
    so.llm_base_dir = cfg.file.parent_path();
  }
  so.kb_directories = cfg.kb_directories;
  so.prompts_dir = cfg.prompts_dir.string();
  so.peaks_file = peaks_file_for(cfg);
  so.counters = cfg.worker.counters;
  return so;
}

struct service::step {
  store::row_id id = 0;
  std::string team;
  std::int64_t priority = 0;
  std::thread thread;
  std::atomic<bool> done{false};
  std::string outcome;  // finished, yield, interrupted, failed
};

service::service(daemon_config cfg) : cfg_(std::move(cfg)) {}

service::~service() {
  stopping_ = true;
  for (auto& [id, s] : steps_)
    if (s->thread.joinable()) s->thread.join();
  if (http_) http_->stop();
  if (lock_fd_ >= 0) close(lock_fd_);
  if (db_lock_fd_ >= 0) close(db_lock_fd_);
}

limits service::current_limits() const {
  std::lock_guard lk(cfg_mu_);
  return cfg_.lim;
}

namespace {

// An exclusive flock on `path`, with our pid written into it; -1 and why
// (naming the holder's pid) when another process holds it.
int take_lock(const std::filesystem::path& path, const std::string& what) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw kopt::error(
        fmt::format("daemon: cannot open {}: {}", path.string(), std::strerror(errno)));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    [[maybe_unused]] auto n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    throw kopt::error(fmt::format("daemon: another kopt daemon (pid {}) holds {}; {}",
                                  std::string(buf).empty() ? "?" : std::string(buf), path.string(),
                                  what));
  }
  const std::string pid = std::to_string(getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0)
    spdlog::warn("daemon: cannot write the pid into {}", path.string());
  return fd;
}

// The lock file beside the database as it really is (symlinks resolved), so
// that two configs naming one database by different paths meet on one lock.
std::filesystem::path database_lock_path(const std::filesystem::path& db) {
  std::error_code ec;
  auto real = std::filesystem::canonical(db, ec);
  if (ec) {
    auto dir = std::filesystem::canonical(db.parent_path().empty() ? "." : db.parent_path(), ec);
    real = ec ? std::filesystem::absolute(db) : dir / db.filename();
  }
  return real.string() + ".daemon.lock";
}

}  // namespace

void service::lock_state_dir() {
  lock_fd_ = take_lock(cfg_.state_dir / "daemon.lock", "one daemon per state directory");
  // The state directory's lock alone lets two daemons with different
  // state_dir share one database (double "finished" events, lost rows):
  // the database has its own lock.
  std::error_code ec;
  if (!cfg_.db_path.parent_path().empty())
    std::filesystem::create_directories(cfg_.db_path.parent_path(), ec);
  try {
    db_lock_fd_ = take_lock(database_lock_path(cfg_.db_path),
                            "one daemon per database (" + cfg_.db_path.string() + ")");
  } catch (...) {
    close(lock_fd_);
    lock_fd_ = -1;
    throw;
  }
}

json service::status() const {
  std::lock_guard lk(status_mu_);
  return status_;
}

void service::update_status(const std::string& state, const std::string& reason) {
  json active = json::array();
  for (const auto& [id, s] : steps_) active.push_back(id);
  json gpus = json::array();
  if (pool_)
    for (const auto& g : pool_->stats()) gpus.push_back(g.to_json());
  json teams = json::object();
  if (pool_)
    for (const auto& [t, v] : pool_->team_gpu_seconds()) teams[t] = v;
  json limits_j;
  {
    std::lock_guard lk(cfg_mu_);
    limits_j = cfg_.limits_json();
  }
  std::lock_guard lk(status_mu_);
  status_ = {{"state", state},
             {"ready", state == "ready"},
             {"reason", reason},
             {"pid", getpid()},
             {"started_at", store::format_time(started_at_)},
             {"state_dir", cfg_.state_dir.string()},
             {"database", cfg_.db_path.string()},
             {"evaluator", cfg_.evaluator},
             {"notify_backend", notify_backend()},
             {"gpus", gpus},
             {"team_gpu_seconds", teams},
             {"active_campaigns", active},
             {"steps", step_outcomes_},
             {"reloads", reloads_},
             {"spool", {{"accepted", spool_accepted_}, {"rejected", spool_rejected_}}},
             {"limits", limits_j},
             {"store",
              {{"wal_bytes", wal_bytes_},
               {"wal_max_bytes", wal_max_bytes_},
               {"checkpoints", checkpoints_},
               {"size_checkpoints", size_checkpoints_},
               {"size_checkpoint_longest_ms", size_checkpoint_longest_ms_},
               {"gc_campaigns", gc_campaigns_}}},
             {"waiting_for_agent", waiting_}};
}

bool service::wait_signal(int timeout_ms) {
  pollfd p{g_pipe[0], POLLIN, 0};
  const int r = poll(&p, 1, timeout_ms);
  if (r <= 0) return false;
  char buf[64];
  bool any = false;
  for (;;) {
    const ssize_t n = read(g_pipe[0], buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      any = true;
      if (buf[i] == 0) continue;  // a step ended (wake_loop)
      if (buf[i] == SIGHUP)
        reload();
      else {
        if (!stopping_)
          spdlog::info("daemon: signal {} received: stopping at the next checkpoint",
                       static_cast<int>(buf[i]));
        stopping_ = true;
      }
    }
  }
  return any;
}

void service::reload() {
  notify("RELOADING=1\nSTATUS=reloading the configuration");
  try {
    daemon_config n = load_config(cfg_.file);
    std::vector<std::string> ignored;
    if (n.state_dir != cfg_.state_dir) ignored.push_back("state_dir");
    if (n.db_path != cfg_.db_path) ignored.push_back("database");
    if (n.gpus != cfg_.gpus) ignored.push_back("gpus");
    if (n.evaluator != cfg_.evaluator) ignored.push_back("evaluator");
    if (n.http.address != cfg_.http.address || n.http.port != cfg_.http.port ||
        n.http.enabled != cfg_.http.enabled || n.http.slice_us != cfg_.http.slice_us)
      ignored.push_back("http");
    // Every worker setting (also the timeouts and seeds) reaches the pool
    // only at start-up.
    if (n.to_json().at("worker") != cfg_.to_json().at("worker")) ignored.push_back("worker");
    // The spool's directories are created and watched from start-up on
    // (a changed state_dir moves the default spool too).
    if (n.spool_dir != cfg_.spool_dir) ignored.push_back("spool_dir");
    if (!ignored.empty()) {
      // Half a reload is worse than none: a restart-only change means the
      // file no longer describes this daemon, so nothing of it is applied.
      spdlog::error(
          "daemon: reload refused, nothing changed: {} changed in {}, which needs a restart "
          "(restore the old value to reload the rest, or restart the daemon)",
          fmt::join(ignored, ", "), cfg_.file.string());
      notify("READY=1\nSTATUS=reload refused (restart-only settings changed)");
      return;
    }
    configure_logging(n.log.format, n.log.level);
    {
      std::lock_guard lk(cfg_mu_);
      cfg_.lim = n.lim;
      cfg_.providers = n.providers;
      cfg_.api_key_files = n.api_key_files;
      cfg_.log = n.log;
      cfg_.fake = n.fake;
    }
    if (pool_) pool_->set_backoff(n.lim.backoff_initial_s, n.lim.backoff_max_s);
    {
      std::lock_guard lk(status_mu_);
      ++reloads_;
    }
    spdlog::info("daemon: configuration reloaded from {} (max_active_campaigns {})",
                 cfg_.file.string(), n.active_limit());
  } catch (const kopt::error& e) {
    spdlog::error("daemon: reload refused, the running configuration is kept: {}", e.what());
  }
  notify("READY=1\nSTATUS=configuration reloaded");
}

void service::start_step(store::row_id id, const std::string& team, std::int64_t priority) {
  auto s = std::make_unique<step>();
  s->id = id;
  s->team = team;
  s->priority = priority;
  step* raw = s.get();
  last_step_[id] = store::now_ms();
  steps_[id] = std::move(s);
  raw->thread = std::thread([this, raw] { run_step(*raw); });
}

void service::reap_steps() {
  for (auto it = steps_.begin(); it != steps_.end();) {
    if (!it->second->done) {
      ++it;
      continue;
    }
    it->second->thread.join();
    {
      std::lock_guard lk(status_mu_);
      ++step_outcomes_[it->second->outcome];
    }
    it = steps_.erase(it);
  }
}

void service::run_step(step& s) {
  const auto started = clock_type::now();
  const limits lim = current_limits();
  std::string outcome = "failed";
  try {
    store::store db =
        store::store::open(cfg_.db_path, {.busy_timeout = std::chrono::milliseconds(60000)});
    // Claim the campaign: queued -> running here, under the write lock, so
    // that a `kopt pause` after this point sees it running and leaves a
    // request instead of racing the loop's own state writes.
    {
      store::transaction tx(db.db());
      const auto c = store::find_campaign_control(db, s.id);
      if (!c || (c->state != "queued" && c->state != "running") || c->requested_action) {
        s.outcome = "skipped";
        s.done = true;
        return;
      }
      if (c->state == "queued") db.set_campaign_state(s.id, store::campaign_state::running);
      tx.commit();
    }
    const auto camp = db.find_campaign(s.id);
    const auto opr = db.find_operator(camp->operator_id);
    auto loaded = config::load_operator_text(
        opr->config.dump(), fmt::format("operator {} (campaign {})", opr->id, s.id),
        cfg_.state_dir);
    if (!loaded.ok()) {
      std::string why;
      for (const auto& d : loaded.diagnostics) why += d.to_string() + "; ";
      store::transaction tx(db.db());
      db.set_campaign_state(s.id, store::campaign_state::failed,
                            "daemon: the stored operator does not validate: " + why);
      tx.commit();
      s.outcome = "failed";
      s.done = true;
      return;
    }
    const config::operator_config& op = *loaded.op;

    // An LLM provider needs its section of the daemon config.
    std::optional<campaign::session_options> so;
    {
      std::lock_guard lk(cfg_mu_);
      so = session_options_for(cfg_, camp->provider);
    }
    if (!so) {
      const std::string why = fmt::format(
          "daemon: campaign provider '{}' has no section under \"providers\" in {}; add it, "
          "reload (SIGHUP) and "
          "`kopt resume {}`",
          camp->provider, cfg_.file.string(), s.id);
      store::transaction tx(db.db());
      db.set_campaign_state(s.id, store::campaign_state::paused, why);
      tx.commit();
      spdlog::error("campaign {}: {}", s.id, why);
      s.outcome = "failed";
      s.done = true;
      return;
    }

    // The evaluator: GPUs leased from the pool. Everything else comes from
    // the one campaign session, as in `kopt run`.
    const gpu_pool::who who{fmt::format("{} ({})", s.id, op.name), s.team, s.priority};
    const campaign::evaluator_factory leased =
        [&](const config::operator_config& cfg,
            const campaign::evaluator_spec& spec) -> std::unique_ptr<campaign::evaluator> {
      if (cfg_.evaluator == "fake") {
        fake_settings fs;
        {
          std::lock_guard lk(cfg_mu_);
          fs = cfg_.fake;
        }
        return std::make_unique<pool_fake_evaluator>(*pool_, who, fs, stopping_);
      }
      return std::make_unique<pool_worker_evaluator>(*pool_, who, cfg, cfg_.worker, spec.counters);
    };
    campaign::session session(db, s.id, op, std::move(*so), leased);

    campaign::loop_hooks hooks;
    int iterations = 0;  // checkpoints reached in this step
    hooks.at = [&](std::string_view point, std::int64_t) {
      if (stopping_) throw step_interrupted("the daemon is stopping");
      if (pending_request(db, s.id)) throw step_yield("a pause or cancel request");
      if (point == "after_iteration" || point == "after_setup") {
        ++iterations;
        const double el = std::chrono::duration<double>(clock_type::now() - started).count();
        const limits now = current_limits();
        if (others_waiting_ && el >= now.min_step_s && iterations >= now.min_step_iterations)
          throw step_yield("others are waiting");
      }
    };
    hooks.on_progress = [&](const campaign::progress& p) {
      spdlog::info("campaign {}: iteration {} best {:.1f} % SOL{} tokens {} ${:.2f}", s.id,
                   p.iteration, 100 * p.best_sol, p.promoted ? " (new best)" : "", p.tokens,
                   p.cost_usd);
    };
    try {
      const auto r = session.run(hooks);
      outcome = r.waiting ? "waiting" : "finished";
      spdlog::info("campaign {} {}: {}", s.id, r.waiting ? "is waiting" : "finished",
                   r.stop_reason);
      record_step_success(db, s.id);
    } catch (const step_yield&) {
      outcome = "yield";
      record_step_success(db, s.id);
    } catch (const step_interrupted&) {
      outcome = "interrupted";
    }
    if (outcome != "interrupted") {
      if (auto a = apply_request(db, s.id)) spdlog::info("campaign {}: {} applied", s.id, *a);
    }
  } catch (const step_interrupted&) {
    outcome = "interrupted";
  } catch (const std::exception& e) {
    outcome = "failed";
    spdlog::error("campaign {}: step failed: {}", s.id, e.what());
    try {
      store::store db =
          store::store::open(cfg_.db_path, {.busy_timeout = std::chrono::milliseconds(60000)});
      if (record_step_failure(db, s.id, e.what(), lim.max_step_failures, lim.backoff_initial_s,
                              lim.backoff_max_s))
        spdlog::error("campaign {}: paused after {} failed steps in a row", s.id,
                      lim.max_step_failures);
      if (auto a = apply_request(db, s.id)) spdlog::info("campaign {}: {} applied", s.id, *a);
    } catch (const std::exception& e2) {
      spdlog::error("campaign {}: cannot record the failed step: {}", s.id, e2.what());
    }
  }
  s.outcome = outcome;
  s.done = true;
  wake_loop();
}

void service::schedule(store::store& db) {
  const limits lim = current_limits();
  const int limit = lim.max_active_campaigns > 0 ? lim.max_active_campaigns
                                                 : 2 * static_cast<int>(cfg_.gpus.size());
  // Requests for campaigns no step is running take effect now.
  {
    for (auto id : store::campaigns_with_requests(db))
      if (!steps_.count(id))
        if (auto a = apply_request(db, id)) spdlog::info("campaign {}: {} applied", id, *a);
  }
  auto cands = runnable_campaigns(db, store::now_ms());
  for (auto& c : cands)
    if (auto it = last_step_.find(c.id); it != last_step_.end()) c.last_step = it->second;
  std::set<store::row_id> active;
  for (const auto& [id, s] : steps_) active.insert(id);
  const auto usage = pool_->team_gpu_seconds();
  while (static_cast<int>(active.size()) < limit) {
    const auto id = pick_next(cands, active, usage);
    if (!id) break;
    const auto& c =
        *std::find_if(cands.begin(), cands.end(), [&](const runnable& r) { return r.id == *id; });
    start_step(c.id, c.team, c.priority);
    active.insert(c.id);
  }
  bool waiting = false;
  for (const auto& c : cands)
    if (!active.count(c.id)) waiting = true;
  others_waiting_ = waiting;
}

void service::tick(store::store& db) {
  const limits lim = current_limits();
  pool_->maintain();
  if (!ready_ && pool_->any_ready()) {
    ready_ = true;
    notify(fmt::format("READY=1\nSTATUS=ready: {} GPU(s), evaluator {}", cfg_.gpus.size(),
                       cfg_.evaluator));
    spdlog::info("daemon: ready (state {}, {} GPU(s), evaluator {})", cfg_.state_dir.string(),
                 cfg_.gpus.size(), cfg_.evaluator);
  }
  reap_steps();
  const auto now = store::now_ms();
  if (now - last_spool_ms_ >= lim.spool_poll_ms) {
    last_spool_ms_ = now;
    std::filesystem::path spool;
    std::vector<std::filesystem::path> key_files;
    {
      std::lock_guard lk(cfg_mu_);
      spool = cfg_.spool_dir;
      key_files = cfg_.api_key_files;
    }
    const auto rep = scan_spool(db, spool, lim.spool_max_bytes, key_files);
    std::lock_guard lk(status_mu_);
    spool_accepted_ += rep.accepted;
    spool_rejected_ += rep.rejected;
  }
  if (ready_) schedule(db);
  maintain_store(db, lim);
  {
    json w = json::array();
    for (const auto& [id, what] : store::waiting_campaigns(db))
      w.push_back({{"campaign_id", id}, {"waiting_for", what}});
    std::lock_guard lk(status_mu_);
    waiting_ = std::move(w);
  }
  update_status(ready_ ? "ready" : "starting", ready_ ? "" : pool_->not_ready_reason());
}

void service::maintain_store(store::store& db, const limits& lim) {
  using namespace std::chrono;
  const auto now = clock_type::now();
  const std::int64_t wal = db.db().wal_bytes();
  // The WAL's size is bounded by every writer's own check after each commit
  // (store::open_options::checkpoint_policy). This periodic pass only
  // empties a WAL that stays a few MB when the writes stop (the size
  // trigger waits for a quarter of journal_size_limit).
  // Past the commits' threshold it stays out of their way: while it waited
  // for the write lock (and then copied frames in PASSIVE mode) it held
  // SQLite's checkpoint lock, their TRUNCATEs failed at once, and the WAL
  // grew to 45 MiB in the first 1M-row run of bench/store_scale.sh.
  const std::int64_t threshold = store::open_options{}.checkpoint_policy().truncate_bytes;
  if (lim.wal_checkpoint_s > 0 && (threshold <= 0 || wal <= threshold) &&
      now - last_checkpoint_ >= duration<double>(lim.wal_checkpoint_s)) {
    last_checkpoint_ = now;
    // TRUNCATE waits for readers to leave the WAL and holds the write lock
    // meanwhile, so the wait is short (1 s); a busy WAL gets a PASSIVE pass
    // instead and TRUNCATE again at the next interval.
    std::string result;
    try {
      result = store::checkpoint_wal(db, milliseconds(1000), milliseconds(60000));
    } catch (const std::exception& e) {
      result = "error";
      spdlog::warn("daemon: WAL checkpoint of {}: {}", db.path(), e.what());
    }
    std::lock_guard lk(status_mu_);
    ++checkpoints_[result];
  }
  if (lim.gc_interval_s > 0 && now - last_gc_ >= duration<double>(lim.gc_interval_s)) {
    last_gc_ = now;
    try {
      store::gc_options g;
      g.min_age_ms = static_cast<std::int64_t>(lim.gc_min_age_s * 1000);
      g.max_campaigns = 20;  // a few per tick: the scheduling loop stays responsive
      const auto rep = store::collect_garbage(db, g);
      if (!rep.campaigns.empty()) {
        spdlog::info("daemon: retention: collected {} finished campaign(s), {:.1f} MiB of JSON",
                     rep.campaigns.size(), static_cast<double>(rep.total.bytes) / (1 << 20));
        // More may be left: come back at the next tick rather than wait an interval.
        if (static_cast<std::int64_t>(rep.campaigns.size()) == g.max_campaigns)
          last_gc_ = clock_type::time_point{};
      }
      std::lock_guard lk(status_mu_);
      gc_campaigns_ += static_cast<std::int64_t>(rep.campaigns.size());
    } catch (const std::exception& e) {
      spdlog::error("daemon: retention: {}", e.what());
    }
  }
  const std::int64_t after = db.db().wal_bytes();
  const auto commits = store::process_wal_stats();
  std::lock_guard lk(status_mu_);
  wal_bytes_ = after;
  wal_max_bytes_ = std::max({wal_max_bytes_, wal, after, commits.wal_max_bytes});
  size_checkpoints_ = {{"truncated", commits.truncated}, {"busy", commits.busy},
                       {"locked", commits.locked},       {"skipped", commits.skipped},
                       {"passive", commits.passive},     {"error", commits.errors}};
  size_checkpoint_longest_ms_ = commits.longest_ms;
}

int service::run() {
  started_at_ = store::now_ms();
  configure_logging(cfg_.log.format, cfg_.log.level);
  std::error_code ec;
  for (const auto& d :
       {cfg_.state_dir, cfg_.spool_dir, cfg_.spool_dir / "rejected", cfg_.spool_dir / "accepted"}) {
    std::filesystem::create_directories(d, ec);
    if (ec)
      throw kopt::error(fmt::format("daemon: cannot create {}: {}", d.string(), ec.message()));
  }
  lock_state_dir();
  install_signals();
  update_status("starting", "migrating the store");
  // The scheduling loop pings the watchdog: its own size-triggered
  // checkpoints wait 1 s at most for readers (the steps' wait longer).
  store::store db =
      store::store::open(cfg_.db_path, {.busy_timeout = std::chrono::milliseconds(60000),
                                        .wal_checkpoint_wait = std::chrono::milliseconds(1000)});
  spdlog::info("daemon: store {} at schema version {}", cfg_.db_path.string(),
               db.file_schema_version());
  notify("STATUS=store migrated; starting workers");
  pool_ = std::make_unique<gpu_pool>(cfg_, stopping_);
  update_status("starting", "waiting for the first worker handshake");
  if (cfg_.http.enabled) {
    http_ = std::make_unique<http_api>(*this);
    const int port = http_->start(cfg_.http.address, cfg_.http.port);
    spdlog::info("daemon: HTTP on http://{}:{}/ (health, metrics, api, dashboard)",
                 cfg_.http.address, port);
    for (const auto& w : config_warnings(cfg_)) spdlog::warn("daemon: WARNING: {}", w);
  }
  {
    // Where to find this daemon (tests, scripts): pid and HTTP port.
    const json info = {
        {"pid", getpid()},
        {"http",
         http_ ? json{{"address", cfg_.http.address}, {"port", http_->port()}} : json(nullptr)},
        {"started_at", store::format_time(started_at_)}};
    const auto tmp = cfg_.state_dir / ".daemon.json.tmp";
    std::ofstream(tmp) << info.dump(2) << '\n';
    std::filesystem::rename(tmp, cfg_.state_dir / "daemon.json", ec);
  }
  const auto wd = watchdog_interval();
  auto last_ping = clock_type::now();
  while (!stopping_) {
    try {
      tick(db);
    } catch (const std::exception& e) {
      // A busy or failing database, an unreadable spool: log and retry on
      // the next tick rather than take the service down.
      spdlog::error("daemon: scheduling loop: {}", e.what());
    }
    if (wd && clock_type::now() - last_ping >= *wd / 2) {
      notify("WATCHDOG=1");
      last_ping = clock_type::now();
    }
    wait_signal(100);
  }

  // Stop: every step ends at its next checkpoint.
  notify("STOPPING=1\nSTATUS=stopping at the next checkpoint");
  update_status("stopping", "SIGTERM: waiting for steps to reach a checkpoint");
  const limits lim = current_limits();
  const auto deadline =
      clock_type::now() +
      std::chrono::milliseconds(static_cast<std::int64_t>(lim.shutdown_grace_s * 1000));
  while (clock_type::now() < deadline) {
    reap_steps();
    if (steps_.empty()) break;
    if (wd) notify("WATCHDOG=1");
    wait_signal(50);
  }
  reap_steps();
  if (!steps_.empty()) {
    spdlog::error(
        "daemon: {} step(s) did not reach a checkpoint within {} s; exiting anyway (their "
        "evaluation in flight is "
        "redone at the next start)",
        steps_.size(), lim.shutdown_grace_s);
    spdlog::default_logger()->flush();
    std::_Exit(0);
  }
  pool_->stop_all();
  if (http_) http_->stop();
  spdlog::info("daemon: stopped cleanly");
  return 0;
}

}  // namespace kopt::daemon
