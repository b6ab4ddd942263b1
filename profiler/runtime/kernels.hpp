// The harness's own device kernels (compiled by nvcc into kopt-worker, never
// by NVRTC): seeded input generators for every dtype, output poisoning,
// unpredictable fills, guard-region canaries, content hashes and the L2
// flush. Their names start with "kopt_" so CUPTI records of harness work are
// told apart from the candidate's kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kopt::harness::kernels {

// Element type codes shared with the device side (order of config::dtype).
enum class elem : int {
  float64 = 0,
  float32,
  float16,
  bfloat16,
  float8_e4m3fn,
  float8_e5m2,
  int64,
  int32,
  int16,
  int8,
  uint8,
  boolean
};

enum class gen : int { normal = 0, uniform = 1, int_range = 2, constant = 3 };

struct gen_params {
  gen kind = gen::normal;
  double a = 0.0;  // mean / low / constant value
  double b = 1.0;  // stddev / high
  double scale = 1.0;
  std::int64_t ilo = 0;  // int_range [ilo, ihi)
  std::int64_t ihi = 1;
  std::uint64_t seed = 0;
};

cudaError_t fill_generated(void* dst, std::int64_t n, elem t, const gen_params& p, cudaStream_t s);
// NaN for float types; a seed-dependent sentinel for integer types.
cudaError_t fill_poison(void* dst, std::int64_t n, elem t, std::uint64_t seed, cudaStream_t s);
// The fill of every output before every call, checked or timed alike
// (issue 17): each element independently holds the poison (as fill_poison)
// or fresh random bits, chosen per element by the seed, so that "the poison
// is present" says nothing about whether a call is checked, and an element
// left unwritten still fails the comparison (NaN, or random bits).
cudaError_t fill_output(void* dst, std::int64_t n, elem t, std::uint64_t seed, cudaStream_t s);
// Unpredictable bytes (workspaces, outputs before timed samples).
cudaError_t fill_random_bytes(void* dst, std::int64_t bytes, std::uint64_t seed, cudaStream_t s);
// SplitMix64 finalizer, the same on host and device.
__host__ __device__ inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// The canary byte at offset b of a guard region filled with `seed`: random
// per 8-byte word and per seed (a fresh seed before every call), so neither a
// neighbouring word nor an earlier call tells its value. The host computes the
// same bytes to verify a downloaded region against its own copy.
__host__ __device__ inline std::uint64_t canary_word(std::uint64_t seed, std::int64_t word) {
  return mix64(seed ^ mix64(static_cast<std::uint64_t>(word) + 0x5EEDull));
}
__host__ __device__ inline unsigned char canary_byte(std::uint64_t seed, std::int64_t b) {
  return static_cast<unsigned char>(canary_word(seed, b >> 3) >> (8 * (b & 7)));
}
// Pattern bytes for guard regions, and a count of bytes that differ from it.
cudaError_t fill_canary(void* dst, std::int64_t bytes, std::uint64_t seed, cudaStream_t s);
cudaError_t count_canary_damage(const void* src, std::int64_t bytes, std::uint64_t seed,
                                unsigned long long* d_count, cudaStream_t s);
// Order-sensitive 64-bit content hash (XOR of mixed (index, word) pairs).
cudaError_t content_hash(const void* src, std::int64_t bytes, unsigned long long* d_hash,
                         cudaStream_t s);
// Writes `bytes` of a buffer at least twice the L2 size, evicting the L2.
cudaError_t l2_flush(void* buf, std::int64_t bytes, unsigned int value, cudaStream_t s);
// Name of the flush kernel as CUPTI reports it (sample delimiter).
const char* l2_flush_kernel_name();
// An empty kernel (one block of one thread): the launch floor, measured with
// the timing clock at worker start.
cudaError_t empty_kernel(cudaStream_t s);
const char* empty_kernel_name();
// Bandwidth calibration: a float4 copy.
cudaError_t copy_kernel(void* dst, const void* src, std::int64_t bytes, cudaStream_t s);
// Matrix-rate calibration: every warp runs 4 bf16 m16n8k16 mma.sync per
// iteration (16384 FLOPs per warp per iteration).
cudaError_t mma_loop(float* out, int blocks, int threads_per_block, int iters, cudaStream_t s);
inline constexpr double mma_loop_flops_per_warp_iter = 4.0 * 2 * 16 * 8 * 16;

}  // namespace kopt::harness::kernels
