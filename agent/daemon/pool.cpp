#include "daemon/pool.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "campaign/dropout.hpp"
#include "campaign/worker_evaluator.hpp"
#include "common/data_paths.hpp"
#include "common/error.hpp"
#include "common/subprocess.hpp"
#include "runner/evaluation.hpp"
#include "runner/record.hpp"
#include "runner/sanitize.hpp"

namespace kopt::daemon {

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

struct gpu_pool::slot {
  slot_stats st;
  std::unique_ptr<runner::worker_client> client;
  // The --profile-only worker for counters (docs/counters.md): started on
  // first use by runner::evaluate_with_counters, stopped with the slot's.
  std::unique_ptr<runner::worker_client> profiler;
  runner::worker_options opts;  // how client was made (sanitizer workers start the same way)
  bool busy = false;
  clock_type::time_point not_before{};
  int consecutive_failures = 0;
  std::thread starter;
  std::atomic<bool> start_done{false};
  std::optional<harness::gpu_peaks> peaks;
};

json slot_stats::to_json() const {
  return {{"gpu", gpu},
          {"state", state},
          {"busy_s", busy_s},
          {"evaluations", evaluations},
          {"worker_starts", worker_starts},
          {"worker_failures", worker_failures},
          {"worker_restarts", worker_restarts},
          {"last_error", last_error},
          {"campaign", campaign ? json(*campaign) : json(nullptr)},
          {"device", device}};
}

namespace {

}  // namespace

std::string peaks_file_for(const daemon_config& cfg) {
  return data::peaks_file(cfg.worker.peaks_file);
}

namespace {

double backoff_delay(double initial, double max, int failures) {
  return std::min(max, initial * std::pow(2.0, std::min(failures - 1, 30)));
}

}  // namespace

gpu_pool::gpu_pool(const daemon_config& cfg, const std::atomic<bool>& stopping)
    : cfg_(cfg), stopping_(stopping) {
  backoff_initial_s_ = cfg.lim.backoff_initial_s;
  backoff_max_s_ = cfg.lim.backoff_max_s;
  for (int g : cfg.gpus) {
    auto s = std::make_unique<slot>();
    s->st.gpu = g;
    s->st.state = "down";
    if (cfg.evaluator == "worker") {
      runner::worker_options o;
      o.worker_exe = cfg.worker.exe;
      o.launch_prefix = cfg.worker.launch_prefix;
      o.gpu = g;
      o.gpu_auto = cfg.worker.gpu == "auto";
      o.cache_dir = cfg.worker.cache_dir;
      o.hello_timeout =
          std::chrono::seconds(static_cast<std::int64_t>(std::ceil(cfg.worker.hello_timeout_s)));
      o.silence_timeout =
          std::chrono::seconds(static_cast<std::int64_t>(std::ceil(cfg.worker.silence_timeout_s)));
      o.max_restarts = cfg.worker.max_restarts;
      s->opts = o;
      s->client = std::make_unique<runner::worker_client>(o);
      s->profiler = std::make_unique<runner::worker_client>(runner::profiler_options(o));
    }
    slots_.push_back(std::move(s));
  }
}

gpu_pool::~gpu_pool() {
  for (auto& s : slots_)
    if (s->starter.joinable()) s->starter.join();
  stop_all();
}

void gpu_pool::set_backoff(double initial_s, double max_s) {
  std::lock_guard lk(mu_);
  backoff_initial_s_ = initial_s;
  backoff_max_s_ = max_s;
}

void gpu_pool::start_slot(slot& s) {
  // Runs on the slot's starter thread; nobody else touches s.client while
  // the slot is "starting".
  json device;
  std::optional<harness::gpu_peaks> peaks;
  std::string error;
  try {
    if (s.client) {
      device = s.client->start().device;
      if (const auto pf = data::peaks_file(cfg_.worker.peaks_file); !pf.empty())
        peaks = harness::find_peaks(harness::load_peak_table(pf), device.value("name", ""));
      if (!peaks)
        spdlog::warn(
            "GPU {}: no peak figures for '{}': fractions of speed of light are not computed",
            s.st.gpu, device.value("name", ""));
    } else {
      device = {{"name", "fake GPU (evaluator \"fake\", tests only)"}, {"index", s.st.gpu}};
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  {
    std::lock_guard lk(mu_);
    ++s.st.worker_starts;
    if (error.empty()) {
      s.st.state = "ready";
      s.st.device = device;
      s.peaks = peaks;
      s.consecutive_failures = 0;
      spdlog::info("GPU {}: worker ready on {}", s.st.gpu, device.value("name", "?"));
    } else {
      ++s.st.worker_failures;
      ++s.consecutive_failures;
      const double d = backoff_delay(backoff_initial_s_, backoff_max_s_, s.consecutive_failures);
      s.not_before =
          clock_type::now() + std::chrono::milliseconds(static_cast<std::int64_t>(d * 1000));
      s.st.state = "backoff";
      s.st.last_error = error;
      last_error_ = fmt::format("GPU {}: {}", s.st.gpu, error);
      spdlog::error("GPU {}: worker start failed ({} in a row), next try in {:.1f} s: {}", s.st.gpu,
                    s.consecutive_failures, d, error);
    }
  }
  s.start_done = true;
  cv_.notify_all();
}

void gpu_pool::maintain() {
  std::vector<slot*> to_start;
  {
    std::lock_guard lk(mu_);
    const auto now = clock_type::now();
    for (auto& sp : slots_) {
      slot& s = *sp;
      if (s.st.state == "starting") {
        if (!s.start_done) continue;
      }
      if (s.starter.joinable() && s.start_done) s.starter.join();
      if (stopping_) continue;
      if (s.st.state == "down" || (s.st.state == "backoff" && !s.busy && now >= s.not_before)) {
        s.st.state = "starting";
        s.start_done = false;
        to_start.push_back(&s);
      }
    }
  }
  for (slot* s : to_start) s->starter = std::thread([this, s] { start_slot(*s); });
}

bool gpu_pool::any_ready() const {
  std::lock_guard lk(mu_);
  for (const auto& s : slots_)
    if (s->st.state == "ready" || s->st.state == "busy") return true;
  return false;
}

std::string gpu_pool::not_ready_reason() const {
  std::lock_guard lk(mu_);
  return last_error_.empty() ? "waiting for the first worker handshake" : last_error_;
}

json gpu_pool::any_device() const {
  std::lock_guard lk(mu_);
  for (const auto& s : slots_)
    if (s->st.state == "ready" || s->st.state == "busy") return s->st.device;
  return json::object();
}

std::vector<slot_stats> gpu_pool::stats() const {
  std::lock_guard lk(mu_);
  std::vector<slot_stats> out;
  for (const auto& s : slots_) out.push_back(s->st);
  return out;
}

std::map<std::string, double> gpu_pool::team_gpu_seconds() const {
  std::lock_guard lk(mu_);
  return team_s_;
}

gpu_pool::lease gpu_pool::acquire(const who& w) {
  std::unique_lock lk(mu_);
  const std::uint64_t seq = next_seq_++;
  waiters_.push_back({seq, w.team, w.priority});
  auto leave = [&] {
    waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(),
                                  [&](const waiter& x) { return x.seq == seq; }),
                   waiters_.end());
  };
  auto usage = [&](const std::string& t) {
    auto it = team_s_.find(t);
    return it == team_s_.end() ? 0.0 : it->second;
  };
  for (;;) {
    if (stopping_) {
      leave();
      cv_.notify_all();
      throw step_interrupted("the daemon is stopping");
    }
    slot* free = nullptr;
    for (auto& s : slots_)
      if (s->st.state == "ready" && !s->busy) {
        free = s.get();
        break;
      }
    if (free) {
      // First in line: least GPU time for the team, then priority, then age.
      const waiter* first = nullptr;
      for (const auto& x : waiters_) {
        if (!first) {
          first = &x;
          continue;
        }
        const double ux = usage(x.team), uf = usage(first->team);
        if (ux != uf                        ? ux < uf
            : x.priority != first->priority ? x.priority > first->priority
                                            : x.seq < first->seq)
          first = &x;
      }
      if (first && first->seq == seq) {
        leave();
        free->busy = true;
        free->st.state = "busy";
        free->st.campaign = w.campaign;
        cv_.notify_all();
        return lease(*this, *free, w.team);
      }
    }
    cv_.wait_for(lk, std::chrono::milliseconds(200));
  }
}

void gpu_pool::release(slot& s, const std::string& team, double seconds) {
  {
    std::lock_guard lk(mu_);
    s.busy = false;
    if (s.st.state == "busy") s.st.state = "ready";
    s.st.campaign.reset();
    s.st.busy_s += seconds;
    ++s.st.evaluations;
    team_s_[team] += seconds;
  }
  cv_.notify_all();
}

void gpu_pool::stop_all() {
  std::vector<slot*> idle;
  {
    std::lock_guard lk(mu_);
    for (auto& s : slots_)
      if (!s->busy && s->st.state != "starting") idle.push_back(s.get());
  }
  for (slot* s : idle)
    for (auto* c : {s->client.get(), s->profiler.get()}) {
      if (!c) continue;
      try {
        c->stop();
      } catch (const std::exception& e) {
        spdlog::warn("GPU {}: stopping a worker: {}", s->st.gpu, e.what());
      }
    }
}

gpu_pool::lease::~lease() {
  if (!pool_) return;
  const double s = std::chrono::duration<double>(clock_type::now() - start_).count();
  pool_->release(*slot_, team_, s);
}

int gpu_pool::lease::gpu() const {
  return slot_->st.gpu;
}
runner::worker_client* gpu_pool::lease::client() const {
  return slot_->client.get();
}
runner::worker_client* gpu_pool::lease::profiler() const {
  return slot_->profiler.get();
}
const runner::worker_options& gpu_pool::lease::worker_options() const {
  return slot_->opts;
}
const std::optional<harness::gpu_peaks>& gpu_pool::lease::peaks() const {
  return slot_->peaks;
}
const json& gpu_pool::lease::device() const {
  return slot_->st.device;
}

void gpu_pool::lease::count_restarts(int n) {
  std::lock_guard lk(pool_->mu_);
  slot_->st.worker_restarts += n;
}

void gpu_pool::lease::fail(const std::string& why) {
  // The slot is leased, so only this thread touches its workers.
  for (auto* c : {slot_->client.get(), slot_->profiler.get()}) {
    if (!c) continue;
    try {
      c->stop();
    } catch (const std::exception& e) {
      spdlog::warn("GPU {}: stopping a worker: {}", slot_->st.gpu, e.what());
    }
  }
  std::lock_guard lk(pool_->mu_);
  ++slot_->st.worker_failures;
  ++slot_->consecutive_failures;
  const double d =
      backoff_delay(pool_->backoff_initial_s_, pool_->backoff_max_s_, slot_->consecutive_failures);
  slot_->not_before =
      clock_type::now() + std::chrono::milliseconds(static_cast<std::int64_t>(d * 1000));
  slot_->st.state = "backoff";
  slot_->st.last_error = why;
  pool_->last_error_ = fmt::format("GPU {}: {}", slot_->st.gpu, why);
  spdlog::error("GPU {}: worker failed, slot backs off {:.1f} s: {}", slot_->st.gpu, d, why);
}

// --- the worker evaluator on a leased worker ----------------------------------------

campaign::worker_eval_options pool_worker_evaluator::options() const {
  campaign::worker_eval_options o;
  o.seeds = ws_.seeds;
  o.min_time_s = ws_.min_time_s;
  o.max_time_s = ws_.max_time_s;
  o.launch_timeout_ms = ws_.launch_timeout_ms;
  o.counters = counters_;
  return o;
}

campaign::eval_batch pool_worker_evaluator::evaluate(const campaign::eval_request& rq) {
  auto l = pool_.acquire(who_);
  const campaign::worker_eval_options o = options();
  runner::evaluation_report rep;
  try {
    rep = runner::evaluate_with_counters(*l.client(), l.profiler(),
                                         campaign::worker_request(op_, rq, o));
  } catch (const runner::request_rejected& e) {
    // A request the worker refuses is this campaign's problem, not the
    // GPU's; only the worker's own failure (code internal) counts against
    // the slot.
    if (e.code() == protocol::error_code::internal) l.fail(e.what());
    throw worker_failure(fmt::format("GPU {}: {}", l.gpu(), e.what()));
  } catch (const kopt::error& e) {
    l.fail(e.what());
    throw worker_failure(fmt::format("GPU {}: {}", l.gpu(), e.what()));
  }
  l.count_restarts(rep.restarts);
  if (rep.restarts >= ws_.max_restarts) {
    const std::string last = rep.events.empty() ? std::string("no detail") : rep.events.front();
    const std::string why = fmt::format("the worker crashed {} times in one request ({})", rep.restarts, last);
    l.fail(why);
    throw worker_failure(fmt::format("GPU {}: {}", l.gpu(), why));
  }
  return campaign::batch_from_report(op_, rq, std::move(rep), l.peaks());
}

void pool_worker_evaluator::record(store::store& db, const campaign::eval_request& rq,
                                   const campaign::eval_batch& b) {
  campaign::record_worker_batch(db, rq, b);
}

json pool_worker_evaluator::sanitize(const campaign::eval_request& rq) {
  // The lease keeps other campaigns off this GPU while the tool runs (it
  // slows kernels by orders of magnitude, and a neighbour's timing must not
  // share the GPU with it); the slot's own workers stay as they are.
  auto l = pool_.acquire(who_);
  const auto o = options();
  return runner::sanitize(l.worker_options(), campaign::worker_request(op_, rq, o)).to_json();
}

// --- the fake evaluator (tests) -------------------------------------------------------

campaign::fake_evaluator::model fake_model() {
  return [](const campaign::eval_subject& s, const std::string& w) {
    campaign::fake_truth t;
    const std::string src = s.candidate.value("source", "");
    if (src.find("// broken") != std::string::npos) t.status = "incorrect";
    const double base = 2000 + static_cast<double>(campaign::derive_seed(7, w) % 1000);
    double f = 0.7 + 0.6 * campaign::unit_draw(campaign::derive_seed(11, s.key));
    if (auto p = src.find("// speed "); p != std::string::npos) f *= std::atof(src.c_str() + p + 9);
    t.time_ns = base * f;
    t.sol_time_ns = base * 0.4;
    return t;
  };
}

campaign::eval_batch pool_fake_evaluator::evaluate(const campaign::eval_request& rq) {
  auto l = pool_.acquire(who_);
  // The delay stands for GPU time; a stopping daemon cuts it short, and the
  // evaluation is lost exactly as a killed worker's would be.
  const auto until = clock_type::now() + std::chrono::milliseconds(fs_.delay_ms);
  while (clock_type::now() < until) {
    if (stopping_) throw step_interrupted("the daemon is stopping");
    std::this_thread::sleep_for(
        std::min<clock_type::duration>(std::chrono::milliseconds(20), until - clock_type::now()));
  }
  auto b = fake_.evaluate(rq);
  b.device = l.device();
  return b;
}

void pool_fake_evaluator::record(store::store& db, const campaign::eval_request& rq,
                                 const campaign::eval_batch& b) {
  fake_.record(db, rq, b);
}

}  // namespace kopt::daemon
