// The daemon's configuration file (JSON, documented in docs/daemon.md, an
// example in configs/daemon.example.json): where its state lives, which
// GPUs it drives and how workers are started on them, the LLM providers
// campaigns may use, the scheduling limits, the HTTP endpoint and the log
// format. Parsing checks every field and throws kopt::config_error naming
// the field and what is wrong, so a typo fails at start-up (or a SIGHUP
// reload is refused and the old configuration kept) rather than at 3 am.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kopt::daemon {

struct worker_settings {
  std::string exe;                         // empty: kopt-worker beside kopt ($KOPT_WORKER)
  std::vector<std::string> launch_prefix;  // e.g. ["srun", "--gres=gpu:1", "-N1", "--exclusive"]
  // "index": `--gpu <slot index>` (a whole node, `ssh node`); "auto":
  // `--gpu auto`, the GPU the launch prefix's resource manager gave the
  // worker (srun --gres=gpu:1).
  std::string gpu = "index";
  // Default <state_dir>/cache; with a launch prefix empty, i.e. the worker's
  // own default on its node ($KOPT_CACHE_DIR, ~/.cache/kopt): workers
  // compile the sources of each request themselves, so no shared FS is needed.
  std::string cache_dir;
  double hello_timeout_s = 180;
  double silence_timeout_s = 600;
  int max_restarts = 8;  // per request (worker_client)
  int seeds = 3;
  double min_time_s = 0.1;
  double max_time_s = 1.0;
  int launch_timeout_ms = 10000;
  std::string peaks_file;  // GPU peak table; empty: configs/gpu-peaks.json if found
  // Counters tier of full/verify stages, as `kopt run` (none, default, full):
  // each GPU slot then has a profiling worker beside its timing worker.
  std::string counters = "default";
};

// Test-only evaluator: no GPU, no worker. Times come from a deterministic
// model of the candidate's content (see fake.cpp); `delay_ms` makes every
// evaluation take that long so that tests can kill the daemon mid-campaign.
struct fake_settings {
  int delay_ms = 0;
  double noise_rsd = 0.01;
};

// What a SIGHUP may change; everything else needs a restart.
struct limits {
  int max_active_campaigns = 0;  // campaign steps at once; 0: 2 x number of GPUs
  int max_step_failures = 5;     // consecutive failed steps before a campaign is paused
  double backoff_initial_s = 1;  // after a failed step or worker start
  double backoff_max_s = 300;
  // A step yields its slot to waiting campaigns only after this long and
  // this many iterations: yielding costs a session set-up and a resume, and
  // after every iteration it buys no fairness a few seconds would not.
  double min_step_s = 2;
  int min_step_iterations = 1;
  // Store maintenance (issue #26): every wal_checkpoint_s the scheduler
  // checkpoints the WAL (TRUNCATE, PASSIVE when readers are busy; 0: only
  // SQLite's automatic checkpoints); every gc_interval_s (0: never) it
  // collects campaigns finished gc_min_age_s ago (store/retention.hpp).
  double wal_checkpoint_s = 30;
  double gc_interval_s = 0;
  double gc_min_age_s = 86400;
  std::int64_t spool_max_bytes = 4 << 20;
  int spool_poll_ms = 1000;
  double shutdown_grace_s = 8;  // SIGTERM: how long steps may take to reach a checkpoint
};

struct http_settings {
  bool enabled = true;
  std::string address = "127.0.0.1";  // loopback by default: the API is read-only but not public
  int port = 8719;                    // 0: any free port (written to <state_dir>/daemon.json)
  // The scheduling slice the HTTP threads ask for (Linux >= 6.12), so that a
  // scrape is answered promptly while the steps keep every core busy; 0
  // keeps the kernel's default. See common/sched.hpp.
  int slice_us = 200;
};

struct log_settings {
  std::string format = "text";  // text | json
  std::string level = "info";   // trace debug info warn error
};

struct daemon_config {
  std::filesystem::path file;  // where it was read from (for reloads)
  std::filesystem::path state_dir;
  std::filesystem::path db_path;    // default <state_dir>/kopt.db
  std::filesystem::path spool_dir;  // default <state_dir>/spool
  std::vector<int> gpus{0};
  std::string evaluator = "worker";  // worker | fake (tests only)
  worker_settings worker;
  fake_settings fake;
  // Provider sections by campaign provider name (openai, anthropic, command,
  // replay), each as `kopt run --llm-config` takes it (docs/providers.md).
  std::map<std::string, nlohmann::json> providers;
  // What LLM campaigns' prompts are built from, with `kopt run`'s defaults:
  // knowledge-base directories beside kopt's own, and the template directory
  // (empty: $KOPT_PROMPTS_DIR, then the built-in templates).
  std::vector<std::filesystem::path> kb_directories;
  std::filesystem::path prompts_dir;
  // Their api_key_file paths (absolute): the spool never reads these.
  std::vector<std::filesystem::path> api_key_files;
  limits lim;
  http_settings http;
  log_settings log;

  int active_limit() const {
    return lim.max_active_campaigns > 0 ? lim.max_active_campaigns
                                        : 2 * static_cast<int>(gpus.size());
  }
  // Every setting, defaults filled in (providers too): `kopt daemon --check`.
  nlohmann::json to_json() const;
  nlohmann::json limits_json() const;  // what /api/daemon shows
};

// Settings that are valid but dangerous, one sentence each (an HTTP address
// other machines can reach: the endpoint has no authentication). `kopt
// daemon --check` prints them on stderr and the daemon logs them at start.
std::vector<std::string> config_warnings(const daemon_config& c);

// Throws kopt::config_error ("daemon config FILE: field: what is wrong").
daemon_config parse_config(const nlohmann::json& j, const std::filesystem::path& file);
daemon_config load_config(const std::filesystem::path& file);
// The same for text read elsewhere (`file` names it and anchors relative paths).
daemon_config load_config_text(std::string_view text, const std::filesystem::path& file);

}  // namespace kopt::daemon
