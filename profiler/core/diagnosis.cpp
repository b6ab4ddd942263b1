#include "core/diagnosis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/roofline.hpp"

namespace kopt::harness {

namespace {

std::optional<double> metric(const diagnosis_input& in, const std::string& name) {
  const auto it = in.metrics.find(name);
  if (it == in.metrics.end() || !std::isfinite(it->second)) return std::nullopt;
  return it->second;
}

// Thresholds. They follow common Nsight Compute practice (SOL above 60 %
// counts as "high" utilization) and the measurement standard's launch floor.
constexpr double near_peak = 0.70;           // of DRAM bandwidth
constexpr double busy_pipe_pct = 60.0;       // FMA/tensor pipe active
constexpr double low_occupancy_pct = 25.0;   // achieved warps of the maximum
constexpr double excess_bytes_ratio = 1.25;  // DRAM bytes over the roofline's count

}  // namespace

nlohmann::json finding::to_json() const {
  return {{"class", cls}, {"severity", severity}, {"summary", summary}, {"evidence", evidence}};
}

nlohmann::json diagnosis::to_json() const {
  nlohmann::json f = nlohmann::json::array();
  for (const auto& x : findings) f.push_back(x.to_json());
  return {{"primary", primary}, {"findings", f}, {"derived", derived}};
}

std::string diagnosis::to_text() const {
  std::string out;
  for (const auto& f : findings)
    out += fmt::format("- {} (severity {:.2f}): {}\n", f.cls, f.severity, f.summary);
  return out;
}

diagnosis diagnose(const diagnosis_input& in) {
  diagnosis d;
  std::vector<finding> fs;
  const double t_s = in.median_ns * 1e-9;
  const auto dram_rd = metric(in, "dram__bytes_read.sum");
  const auto dram_wr = metric(in, "dram__bytes_write.sum");
  const auto occ = metric(in, "sm__warps_active.avg.pct_of_peak_sustained_active");
  const auto fma = metric(in, "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active");
  const auto tensor = metric(in, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active");
  const auto dram_pct = metric(in, "dram__throughput.avg.pct_of_peak_sustained_elapsed");
  const auto sm_active = metric(in, "sm__cycles_active.avg");
  const auto sm_elapsed = metric(in, "sm__cycles_elapsed.avg");
  const auto local_ld = metric(in, "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum");
  const auto local_st = metric(in, "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum");
  const auto gpu_ns = metric(in, "gpu__time_duration.sum");

  // Derived quantities: prefer the counter's own duration for rates computed
  // from counters (same run), the timed median otherwise.
  const double rate_s = gpu_ns && *gpu_ns > 0 ? *gpu_ns * 1e-9 : t_s;
  std::optional<double> dram_bytes;
  if (dram_rd && dram_wr) dram_bytes = *dram_rd + *dram_wr;
  std::optional<double> bw_frac;
  if (dram_bytes && rate_s > 0 && in.peak_bytes_per_s > 0) {
    bw_frac = *dram_bytes / rate_s / in.peak_bytes_per_s;
    d.derived["dram_bytes"] = *dram_bytes;
    d.derived["dram_bytes_per_s"] = *dram_bytes / rate_s;
    d.derived["dram_fraction_of_peak"] = *bw_frac;
  } else if (in.roofline_bytes > 0 && t_s > 0 && in.peak_bytes_per_s > 0) {
    // Without counters: the roofline's bytes over the measured time is a
    // lower bound on the achieved bandwidth.
    bw_frac = in.roofline_bytes / t_s / in.peak_bytes_per_s;
    d.derived["roofline_bytes_per_s"] = in.roofline_bytes / t_s;
  }
  if (dram_pct) bw_frac = std::max(bw_frac.value_or(0.0), *dram_pct / 100.0);
  std::optional<double> flop_frac;
  if (in.roofline_flops > 0 && t_s > 0 && in.peak_flops_per_s > 0) {
    flop_frac = in.roofline_flops / t_s / in.peak_flops_per_s;
    d.derived["flops_per_s"] = in.roofline_flops / t_s;
    d.derived["flop_fraction_of_peak"] = *flop_frac;
  }
  const double intensity = in.roofline_bytes > 0 ? in.roofline_flops / in.roofline_bytes : 0;
  const double ridge = in.peak_bytes_per_s > 0 ? in.peak_flops_per_s / in.peak_bytes_per_s : 0;
  const bool memory_side = in.roofline_bytes > 0 && (ridge <= 0 || intensity < ridge);
  d.derived["arithmetic_intensity"] = intensity;
  d.derived["ridge_point"] = ridge;
  if (occ) d.derived["achieved_occupancy_pct"] = *occ;
  if (in.sol_fraction >= 0) d.derived["sol_fraction"] = in.sol_fraction;

  // Launch configuration: waves and theoretical occupancy of the plan's main
  // launch, the one with the most blocks. Plans add one-block helper launches
  // (offset scans, setup, a path that returns at once); judging the grid by
  // one of those, or pairing the main launch's block count with a helper's
  // waves when the main launch's occupancy is unknown, called a 1600-block
  // attention grid "0 % of one wave". Unknown occupancy gives no grid finding.
  std::int64_t total_blocks = 0;
  double waves = -1;
  int theo_pct = -1;
  const diagnosis_input::launch* main_launch = nullptr;
  for (const auto& l : in.launches)
    if (main_launch == nullptr || l.blocks > main_launch->blocks) main_launch = &l;
  if (main_launch != nullptr) {
    const auto& l = *main_launch;
    total_blocks = l.blocks;
    if (l.blocks_per_sm > 0 && in.sm_count > 0) {
      waves = static_cast<double>(l.blocks) / (static_cast<double>(l.blocks_per_sm) * in.sm_count);
      theo_pct = static_cast<int>(
          std::lround(100.0 * static_cast<double>(l.blocks_per_sm * l.threads_per_block) /
                      std::max(in.max_threads_per_sm, 1)));
    }
  }
  if (waves >= 0) d.derived["waves"] = waves;
  if (theo_pct >= 0) d.derived["theoretical_occupancy_pct"] = theo_pct;

  // 1. Launch-bound: too short for anything else to matter, so the
  // bandwidth and grid findings below are not drawn for it.
  const double launch_bound_ns = launch_bound_threshold_ns(in.launch_floor_ns);
  const bool launch_bound = is_launch_bound(in.median_ns, in.launch_floor_ns);
  if (launch_bound) {
    finding f{
        "launch-bound",
        std::clamp(1.0 - in.median_ns / (2 * launch_bound_ns), 0.3, 0.9),
        in.launch_floor_ns > 0
            ? fmt::format(
                  "the plan takes {:.2f} us, under twice the measured launch floor ({:.2f} us): "
                  "launches dominate; fuse work or process more per launch",
                  in.median_ns / 1000.0, in.launch_floor_ns / 1000.0)
            : fmt::format(
                  "the plan takes {:.2f} us, close to the launch and drain cost of a kernel; fuse "
                  "work or process more per launch",
                  in.median_ns / 1000.0),
        {{"median_ns", in.median_ns},
         {"threshold_ns", launch_bound_ns},
         {"launch_floor_ns", in.launch_floor_ns}}};
    fs.push_back(f);
  }
  // 2. Memory-bound, near or far from peak.
  if (!launch_bound && bw_frac && (memory_side || *bw_frac >= 0.5)) {
    if (*bw_frac >= near_peak) {
      fs.push_back(
          {"memory-bound-near-peak",
           0.2,
           fmt::format("DRAM bandwidth at {:.0f}% of peak: only fewer bytes can make it faster",
                       100 * *bw_frac),
           {{"dram_fraction_of_peak", *bw_frac}}});
    } else if (memory_side) {
      fs.push_back(
          {"memory-bound-far-from-peak",
           std::clamp(1.0 - *bw_frac / near_peak, 0.2, 0.95),
           fmt::format(
               "memory-bound by the roofline (intensity {:.2f} FLOP/B below the ridge {:.1f}) but "
               "DRAM bandwidth only {:.0f}% of peak",
               intensity, ridge, 100 * *bw_frac),
           {{"dram_fraction_of_peak", *bw_frac},
            {"arithmetic_intensity", intensity},
            {"ridge_point", ridge}}});
    }
  }
  // 3. Compute-bound: a pipe is busy, or the FLOP rate is near its peak.
  {
    const double pipe = std::max(fma.value_or(0.0), tensor.value_or(0.0));
    const bool busy = pipe >= busy_pipe_pct || (flop_frac && *flop_frac >= 0.6);
    if (busy) {
      const bool tensor_side = tensor.value_or(0.0) >= fma.value_or(0.0);
      fs.push_back(
          {"compute-bound",
           0.3,
           fmt::format(
               "{} pipe active {:.0f}% of cycles{}", tensor_side ? "tensor" : "FMA", pipe,
               flop_frac ? fmt::format(", {:.0f}% of the peak FLOP rate", 100 * *flop_frac) : ""),
           {{"fma_pipe_pct", fma.value_or(-1.0)},
            {"tensor_pipe_pct", tensor.value_or(-1.0)},
            {"flop_fraction_of_peak", flop_frac.value_or(-1.0)}}});
    } else if (!memory_side && in.roofline_flops > 0 && flop_frac && *flop_frac < 0.3 && tensor &&
               fma && *tensor < 20.0) {
      fs.push_back({"tensor-core-underused",
                    std::clamp(1.0 - *flop_frac, 0.3, 0.9),
                    fmt::format("compute-side by the roofline but at {:.0f}% of the peak FLOP rate "
                                "with the tensor pipe "
                                "active {:.0f}% of cycles",
                                100 * *flop_frac, *tensor),
                    {{"flop_fraction_of_peak", *flop_frac}, {"tensor_pipe_pct", *tensor}}});
    }
  }
  // 4. Under-filled grid / tail.
  if (!launch_bound && waves >= 0 && waves < 1.0) {
    fs.push_back({"under-filled-grid",
                  std::clamp(1.0 - waves, 0.2, 0.9),
                  fmt::format("{} blocks fill only {:.0f}% of one wave ({} SMs); more, smaller "
                              "blocks or a split of the "
                              "work would use the idle SMs",
                              total_blocks, 100 * waves, in.sm_count),
                  {{"blocks", total_blocks}, {"waves", waves}, {"sm_count", in.sm_count}}});
  } else if (!launch_bound && waves >= 1.0 && waves < 4.0) {
    const double last = waves - std::floor(waves);
    if (last > 0 && last < 0.5) {
      fs.push_back(
          {"tail-effect",
           std::clamp((1.0 - last) / std::ceil(waves), 0.1, 0.5),
           fmt::format(
               "{:.2f} waves: the last wave is {:.0f}% full, so part of the GPU idles at the end",
               waves, 100 * last),
           {{"waves", waves}, {"last_wave_fill", last}}});
    }
  }
  // 5. Latency / occupancy: neither memory nor compute busy.
  {
    const bool mem_busy = bw_frac && *bw_frac >= 0.5;
    const double pipe = std::max(fma.value_or(0.0), tensor.value_or(0.0));
    const bool cmp_busy = pipe >= busy_pipe_pct;
    const bool low_occ = occ && *occ < low_occupancy_pct;
    double idle_sm = -1;
    if (sm_active && sm_elapsed && *sm_elapsed > 0) idle_sm = 1.0 - *sm_active / *sm_elapsed;
    if (!mem_busy && !cmp_busy && (low_occ || (idle_sm >= 0 && idle_sm > 0.5)) && !launch_bound) {
      const bool occ_limited = theo_pct >= 0 && theo_pct < 50;
      fs.push_back(
          {occ_limited ? "occupancy-limited" : "latency-bound",
           0.6,
           fmt::format(
               "neither memory ({:.0f}% of peak) nor compute ({:.0f}% pipe) is busy; achieved "
               "occupancy {:.0f}%{}{}",
               100 * bw_frac.value_or(0.0), pipe, occ.value_or(0.0),
               theo_pct >= 0 ? fmt::format(" (theoretical {}%)", theo_pct) : "",
               idle_sm >= 0 ? fmt::format(", SMs idle {:.0f}% of the time", 100 * idle_sm) : ""),
           {{"achieved_occupancy_pct", occ.value_or(-1.0)},
            {"theoretical_occupancy_pct", theo_pct},
            {"sm_idle_fraction", idle_sm},
            {"dram_fraction_of_peak", bw_frac.value_or(-1.0)}}});
    }
  }
  // 6. Spills.
  {
    std::int64_t spill = 0, local = 0;
    for (const auto& l : in.launches) {
      spill = std::max(spill, l.spill_bytes);
      local = std::max(local, l.local_bytes);
    }
    const double local_traffic = local_ld.value_or(0.0) + local_st.value_or(0.0);
    if (spill > 0 || local_traffic > 0) {
      fs.push_back({"register-spills",
                    local_traffic > 0 && dram_bytes && *dram_bytes > 0
                        ? std::clamp(local_traffic / *dram_bytes, 0.2, 0.8)
                        : 0.3,
                    fmt::format("{} bytes spilled per thread (local memory {} B/thread), {:.0f} "
                                "bytes of local-memory "
                                "traffic",
                                spill, local, local_traffic),
                    {{"spill_bytes", spill},
                     {"local_bytes", local},
                     {"local_traffic_bytes", local_traffic}}});
    }
  }
  // 6b. ptxas advisories: serialized wgmma (C75xx) is a tensor-core problem
  // that no counter names directly: the MMAs run, one at a time.
  {
    nlohmann::json adv = nlohmann::json::array();
    bool wgmma = false;
    for (const auto& l : in.launches)
      for (const auto& a : l.performance_advisories) {
        adv.push_back({{"kernel", l.kernel}, {"message", a}});
        wgmma = wgmma || a.find("wgmma") != std::string::npos;
      }
    if (!adv.empty())
      fs.push_back(
          {"tensor-core-underused",
           wgmma ? 0.7 : 0.3,
           fmt::format("ptxas reports a potential performance loss in {}: {}",
                       adv[0]["kernel"].get<std::string>(), adv[0]["message"].get<std::string>()),
           {{"ptxas_advisories", adv}}});
  }
  // 7. Excess bytes compared with the roofline.
  if (dram_bytes && in.roofline_bytes > 0 && *dram_bytes > excess_bytes_ratio * in.roofline_bytes) {
    const double ratio = *dram_bytes / in.roofline_bytes;
    fs.push_back(
        {"excess-bytes",
         std::clamp(1.0 - 1.0 / ratio, 0.2, 0.9),
         fmt::format("moves {:.2f}x the bytes the roofline needs ({:.3g} vs {:.3g}): redundant or "
                     "uncoalesced "
                     "traffic",
                     ratio, *dram_bytes, in.roofline_bytes),
         {{"dram_bytes", *dram_bytes}, {"roofline_bytes", in.roofline_bytes}, {"ratio", ratio}}});
  }
  // Uncoalesced global loads (full tier): sectors per request above 8 for
  // 4-byte-per-thread loads means scattered accesses.
  if (const auto sec = metric(in, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
      req = metric(in, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum");
      sec && req && *req > 0 && *sec / *req > 16.0) {
    fs.push_back(
        {"uncoalesced",
         0.5,
         fmt::format(
             "{:.1f} sectors per global load request (32 B sectors; 4-16 for coalesced warps)",
             *sec / *req),
         {{"sectors_per_request", *sec / *req}}});
  }
  if (const auto bank = metric(in, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum");
      bank && *bank > 0) {
    const auto inst = metric(in, "smsp__inst_executed.sum");
    if (inst && *bank > 0.05 * *inst)
      fs.push_back({"shared-memory-bank-conflicts",
                    0.4,
                    fmt::format("{:.3g} shared-memory bank conflicts ({:.0f}% of instructions)",
                                *bank, 100 * *bank / *inst),
                    {{"bank_conflicts", *bank}, {"instructions", *inst}}});
  }

  // Low bandwidth is a symptom when the grid leaves SMs idle or no warp is
  // resident to issue loads: the cause ranks first (a one-block kernel was
  // reported "memory-bound far from peak" before, which points the model at
  // the wrong fix).
  const bool starved = std::any_of(fs.begin(), fs.end(), [](const finding& f) {
    return f.cls == "under-filled-grid" || f.cls == "latency-bound" || f.cls == "occupancy-limited";
  });
  if (starved)
    for (auto& f : fs)
      if (f.cls == "memory-bound-far-from-peak") {
        f.severity = std::min(f.severity, 0.5);
        f.summary += " (a consequence of the idle SMs below)";
      }
  std::stable_sort(fs.begin(), fs.end(),
                   [](const finding& a, const finding& b) { return a.severity > b.severity; });
  // "near peak" is good news, not the bottleneck, unless it is all there is.
  d.findings = std::move(fs);
  for (const auto& f : d.findings)
    if (f.cls != "memory-bound-near-peak") {
      d.primary = f.cls;
      break;
    }
  if (d.primary.empty() && !d.findings.empty()) d.primary = d.findings.front().cls;
  if (d.primary.empty()) d.primary = "unknown";
  return d;
}

}  // namespace kopt::harness
