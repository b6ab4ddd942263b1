#include "runtime/activity.hpp"

#include <cupti.h>

#include <cstdlib>

#include "runtime/cuda_check.hpp"

namespace kopt::harness {
namespace {

constexpr std::size_t buffer_size = std::size_t{8} << 20;
constexpr std::size_t buffer_align = 8;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(buffer_align, buffer_size));
  *size = *buffer ? buffer_size : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  activity_timer::instance().on_buffer(buffer, valid);
  std::free(buffer);
}

CUpti_ActivityKind kind_of(activity_clock c) {
  return c == activity_clock::kernel ? CUPTI_ACTIVITY_KIND_KERNEL : CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
}

}  // namespace

const char* clock_name(activity_clock c) noexcept {
  return c == activity_clock::kernel ? "kernel" : "concurrent_kernel";
}

std::optional<activity_clock> parse_clock(std::string_view name) noexcept {
  if (name == "kernel") return activity_clock::kernel;
  if (name == "concurrent_kernel") return activity_clock::concurrent_kernel;
  return std::nullopt;
}

void activity_timer::set_clock(activity_clock c) {
  if (c == clock_) return;
  const bool live = enabled_ && !suspended_;
  if (live) {
    KOPT_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    KOPT_CUPTI(cuptiActivityDisable(kind_of(clock_)));
  }
  {
    std::lock_guard lock(mu_);
    records_.clear();  // records of the other clock are not samples of this one
  }
  clock_ = c;
  if (live) KOPT_CUPTI(cuptiActivityEnable(kind_of(clock_)));
}

activity_timer& activity_timer::instance() {
  static activity_timer t;
  return t;
}

void activity_timer::enable() {
  if (enabled_) return;
  KOPT_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  KOPT_CUPTI(cuptiActivityEnable(kind_of(clock_)));
  enabled_ = true;
}

void activity_timer::on_buffer(std::uint8_t* buffer, std::size_t valid) {
  if (!buffer || valid == 0) return;
  std::lock_guard lock(mu_);
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    records_.push_back({k->name ? k->name : "", k->start, k->end, k->streamId, k->correlationId});
  }
}

void activity_timer::suspend() {
  if (!enabled_) return;
  KOPT_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  KOPT_CUPTI(cuptiActivityDisable(kind_of(clock_)));
  std::lock_guard lock(mu_);
  records_.clear();  // nothing recorded while suspended is a timing sample
  suspended_ = true;
}

void activity_timer::resume() {
  if (!suspended_) return;
  suspended_ = false;
  // A failure here would leave timing without a clock: better to fail loudly.
  KOPT_CUPTI(cuptiActivityEnable(kind_of(clock_)));
}

std::vector<kernel_record> activity_timer::collect() {
  KOPT_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  std::lock_guard lock(mu_);
  std::vector<kernel_record> out;
  out.swap(records_);
  return out;
}

}  // namespace kopt::harness
