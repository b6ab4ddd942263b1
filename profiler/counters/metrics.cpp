#include "counters/metrics.hpp"

#include <cupti_profiler_host.h>
#include <cupti_result.h>
#include <cupti.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.hpp"
#include "common/hash.hpp"

namespace kopt::counters {

namespace {

std::string cupti_message(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return fmt::format("{} ({})", s ? s : "unknown CUPTI error", static_cast<int>(r));
}

void check(CUptiResult r, const char* what) {
  if (r != CUPTI_SUCCESS) throw kopt::error(fmt::format("CUPTI {} failed: {}", what, cupti_message(r)));
}

// Levenshtein distance for suggestions.
std::size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string base_of(const std::string& metric) {
  const auto dot = metric.find('.');
  return dot == std::string::npos ? metric : metric.substr(0, dot);
}

}  // namespace

const std::vector<std::string>& tier_metrics(tier t) {
  // Chosen with cuptiProfilerHostGetNumOfPasses on GH100: the default set is
  // 2 passes, the full set 12 (tests/counters checks both).
  static const std::vector<std::string> cheap = {
      "gpu__time_duration.sum",
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
      "dram__throughput.avg.pct_of_peak_sustained_elapsed",
      "lts__t_bytes.sum",
      "sm__warps_active.avg.pct_of_peak_sustained_active",
      "sm__cycles_active.avg",
      "sm__cycles_elapsed.avg",
      "gpc__cycles_elapsed.max",
      "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
      "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
      "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
      "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
      "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
      "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
      "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
  };
  static const std::vector<std::string> full = [] {
    std::vector<std::string> v = cheap;
    for (const char* m : {
             "smsp__inst_executed.sum",
             "sm__warps_launched.sum",
             "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
             "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
             "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
             "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
             "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
             "sm__throughput.avg.pct_of_peak_sustained_elapsed",
             "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
             "lts__t_sector_hit_rate.pct",
             "smsp__thread_inst_executed_per_inst_executed.ratio",
             "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
             "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct",
             "smsp__warp_issue_stalled_barrier_per_warp_active.pct",
             "smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct",
             "smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct",
             "smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct",
         })
      v.emplace_back(m);
    return v;
  }();
  return t == tier::full ? full : cheap;
}

tier parse_tier(const std::string& s) {
  if (s == "default") return tier::default_tier;
  if (s == "full") return tier::full;
  throw kopt::error(fmt::format("unknown metric tier '{}' (expected 'default' or 'full')", s));
}

nlohmann::json metric_info::to_json() const {
  return {{"name", name}, {"description", description}, {"hw_unit", hw_unit}, {"dim_unit", dim_unit}, {"type", type}};
}

struct metric_catalog::impl {
  CUpti_Profiler_Host_Object* host = nullptr;
};

metric_catalog::metric_catalog(std::string chip) : chip_(std::move(chip)), p_(std::make_unique<impl>()) {
  CUpti_Profiler_Host_Initialize_Params ip{};
  ip.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
  ip.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  ip.pChipName = chip_.c_str();
  const CUptiResult r = cuptiProfilerHostInitialize(&ip);
  if (r != CUPTI_SUCCESS)
    throw kopt::error(fmt::format("CUPTI cannot describe chip '{}': {} (supported chips: {})", chip_, cupti_message(r),
                                  fmt::join(supported_chips(), ", ")));
  p_->host = ip.pHostObject;
}

metric_catalog::~metric_catalog() {
  if (p_ && p_->host) {
    CUpti_Profiler_Host_Deinitialize_Params dp{};
    dp.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
    dp.pHostObject = p_->host;
    cuptiProfilerHostDeinitialize(&dp);
  }
}

std::vector<std::string> metric_catalog::base_metrics() const {
  std::vector<std::string> out;
  for (auto type : {CUPTI_METRIC_TYPE_COUNTER, CUPTI_METRIC_TYPE_RATIO, CUPTI_METRIC_TYPE_THROUGHPUT}) {
    CUpti_Profiler_Host_GetBaseMetrics_Params bp{};
    bp.structSize = CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE;
    bp.pHostObject = p_->host;
    bp.metricType = type;
    check(cuptiProfilerHostGetBaseMetrics(&bp), "GetBaseMetrics");
    for (std::size_t i = 0; i < bp.numMetrics; ++i) out.emplace_back(bp.ppMetricNames[i]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<metric_info> metric_catalog::describe(const std::vector<std::string>& names) const {
  std::vector<metric_info> out;
  std::vector<std::string> unknown;
  for (const auto& n : names) {
    CUpti_Profiler_Host_GetMetricProperties_Params mp{};
    mp.structSize = CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE;
    mp.pHostObject = p_->host;
    mp.pMetricName = n.c_str();
    if (cuptiProfilerHostGetMetricProperties(&mp) != CUPTI_SUCCESS) {
      unknown.push_back(n);
      continue;
    }
    metric_info m;
    m.name = n;
    m.description = mp.pDescription ? mp.pDescription : "";
    m.hw_unit = mp.pHwUnit ? mp.pHwUnit : "";
    m.dim_unit = mp.pDimUnit ? mp.pDimUnit : "";
    m.type = mp.metricType == CUPTI_METRIC_TYPE_COUNTER ? "counter"
             : mp.metricType == CUPTI_METRIC_TYPE_RATIO ? "ratio"
                                                         : "throughput";
    out.push_back(std::move(m));
  }
  if (!unknown.empty()) {
    const auto bases = base_metrics();
    std::string msg = fmt::format("CUPTI does not know {} on chip {}:", unknown.size() == 1 ? "this metric" : "these metrics", chip_);
    for (const auto& u : unknown) {
      const std::string b = base_of(u);
      std::vector<std::pair<std::size_t, std::string>> near;
      for (const auto& k : bases) near.emplace_back(distance(b, k), k);
      std::partial_sort(near.begin(), near.begin() + std::min<std::ptrdiff_t>(3, static_cast<std::ptrdiff_t>(near.size())),
                        near.end());
      std::vector<std::string> sug;
      for (std::size_t i = 0; i < near.size() && i < 3; ++i) sug.push_back(near[i].second);
      const bool known_base = std::binary_search(bases.begin(), bases.end(), b);
      msg += fmt::format("\n  {}: {}", u,
                         known_base ? fmt::format("'{}' is a base metric, but the roll-up/suffix is not valid "
                                                  "(use e.g. {}.sum, .avg, .max, .avg.pct_of_peak_sustained_elapsed)",
                                                  b, b)
                                    : fmt::format("unknown; did you mean {}?", fmt::join(sug, ", ")));
    }
    msg += "\n(list the chip's metrics with `kopt-worker metrics --chip " + chip_ + " --list`)";
    throw unknown_metric_error(msg);
  }
  return out;
}

config_image metric_catalog::configure(const std::vector<std::string>& names, const std::filesystem::path& cache_dir) const {
  describe(names);  // validation with a clear error first
  std::string key_src = chip_;
  for (const auto& n : names) key_src += "\n" + n;
  const std::string key = kopt::sha256_hex(key_src);
  std::filesystem::path file;
  if (!cache_dir.empty()) {
    file = cache_dir / (chip_ + "-" + key.substr(0, 24) + ".config");
    std::ifstream in(file, std::ios::binary);
    if (in) {
      // File: SHA-256 of the image in hex, a newline, the image. CUPTI
      // crashes on a damaged image (seen: a truncated file), so nothing
      // reaches it unless the checksum matches.
      std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      config_image c;
      if (raw.size() > 65 && raw[64] == '\n' &&
          kopt::sha256_hex(raw.data() + 65, raw.size() - 65) == raw.substr(0, 64))
        c.image.assign(raw.begin() + 65, raw.end());
      CUpti_Profiler_Host_GetNumOfPasses_Params np{};
      np.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
      np.pConfigImage = c.image.data();
      np.configImageSize = c.image.size();
      if (!c.image.empty() && cuptiProfilerHostGetNumOfPasses(&np) == CUPTI_SUCCESS) {
        c.passes = np.numOfPasses;
        c.from_cache = true;
        return c;
      }
      // A damaged cache entry is rebuilt below.
    }
  }
  // A fresh host object per configuration: ConfigAddMetrics accumulates.
  metric_catalog fresh(chip_);
  std::vector<const char*> ptrs;
  for (const auto& n : names) ptrs.push_back(n.c_str());
  CUpti_Profiler_Host_ConfigAddMetrics_Params ap{};
  ap.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
  ap.pHostObject = fresh.p_->host;
  ap.ppMetricNames = ptrs.data();
  ap.numMetrics = ptrs.size();
  check(cuptiProfilerHostConfigAddMetrics(&ap), "ConfigAddMetrics");
  CUpti_Profiler_Host_GetConfigImageSize_Params sp{};
  sp.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
  sp.pHostObject = fresh.p_->host;
  check(cuptiProfilerHostGetConfigImageSize(&sp), "GetConfigImageSize");
  config_image c;
  c.image.resize(sp.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params gp{};
  gp.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
  gp.pHostObject = fresh.p_->host;
  gp.pConfigImage = c.image.data();
  gp.configImageSize = c.image.size();
  check(cuptiProfilerHostGetConfigImage(&gp), "GetConfigImage");
  CUpti_Profiler_Host_GetNumOfPasses_Params np{};
  np.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
  np.pConfigImage = c.image.data();
  np.configImageSize = c.image.size();
  check(cuptiProfilerHostGetNumOfPasses(&np), "GetNumOfPasses");
  c.passes = np.numOfPasses;
  if (!file.empty()) {
    // Write-then-rename: a concurrent reader sees the old file or the new one.
    std::error_code ec;
    std::filesystem::create_directories(cache_dir, ec);
    const auto tmp = file.string() + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary);
      out << kopt::sha256_hex(c.image.data(), c.image.size()) << '\n';
      out.write(reinterpret_cast<const char*>(c.image.data()), static_cast<std::streamsize>(c.image.size()));
    }
    std::filesystem::rename(tmp, file, ec);
    if (ec) std::filesystem::remove(tmp, ec);
  }
  return c;
}

std::vector<double> metric_catalog::evaluate(const std::vector<std::uint8_t>& counter_data, std::size_t range,
                                             const std::vector<std::string>& names) const {
  std::vector<const char*> ptrs;
  for (const auto& n : names) ptrs.push_back(n.c_str());
  std::vector<double> values(names.size(), 0.0);
  CUpti_Profiler_Host_EvaluateToGpuValues_Params ep{};
  ep.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
  ep.pHostObject = p_->host;
  ep.pCounterDataImage = counter_data.data();
  ep.counterDataImageSize = counter_data.size();
  ep.ppMetricNames = ptrs.data();
  ep.numMetrics = ptrs.size();
  ep.rangeIndex = range;
  ep.pMetricValues = values.data();
  check(cuptiProfilerHostEvaluateToGpuValues(&ep), "EvaluateToGpuValues");
  return values;
}

std::vector<std::string> supported_chips() {
  CUpti_Profiler_Host_GetSupportedChips_Params sp{};
  sp.structSize = CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE;
  std::vector<std::string> out;
  if (cuptiProfilerHostGetSupportedChips(&sp) != CUPTI_SUCCESS) return out;
  for (std::size_t i = 0; i < sp.numChips; ++i) out.emplace_back(sp.ppChipNames[i]);
  return out;
}

std::filesystem::path default_cache_dir() {
  if (const char* k = std::getenv("KOPT_CACHE_DIR"); k && *k) return std::filesystem::path(k) / "cupti";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "kopt" / "cupti";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "kopt" / "cupti";
  return std::filesystem::temp_directory_path() / "kopt-cupti";
}

}  // namespace kopt::counters
