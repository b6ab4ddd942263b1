// The timing loop (CUPTI Activity spans delimited by the L2-flush kernel,
// batches, warm-up, low-clock discard, the check of a timed sample) and the
// worker's bandwidth/tensor-rate calibration.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/cuda_check.hpp"
#include "runtime/device.hpp"
#include "runtime/evaluator_impl.hpp"

namespace kopt::harness {

using namespace detail;

namespace {

// The subject of sample i: A B B A A B B A ... for two subjects (each sees
// the other before and after it equally often, so a drift of clocks or
// temperature cancels), round robin otherwise.
std::size_t subject_of(std::uint64_t i, std::size_t n) {
  if (n == 2) return static_cast<std::size_t>(((i + 1) / 2) % 2);
  return static_cast<std::size_t>(i % n);
}

// TEST ONLY: KOPT_WORKER_TEST_DROP_ACTIVITY_RECORDS=PATH makes the first
// worker process that creates PATH (O_EXCL) discard every kernel record its
// timing batches collect, as CUPTI did in the rare loss seen on the H200,
// whose cause is unknown and which cannot be provoked otherwise; later
// workers find PATH there and measure normally. It exists so the
// clock_lost restart path (docs/worker-protocol.md, "Fatal outcomes") can
// be run on a GPU (tests/worker/test_worker_clock_lost.cpp,
// bench/gpu_verify.sh). The KOPT_WORKER_ prefix lets it through kopt's
// scrubbed worker environment; nothing sets it outside tests.
bool drop_activity_records_for_test() {
  static const bool drop = [] {
    const char* p = std::getenv("KOPT_WORKER_TEST_DROP_ACTIVITY_RECORDS");
    if (p == nullptr || *p == '\0') return false;
    const int fd = ::open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return false;  // another worker was the one (or PATH is unusable)
    ::close(fd);
    return true;
  }();
  return drop;
}

}  // namespace

evaluator::impl::timing_out evaluator::impl::time_subject(const config::operator_config& op,
                                                          subject& s, const resolved_plan& plan,
                                                          workload_state& st, const settings& cfg) {
  return std::move(time_subjects(op, {&s}, {&plan}, st, cfg).front());
}

std::vector<evaluator::impl::timing_out> evaluator::impl::time_subjects(
    const config::operator_config& op, const std::vector<subject*>& subs,
    const std::vector<const resolved_plan*>& plans, workload_state& st, const settings& cfg) {
  const std::size_t n = subs.size();
  std::set<std::string> names;
  for (const auto* p : plans)
    for (const auto& l : p->launches) names.insert(l.kernel);
  std::vector<std::map<std::string, guarded>> ws;
  for (const auto* p : plans) ws.push_back(make_workspaces(*p));
  const std::size_t sets = st.inputs.size();
  std::string roles;
  for (const auto* x : subs) roles += (roles.empty() ? "" : "+") + x->role;
  // Samples go out in batches (one wait and one CUPTI flush per batch).
  // A slow kernel gets smaller batches, so that one batch does not run far
  // past the time limit (8 samples of a naive 2 s reference would be 16 s
  // for a 1 s limit); set from the first warm-up call below. Interleaved
  // batches hold whole A B B A groups.
  std::size_t batch = n == 2 ? std::max<std::size_t>(4, cfg.batch / 4 * 4) : cfg.batch;
  std::vector<cudaEvent_t> evs(2 * batch);
  for (auto& e : evs) KOPT_CUDA(cudaEventCreate(&e));
  struct cleanup {
    std::vector<cudaEvent_t>& e;
    ~cleanup() {
      for (auto ev : e) cudaEventDestroy(ev);
    }
  } guard_events{evs};

  std::vector<std::vector<double>> cupti_ns(n), event_ns(n);
  std::vector<std::vector<int>> clocks(n);
  int lost_batches = 0;
  std::string foreign;
  // Guard damage after every timed sample accumulates per subject here
  // (device-side counts against each call's fresh canaries).
  unsigned long long* damage_slots = scratch + 1024;
  unsigned long long* hash_slots = scratch + 1024 + 16;
  const std::size_t hash_capacity = static_cast<std::size_t>(scratch_slots) - 1024 - 16;
  KOPT_CUDA(cudaMemsetAsync(damage_slots, 0, n * sizeof(unsigned long long), stream));
  KOPT_CUDA(cudaMemsetAsync(hash_slots, 0, hash_capacity * sizeof(unsigned long long), stream));

  // Captures of timed samples: the random pick of a batch, and the last
  // sample of each subject in every batch (the last one overall is then
  // always compared, once the loop has ended).
  std::vector<guarded> pick_snap;
  std::vector<std::vector<guarded>> last_snap(n);
  std::vector<std::size_t> last_set(n, 0);
  std::vector<bool> has_last(n, false);
  struct pending_capture {
    std::size_t sub = 0, k = 0, slot0 = 0;
  };
  std::vector<pending_capture> hashes;  // module hashes queued in this batch
  std::size_t next_hash = 0;
  std::optional<pending_capture> pick;

  auto one_sample = [&](std::size_t slot, std::uint64_t i, std::size_t who) {
    const std::size_t k = i % sets;
    subject& s = *subs[who];
    restore_in_place(st, k);
    for (const auto& t : st.tensors)
      if (t.is_output)
        KOPT_CUDA(kernels::fill_output(st.outputs.at(t.name).data(), t.elements, to_elem(t.type),
                                       fresh(), stream));
    refill_workspaces(*plans[who], ws[who]);
    const auto guards = reachable(st, k, false, ws[who]);
    refresh_guards(guards);
    KOPT_CUDA(cudaCtxResetPersistingL2Cache());
    KOPT_CUDA(kernels::l2_flush(flush_buf, flush_bytes, static_cast<unsigned>(i), stream));
    KOPT_CUDA(cudaEventRecord(evs[2 * slot], stream));
    launch(s, *plans[who], pointers(st, k, false, ws[who]));
    KOPT_CUDA(cudaEventRecord(evs[2 * slot + 1], stream));
    // After the sample, outside its span: guards, then captures.
    for (const auto& g : guards) g.buf->check(damage_slots + who, stream);
    return k;
  };
  auto queue_hash = [&](std::size_t who, std::size_t k) {
    const std::size_t m = subs[who]->module_data.size();
    if (m == 0 || next_hash + m > hash_capacity) return;
    hashes.push_back({who, k, next_hash});
    queue_module_hash(*subs[who], hash_slots + next_hash);
    next_hash += m;
  };
  // Samples are delimited in the CUPTI record stream by the flush kernel:
  // the kernels of the plan after one flush and before the next form one
  // sample (last end - first start, over all its kernels and streams).
  auto harvest = [&]() -> std::vector<double> {
    auto recs = activity_timer::instance().collect();
    if (drop_activity_records_for_test()) recs.clear();
    std::sort(recs.begin(), recs.end(),
              [](const auto& x, const auto& y) { return x.start_ns < y.start_ns; });
    std::vector<double> out;
    std::uint64_t lo = UINT64_MAX, hi = 0;
    std::size_t nk = 0;
    bool open = false;
    auto close_sample = [&] {
      if (open && nk > 0) out.push_back(static_cast<double>(hi - lo));
      lo = UINT64_MAX;
      hi = 0;
      nk = 0;
    };
    for (const auto& r : recs) {
      if (r.name.find(kernels::l2_flush_kernel_name()) != std::string::npos) {
        close_sample();
        open = true;
        continue;
      }
      if (names.count(r.name)) {
        lo = std::min(lo, r.start_ns);
        hi = std::max(hi, r.end_ns);
        ++nk;
        continue;
      }
      if (r.name.find("kopt_") != std::string::npos) continue;  // harness work between samples
      foreign = r.name;
    }
    close_sample();
    return out;  // the caller compares counts: a short batch is retried, never guessed
  };

  // Warm-up: one call of each subject, then about warmup_s of calls.
  const auto w0 = clock_type::now();
  std::uint64_t wi = 0;
  do {
    for (std::size_t who = 0; who < n; ++who) one_sample(0, wi++, who);
    wait(cfg.launch_timeout_ms * static_cast<int>(n), roles + " warm-up");
    if (wi == n) {
      const double first_s =
          std::chrono::duration<double>(clock_type::now() - w0).count() / static_cast<double>(n);
      const double per_batch_s = std::max(0.05, cfg.rule.max_time_s / 4);
      if (first_s * static_cast<double>(batch) > per_batch_s)
        batch = std::clamp<std::size_t>(static_cast<std::size_t>(per_batch_s / first_s),
                                        n == 2 ? 4 : 1, batch);
      if (n == 2) batch = batch / 4 * 4;
    }
  } while (std::chrono::duration<double>(clock_type::now() - w0).count() < cfg.warmup_s);
  activity_timer::instance().collect();
  if (!foreign.empty()) foreign.clear();

  std::uniform_int_distribution<int> coin(0, 3);
  std::vector<timing_out> out(n);
  const auto t0 = clock_type::now();
  std::vector<stopping_rule::verdict> verdict(n, stopping_rule::verdict::go_on);
  auto going = [&] {
    return std::any_of(verdict.begin(), verdict.end(),
                       [](auto v) { return v == stopping_rule::verdict::go_on; });
  };
  bool sample_failed = false;
  std::uint64_t i = 0;
  while (going() && !sample_failed) {
    hashes.clear();
    next_hash = 0;
    pick.reset();
    // One sample in four batches, at a random position, is compared with
    // the reference: a timed sample chosen across the whole window.
    const bool pick_this_batch = coin(rng) == 0;
    const std::size_t pick_slot = std::uniform_int_distribution<std::size_t>(0, batch - 1)(rng);
    std::vector<std::size_t> who_of(batch);
    for (std::size_t b = 0; b < batch; ++b) who_of[b] = subject_of(i + b, n);
    for (std::size_t b = 0; b < batch; ++b) {
      const std::size_t who = who_of[b];
      const std::size_t k = one_sample(b, i++, who);
      const auto c = current_sm_clock_mhz();
      clocks[who].push_back(c ? *c : 0);
      if (pick_this_batch && b == pick_slot) {
        queue_capture(st, k, pick_snap);
        pick = pending_capture{who, k, 0};
        queue_hash(who, k);
      }
      bool last_of_subject = true;
      for (std::size_t c2 = b + 1; c2 < batch; ++c2)
        last_of_subject = last_of_subject && who_of[c2] != who;
      if (last_of_subject) {
        queue_capture(st, k, last_snap[who]);
        last_set[who] = k;
        has_last[who] = true;
        queue_hash(who, k);
      }
    }
    wait(cfg.launch_timeout_ms * static_cast<int>(batch), roles + " timing");
    auto got = harvest();
    // Module data after the captured samples, and the picked sample's output.
    if (next_hash > 0) {
      std::vector<unsigned long long> h(next_hash);
      KOPT_CUDA(cudaMemcpyAsync(h.data(), hash_slots, h.size() * sizeof(unsigned long long),
                                cudaMemcpyDeviceToHost, stream));
      wait(60000, "module data hash");
      for (const auto& pc : hashes)
        check_module_hashes(*subs[pc.sub], h.data() + pc.slot0, "during a timed sample");
      KOPT_CUDA(cudaMemsetAsync(hash_slots, 0, h.size() * sizeof(unsigned long long), stream));
    }
    if (pick) {
      const host_blocks got_out = download_capture(st, pick_snap, "timed sample download");
      bool ok = true;
      out[pick->sub].sample_check =
          compare_all(op, st, data_of(got_out), data_of(*st.expected[pick->k]), ok);
      if (!ok) {
        out[pick->sub].sample_check_failed = true;
        sample_failed = true;
        break;
      }
    }
    if (got.size() != batch) {
      // CUPTI delivered records for fewer samples than were launched (seen
      // rarely on the H200 after counters passes). The whole batch is
      // discarded, whatever its values, and measured again; the count is
      // reported. Persistent loss is an error, never a guess.
      for (std::size_t b = 0; b < batch; ++b) clocks[who_of[b]].pop_back();
      // When the loss persists, the process's activity stream has stopped
      // delivering kernel records (seen on the H200, not yet explained;
      // re-enabling the activity kind did not bring it back). A fresh
      // worker measures correctly, so this is a fatal "clock_lost": the
      // control plane restarts the worker and measures the workload
      // again; it is not the candidate's fault and not recorded as such.
      if (++lost_batches > 1)
        die("clock_lost",
            fmt::format("CUPTI returned {} kernel samples for {} launched in {} batches in a row",
                        got.size(), batch, lost_batches));
      activity_timer::instance().suspend();
      activity_timer::instance().resume();
      continue;
    }
    for (std::size_t b = 0; b < batch; ++b) {
      float ms = 0;
      KOPT_CUDA(cudaEventElapsedTime(&ms, evs[2 * b], evs[2 * b + 1]));
      event_ns[who_of[b]].push_back(static_cast<double>(ms) * 1e6);
      cupti_ns[who_of[b]].push_back(got[b]);
    }
    if (!foreign.empty()) break;
    const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
    for (std::size_t who = 0; who < n; ++who) verdict[who] = cfg.rule.check(cupti_ns[who], elapsed);
  }
  if (!foreign.empty())
    throw subject_failure{
        "rejected_integrity",
        fmt::format("a kernel that is not in the candidate's module ran during timing: {}",
                    foreign)};

  // After the loop: the last sample of every subject compared with the
  // reference, the guards of every timed sample, and the inputs of every
  // input set (hashes) and the module data once more.
  std::vector<unsigned long long> dmg(n);
  KOPT_CUDA(cudaMemcpyAsync(dmg.data(), damage_slots, n * sizeof(unsigned long long),
                            cudaMemcpyDeviceToHost, stream));
  wait(60000, "guard check after timing");
  for (std::size_t who = 0; who < n && !sample_failed; ++who) {
    if (dmg[who] != 0)
      throw subject_failure{
          "rejected_integrity",
          fmt::format("{}: wrote {} bytes outside its buffers during timed samples (guard regions "
                      "damaged)",
                      subs[who]->role, dmg[who])};
    if (has_last[who]) {
      const host_blocks got_out =
          download_capture(st, last_snap[who], "last timed sample download");
      bool ok = true;
      json per = compare_all(op, st, data_of(got_out), data_of(*st.expected[last_set[who]]), ok);
      out[who].j["last_sample_check"] = {{"passed", ok}, {"outputs", per}};
      if (!ok) {
        out[who].sample_check = per;
        out[who].sample_check_failed = true;
        sample_failed = true;
      }
    }
    verify_module_data(*subs[who], "during timing");
  }
  for (std::size_t k = 0; k < sets; ++k) {
    const auto h = hash_inputs(st, k);
    for (const auto& [name, v] : h)
      if (v != st.input_hash[k].at(name))
        throw subject_failure{
            "rejected_integrity",
            fmt::format(
                "modified input '{}' (input set {}) during timed samples, which the operator "
                "does not declare in_place",
                name, k)};
  }

  const int floor_mhz = static_cast<int>(cfg.min_clock_fraction * dev.default_sm_clock_mhz);
  const double measure_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  for (std::size_t who = 0; who < n; ++who) {
    // Samples taken while the SM clock was low are not representative.
    std::vector<double> kept;
    std::size_t discarded = 0;
    for (std::size_t j = 0; j < cupti_ns[who].size(); ++j) {
      if (clocks[who][j] > 0 && floor_mhz > 0 && clocks[who][j] < floor_mhz) {
        ++discarded;
        continue;
      }
      kept.push_back(cupti_ns[who][j]);
    }
    if (kept.empty()) kept = cupti_ns[who];  // all low: keep them, the clocks say why
    const auto sum = summarize(kept);
    const auto ev = summarize(event_ns[who]);
    std::vector<int> cs = clocks[who];
    std::sort(cs.begin(), cs.end());
    auto& o = out[who];
    json last =
        o.j.is_object() && o.j.contains("last_sample_check") ? o.j.at("last_sample_check") : json();
    o.j = sum.to_json();
    if (!last.is_null()) o.j["last_sample_check"] = std::move(last);
    o.j["stop_reason"] =
        o.sample_check_failed ? "sample_check_failed" : stopping_rule::name(verdict[who]);
    o.j["clock"] = clock_name(activity_timer::instance().clock());
    o.j["discarded_low_clock"] = discarded;
    o.j["lost_batches"] = lost_batches;
    o.j["event_median_ns"] = ev.median_ns;
    o.j["sm_clock_mhz"] = {{"min", cs.empty() ? 0 : cs.front()},
                           {"median", cs.empty() ? 0 : cs[cs.size() / 2]},
                           {"max", cs.empty() ? 0 : cs.back()}};
    o.j["measure_s"] = measure_s;
    o.j["input_sets"] = sets;
    o.j["batch"] = batch;
    if (n > 1) o.j["interleaved"] = {{"with", roles}, {"order", n == 2 ? "ABBA" : "round_robin"}};
    if (const auto lf = launch_floor.find(activity_timer::instance().clock());
        lf != launch_floor.end())
      o.j["launch_floor_ns"] = lf->second;
    // Raw samples are kept (bounded) for interleaved comparisons and audits.
    std::vector<double> raw(
        kept.begin(),
        kept.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(kept.size(), 2000)));
    o.j["samples_ns"] = raw;
  }
  return out;
}

