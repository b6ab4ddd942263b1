// `kopt daemon`: the long-running service. It holds the lock of its state
// directory, migrates the store, starts one worker per GPU and becomes ready
// (READY=1 to systemd, /health 200) after the first worker handshake. Its
// scheduling loop (the main thread) pings the systemd watchdog, scans the
// spool, applies pause/cancel requests to idle campaigns, and gives step
// slots to runnable campaigns, fairly between teams. A step runs one
// campaign's loop (agent/campaign) on its own thread and its own store
// connection until an iteration ends while others wait (it yields), a
// pause/cancel request arrives, the campaign finishes, or the daemon stops;
// a step yields only after limits.min_step_s and limits.min_step_iterations;
// GPUs are leased per evaluation (pool.hpp). Everything durable is in the
// store, so a kill -9 at any point loses only the evaluation in flight.
// The scheduling loop also keeps the store's WAL small (periodic
// checkpoints, journal_size_limit) and, when configured, collects finished
// campaigns (store/retention.hpp).
//
// Signals: SIGTERM/SIGINT stop at the next checkpoint (steps get
// limits.shutdown_grace_s, then the daemon exits anyway; that is safe for
// the same reason a kill is). SIGHUP re-reads the config file and applies
// what can change without a restart (limits, providers, log format and
// level); a config that does not parse is refused and the old one kept.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "campaign/session.hpp"
#include "daemon/config.hpp"
#include "store/store.hpp"

namespace kopt::daemon {

class gpu_pool;
class http_api;

// The campaign session's settings for a daemon campaign of `provider`: its
// section under "providers", the knowledge-base and template directories,
// the peak table and the counters tier, with `kopt run`'s defaults. Empty
// when an LLM provider has no section.
std::optional<campaign::session_options> session_options_for(const daemon_config& cfg,
                                                             const std::string& provider);

class service {
 public:
  explicit service(daemon_config cfg);
  ~service();
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  // Runs until SIGTERM/SIGINT (installs the signal handlers). Returns the
  // process exit code. Throws kopt::error when it cannot start (lock held,
  // state directory unusable, HTTP address taken).
  int run();

  // Thread-safe snapshot for /health and /api/daemon.
  nlohmann::json status() const;
  const daemon_config& config() const { return cfg_; }

 private:
  struct step;
  void lock_state_dir();
  void tick(store::store& db);
  void schedule(store::store& db);
  void start_step(store::row_id id, const std::string& team, std::int64_t priority);
  void run_step(step& s);
  void reap_steps();
  void maintain_store(store::store& db, const limits& lim);
  void reload();
  void update_status(const std::string& state, const std::string& reason);
  bool wait_signal(int timeout_ms);  // true when a signal arrived
  limits current_limits() const;

  daemon_config cfg_;
  mutable std::mutex cfg_mu_;  // guards cfg_.lim, cfg_.providers, cfg_.log (SIGHUP)
  std::atomic<bool> stopping_{false};
  std::atomic<bool> others_waiting_{false};
  bool ready_ = false;
  int lock_fd_ = -1;
  int db_lock_fd_ = -1;  // <database>.daemon.lock: one daemon per database
  std::unique_ptr<gpu_pool> pool_;
  std::unique_ptr<http_api> http_;
  std::map<store::row_id, std::unique_ptr<step>> steps_;
  std::map<store::row_id, std::int64_t> last_step_;
  std::int64_t last_spool_ms_ = 0;

  mutable std::mutex status_mu_;
  nlohmann::json status_;
  nlohmann::json waiting_ = nlohmann::json::array();  // campaigns blocked on an agent (tick)
  std::map<std::string, std::int64_t> step_outcomes_;
  std::int64_t reloads_ = 0;
  std::int64_t spool_accepted_ = 0, spool_rejected_ = 0;
  std::int64_t started_at_ = 0;
  // Store maintenance (maintain_store, main thread; read under status_mu_).
  std::chrono::steady_clock::time_point last_checkpoint_{}, last_gc_{};
  std::int64_t wal_bytes_ = 0, wal_max_bytes_ = 0;
  std::map<std::string, std::int64_t> checkpoints_;  // by result: truncated, passive, busy
  // The commits' size-triggered checkpoints (store::process_wal_stats).
  std::map<std::string, std::int64_t> size_checkpoints_;
  std::int64_t size_checkpoint_longest_ms_ = 0;
  std::int64_t gc_campaigns_ = 0;
};

}  // namespace kopt::daemon
