#include "runtime/range_profiler.hpp"

#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "common/error.hpp"
#include "runtime/activity.hpp"

namespace kopt::harness {

namespace {

void check(CUptiResult r, const char* what) {
  if (r != CUPTI_SUCCESS) {
    const char* s = nullptr;
    cuptiGetResultString(r, &s);
    throw kopt::error(fmt::format("CUPTI {} failed: {} ({})", what, s ? s : "unknown error", static_cast<int>(r)));
  }
}

// The driver's cuCtxGetCurrent without linking libcuda: cudart resolves it
// from the driver it loaded (docs/architecture.md, "No driver dependency").
CUcontext current_context() {
  using fn_t = CUresult (*)(CUcontext*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  const cudaError_t e = cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &q);
  if (e != cudaSuccess || fn == nullptr || q != cudaDriverEntryPointSuccess)
    throw kopt::error(fmt::format("cannot resolve cuCtxGetCurrent through cudart: {}", cudaGetErrorString(e)));
  CUcontext ctx = nullptr;
  if (reinterpret_cast<fn_t>(fn)(&ctx) != CUDA_SUCCESS || ctx == nullptr)
    throw kopt::error("no current CUDA context for the range profiler");
  return ctx;
}

bool is_additive(const std::string& metric) {
  // Counters roll up by .sum over kernels; averages, maxima and ratios do
  // not, so a multi-range total keeps only sums.
  return metric.size() > 4 && metric.compare(metric.size() - 4, 4, ".sum") == 0;
}

}  // namespace

nlohmann::json profile_result::to_json() const {
  nlohmann::json r = nlohmann::json::array();
  for (const auto& x : ranges) r.push_back({{"name", x.name}, {"values", x.values}});
  return {{"mode", mode}, {"passes", passes}, {"runs", runs}, {"wall_ms", wall_ms},
          {"config_cached", config_cached}, {"ranges", r}, {"metrics", totals}};
}

struct range_profiler::impl {
  std::string chip;
  int device = 0;
  std::unique_ptr<counters::metric_catalog> catalog;
  CUpti_RangeProfiler_Object* obj = nullptr;  // only while profile() runs
  std::filesystem::path cache_dir;
};

namespace {

// One profiling session: profiler initialized and the range profiler
// enabled on the context for the duration of one profile() call only.
// Keeping it enabled between calls broke the next session on the H200
// (Start returned CUPTI_ERROR_UNKNOWN and the activity API delivered no
// kernel records any more), so every call starts from a clean state.
struct session {
  CUpti_RangeProfiler_Object*& obj;
  explicit session(CUpti_RangeProfiler_Object*& o) : obj(o) {
    CUpti_Profiler_Initialize_Params ip{};
    ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
    check(cuptiProfilerInitialize(&ip), "ProfilerInitialize");
    CUpti_RangeProfiler_Enable_Params ep{};
    ep.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE;
    ep.ctx = current_context();
    check(cuptiRangeProfilerEnable(&ep), "RangeProfilerEnable");
    obj = ep.pRangeProfilerObject;
  }
  ~session() {
    if (obj) {
      CUpti_RangeProfiler_Disable_Params dp{};
      dp.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE;
      dp.pRangeProfilerObject = obj;
      cuptiRangeProfilerDisable(&dp);
      obj = nullptr;
    }
    CUpti_Profiler_DeInitialize_Params dp{};
    dp.structSize = CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE;
    cuptiProfilerDeInitialize(&dp);
  }
  session(const session&) = delete;
  session& operator=(const session&) = delete;
};

}  // namespace

range_profiler::range_profiler(int device, std::filesystem::path cache_dir) : p_(std::make_unique<impl>()) {
  p_->cache_dir = std::move(cache_dir);
  p_->device = device;
  CUpti_Profiler_Initialize_Params ip{};
  ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
  check(cuptiProfilerInitialize(&ip), "ProfilerInitialize");
  CUpti_Device_GetChipName_Params cp{};
  cp.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
  cp.deviceIndex = static_cast<std::size_t>(device);
  check(cuptiDeviceGetChipName(&cp), "DeviceGetChipName");
  p_->chip = cp.pChipName ? cp.pChipName : "";
  p_->catalog = std::make_unique<counters::metric_catalog>(p_->chip);
  CUpti_Profiler_DeInitialize_Params dp{};
  dp.structSize = CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE;
  cuptiProfilerDeInitialize(&dp);
}

range_profiler::~range_profiler() = default;

const std::string& range_profiler::chip() const { return p_->chip; }
const counters::metric_catalog& range_profiler::catalog() const { return *p_->catalog; }

profile_result range_profiler::profile(const std::vector<std::string>& metrics, bool kernel_replay,
                                       std::size_t kernels_per_run, const std::function<void()>& prepare,
                                       const std::function<void()>& run) {
  const auto t0 = std::chrono::steady_clock::now();
  profile_result res;
  res.mode = kernel_replay ? "kernel_replay" : "user_replay";
  const auto cfg = p_->catalog->configure(metrics, p_->cache_dir);
  res.passes = cfg.passes;
  res.config_cached = cfg.from_cache;
  // Activity suspended before the profiler is enabled, resumed after it is
  // disabled (the guards unwind in reverse order).
  static const bool keep_activity = [] {
    const char* e = std::getenv("KOPT_WORKER_KEEP_ACTIVITY");
    return e && std::string(e) == "1";
  }();
  if (!keep_activity) activity_timer::instance().suspend();
  struct resume_guard {
    bool on;
    ~resume_guard() { if (on) activity_timer::instance().resume(); }
  } resume{!keep_activity};
  session sess(p_->obj);

  std::vector<const char*> names;
  for (const auto& m : metrics) names.push_back(m.c_str());
  const std::size_t max_ranges = kernel_replay ? std::max<std::size_t>(kernels_per_run, 1) : 1;

  CUpti_RangeProfiler_GetCounterDataSize_Params sp{};

  sp.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
  sp.pRangeProfilerObject = p_->obj;
  sp.pMetricNames = names.data();
  sp.numMetrics = names.size();
  sp.maxNumOfRanges = max_ranges;
  sp.maxNumRangeTreeNodes = static_cast<uint32_t>(max_ranges);
  check(cuptiRangeProfilerGetCounterDataSize(&sp), "GetCounterDataSize");
  std::vector<std::uint8_t> data(sp.counterDataSize);
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params ip{};
  ip.structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE;
  ip.pRangeProfilerObject = p_->obj;
  ip.pCounterData = data.data();
  ip.counterDataSize = data.size();
  check(cuptiRangeProfilerCounterDataImageInitialize(&ip), "CounterDataImageInitialize");

  CUpti_RangeProfiler_SetConfig_Params cp{};

  cp.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
  cp.pRangeProfilerObject = p_->obj;
  cp.configSize = cfg.image.size();
  cp.pConfig = cfg.image.data();
  cp.counterDataImageSize = data.size();
  cp.pCounterDataImage = data.data();
  cp.range = kernel_replay ? CUPTI_AutoRange : CUPTI_UserRange;
  cp.replayMode = kernel_replay ? CUPTI_KernelReplay : CUPTI_UserReplay;
  cp.maxRangesPerPass = max_ranges;
  cp.numNestingLevels = 1;
  cp.minNestingLevel = 1;
  cp.passIndex = 0;
  cp.targetNestingLevel = 1;
  check(cuptiRangeProfilerSetConfig(&cp), "SetConfig");

  // (Kernel timing records are not wanted during profiling, and replays
  // would pollute them: the activity clock is suspended above.)

  CUpti_RangeProfiler_Start_Params st{};

  st.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
  st.pRangeProfilerObject = p_->obj;
  CUpti_RangeProfiler_Stop_Params sto{};
  sto.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
  sto.pRangeProfilerObject = p_->obj;
  if (kernel_replay) {
    prepare();
    check(cuptiRangeProfilerStart(&st), "Start");
    run();
    check(cuptiRangeProfilerStop(&sto), "Stop");
    res.runs = 1;
  } else {
    // User replay: one pass per run; the state is restored before each.
    for (std::size_t pass = 0; pass < 64; ++pass) {
      prepare();
      check(cuptiRangeProfilerStart(&st), "Start");
      CUpti_RangeProfiler_PushRange_Params pp{};
      pp.structSize = CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE;
      pp.pRangeProfilerObject = p_->obj;
      pp.pRangeName = "plan";
      check(cuptiRangeProfilerPushRange(&pp), "PushRange");
      run();
      CUpti_RangeProfiler_PopRange_Params op{};
      op.structSize = CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE;
      op.pRangeProfilerObject = p_->obj;
      check(cuptiRangeProfilerPopRange(&op), "PopRange");
      check(cuptiRangeProfilerStop(&sto), "Stop");
      ++res.runs;
      if (sto.isAllPassSubmitted) break;
    }
    if (!sto.isAllPassSubmitted) throw kopt::error("CUPTI user replay did not finish within 64 passes");
  }
  CUpti_RangeProfiler_DecodeData_Params dp{};
  dp.structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE;
  dp.pRangeProfilerObject = p_->obj;
  check(cuptiRangeProfilerDecodeData(&dp), "DecodeData");
  if (dp.numOfRangeDropped > 0)
    throw kopt::error(fmt::format("CUPTI dropped {} profiling ranges (more kernels than expected: {})",
                                  dp.numOfRangeDropped, max_ranges));

  CUpti_RangeProfiler_GetCounterDataInfo_Params info{};

  info.structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE;
  info.pCounterDataImage = data.data();
  info.counterDataImageSize = data.size();
  check(cuptiRangeProfilerGetCounterDataInfo(&info), "GetCounterDataInfo");
  for (std::size_t r = 0; r < info.numTotalRanges; ++r) {
    CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri{};
    ri.structSize = CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE;
    ri.pCounterDataImage = data.data();
    ri.counterDataImageSize = data.size();
    ri.rangeIndex = r;
    ri.rangeDelimiter = "/";
    check(cuptiRangeProfilerCounterDataGetRangeInfo(&ri), "GetRangeInfo");
    profiled_range pr;
    pr.name = ri.rangeName ? ri.rangeName : fmt::format("range{}", r);
    const auto vals = p_->catalog->evaluate(data, r, metrics);
    for (std::size_t i = 0; i < metrics.size(); ++i) pr.values[metrics[i]] = vals[i];
    res.ranges.push_back(std::move(pr));
  }
  if (res.ranges.size() == 1) {
    res.totals = res.ranges.front().values;
  } else {
    for (const auto& m : metrics) {
      if (!is_additive(m)) continue;
      double s = 0;
      for (const auto& r : res.ranges) s += r.values.at(m);
      res.totals[m] = s;
    }
  }
  res.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace kopt::harness