double evaluator::impl::measure_launch_floor() {
  const activity_clock c = activity_timer::instance().clock();
  if (const auto it = launch_floor.find(c); it != launch_floor.end()) return it->second;
  // The sample procedure of time_subjects with an empty kernel as the
  // candidate: persisting-L2 reset, flush, one launch, the same clock.
  constexpr int samples = 64, warm = 4;
  activity_timer::instance().collect();
  for (int i = 0; i < samples + warm; ++i) {
    KOPT_CUDA(cudaCtxResetPersistingL2Cache());
    KOPT_CUDA(kernels::l2_flush(flush_buf, flush_bytes, static_cast<unsigned>(i), stream));
    KOPT_CUDA(kernels::empty_kernel(stream));
  }
  wait(60000, "launch floor");
  std::vector<std::pair<std::uint64_t, double>> spans;
  for (const auto& r : activity_timer::instance().collect())
    if (r.name.find(kernels::empty_kernel_name()) != std::string::npos)
      spans.emplace_back(r.start_ns, static_cast<double>(r.end_ns - r.start_ns));
  std::sort(spans.begin(), spans.end());
  std::vector<double> v;
  for (std::size_t j = std::min<std::size_t>(warm, spans.size()); j < spans.size(); ++j)
    v.push_back(spans[j].second);
  if (v.empty()) return 0.0;  // no records: no floor rather than a guess
  const double median = summarize(v).median_ns;
  launch_floor[c] = median;
  return median;
}

json evaluator::impl::launch_floor_json() {
  if (!timing) return {{"skipped", "profile-only worker (no clock)"}};
  const double ns = measure_launch_floor();
  return {{"clock", clock_name(activity_timer::instance().clock())},
          {"median_ns", ns},
          {"kernel", "empty, 1 block of 1 thread, after an L2 flush"}};
}

json evaluator::impl::calibrate() {
  if (!timing)
    throw kopt::error("calibrate: this worker was started with --profile-only (no clock)");
  const std::int64_t bytes = std::int64_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  KOPT_CUDA(cudaMalloc(&a, static_cast<std::size_t>(bytes)));
  KOPT_CUDA(cudaMalloc(&b, static_cast<std::size_t>(bytes)));
  KOPT_CUDA(cudaMemsetAsync(a, 1, static_cast<std::size_t>(bytes), stream));
  activity_timer::instance().collect();
  for (int i = 0; i < 12; ++i) {
    KOPT_CUDA(kernels::l2_flush(flush_buf, flush_bytes, static_cast<unsigned>(i), stream));
    KOPT_CUDA(kernels::copy_kernel(b, a, bytes, stream));
  }
  // Tensor-core rate: enough blocks for several per SM, long enough (a few
  // ms) that launch cost is noise.
  const int blocks = dev.sm_count * 8, tpb = 256, iters = 4096;
  for (int i = 0; i < 6; ++i)
    KOPT_CUDA(kernels::mma_loop(static_cast<float*>(b), blocks, tpb, iters, stream));
  wait(60000, "calibration");
  std::vector<double> copy_ns, mma_ns;
  for (const auto& r : activity_timer::instance().collect()) {
    if (r.name.find("kopt_copy") != std::string::npos)
      copy_ns.push_back(static_cast<double>(r.end_ns - r.start_ns));
    if (r.name.find("kopt_mma_loop") != std::string::npos)
      mma_ns.push_back(static_cast<double>(r.end_ns - r.start_ns));
  }
  cudaFree(a);
  cudaFree(b);
  auto tail = [](const std::vector<double>& v) {
    return summarize(std::vector<double>(
        v.begin() + std::min<std::ptrdiff_t>(2, static_cast<std::ptrdiff_t>(v.size())), v.end()));
  };
  const auto c = tail(copy_ns);
  const auto m = tail(mma_ns);
  const double warps = static_cast<double>(blocks) * tpb / 32.0;
  const double flops = warps * iters * kernels::mma_loop_flops_per_warp_iter;
  return {{"copy_bytes", bytes},
          {"copy_median_ns", c.median_ns},
          {"dram_bytes_per_s",
           c.median_ns > 0 ? 2.0 * static_cast<double>(bytes) / (c.median_ns * 1e-9) : 0.0},
          {"mma_flops", flops},
          {"mma_median_ns", m.median_ns},
          {"bf16_tensor_flops_per_s", m.median_ns > 0 ? flops / (m.median_ns * 1e-9) : 0.0},
          {"mma_kind", "mma.sync.m16n8k16.bf16.f32"}};
}

}  // namespace kopt::harness
