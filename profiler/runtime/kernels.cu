#include "runtime/kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace kopt::harness::kernels {
namespace {

constexpr int threads = 256;

int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

__device__ __forceinline__ unsigned long long splitmix64(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1), never exactly 0 (Box-Muller takes its log).
__device__ __forceinline__ double unit(unsigned long long seed, unsigned long long i) {
  return (static_cast<double>(splitmix64(seed ^ splitmix64(i)) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

__device__ void store(void* dst, std::int64_t i, elem t, double v) {
  switch (t) {
    case elem::float64: static_cast<double*>(dst)[i] = v; break;
    case elem::float32: static_cast<float*>(dst)[i] = static_cast<float>(v); break;
    case elem::float16: static_cast<__half*>(dst)[i] = __float2half_rn(static_cast<float>(v)); break;
    case elem::bfloat16: static_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(static_cast<float>(v)); break;
    case elem::float8_e4m3fn:
      static_cast<__nv_fp8_storage_t*>(dst)[i] = __nv_cvt_float_to_fp8(static_cast<float>(v), __NV_SATFINITE, __NV_E4M3);
      break;
    case elem::float8_e5m2:
      static_cast<__nv_fp8_storage_t*>(dst)[i] = __nv_cvt_float_to_fp8(static_cast<float>(v), __NV_SATFINITE, __NV_E5M2);
      break;
    case elem::int64: static_cast<long long*>(dst)[i] = static_cast<long long>(v); break;
    case elem::int32: static_cast<int*>(dst)[i] = static_cast<int>(v); break;
    case elem::int16: static_cast<short*>(dst)[i] = static_cast<short>(v); break;
    case elem::int8: static_cast<signed char*>(dst)[i] = static_cast<signed char>(v); break;
    case elem::uint8: static_cast<unsigned char*>(dst)[i] = static_cast<unsigned char>(v); break;
    case elem::boolean: static_cast<unsigned char*>(dst)[i] = v != 0.0 ? 1 : 0; break;
  }
}

__global__ void kopt_fill_generated(void* dst, std::int64_t n, elem t, gen_params p) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const auto ui = static_cast<unsigned long long>(i);
    double v = 0.0;
    switch (p.kind) {
      case gen::normal: {
        const double u1 = unit(p.seed, 2 * ui), u2 = unit(p.seed, 2 * ui + 1);
        v = p.a + p.b * sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);
        v *= p.scale;
        break;
      }
      case gen::uniform:
        v = (p.a + (p.b - p.a) * unit(p.seed, ui)) * p.scale;
        break;
      case gen::int_range: {
        const auto span = static_cast<unsigned long long>(p.ihi - p.ilo);
        const unsigned long long r = splitmix64(p.seed ^ splitmix64(ui));
        if (t == elem::int64) {
          static_cast<long long*>(dst)[i] = p.ilo + static_cast<long long>(span ? r % span : 0);
          continue;
        }
        v = static_cast<double>(p.ilo + static_cast<long long>(span ? r % span : 0));
        break;
      }
      case gen::constant:
        v = p.a;
        break;
    }
    store(dst, i, t, v);
  }
}

__global__ void kopt_fill_poison(void* dst, std::int64_t n, elem t, unsigned long long seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const unsigned long long r = splitmix64(seed ^ static_cast<unsigned long long>(i));
    switch (t) {
      case elem::float64: static_cast<unsigned long long*>(dst)[i] = 0x7FF8DEADBEEF0000ull; break;
      case elem::float32: static_cast<unsigned int*>(dst)[i] = 0x7FC0DEADu; break;
      case elem::float16: static_cast<unsigned short*>(dst)[i] = 0x7E5Au; break;
      case elem::bfloat16: static_cast<unsigned short*>(dst)[i] = 0x7FDAu; break;
      case elem::float8_e4m3fn: static_cast<unsigned char*>(dst)[i] = 0x7F; break;
      case elem::float8_e5m2: static_cast<unsigned char*>(dst)[i] = 0x7F; break;
      // Integer outputs have no NaN: a per-call random sentinel is as good,
      // because an unwritten element keeps a value the reference almost
      // never produces at that index.
      case elem::int64: static_cast<unsigned long long*>(dst)[i] = r; break;
      case elem::int32: static_cast<unsigned int*>(dst)[i] = static_cast<unsigned int>(r); break;
      case elem::int16: static_cast<unsigned short*>(dst)[i] = static_cast<unsigned short>(r); break;
      case elem::int8:
      case elem::uint8: static_cast<unsigned char*>(dst)[i] = static_cast<unsigned char>(r); break;
      case elem::boolean: static_cast<unsigned char*>(dst)[i] = 0xA7; break;  // neither 0 nor 1
    }
  }
}

__global__ void kopt_fill_output(void* dst, std::int64_t n, elem t, unsigned long long seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const unsigned long long r = splitmix64(seed ^ static_cast<unsigned long long>(i));
    const unsigned long long v = splitmix64(r);
    const bool poison = (r >> 63) != 0;  // one element in two, at positions only the seed tells
    switch (t) {
      case elem::float64:
        static_cast<unsigned long long*>(dst)[i] = poison ? 0x7FF8DEADBEEF0000ull : v;
        break;
      case elem::float32:
        static_cast<unsigned int*>(dst)[i] = poison ? 0x7FC0DEADu : static_cast<unsigned int>(v);
        break;
      case elem::float16:
        static_cast<unsigned short*>(dst)[i] = poison ? 0x7E5Au : static_cast<unsigned short>(v);
        break;
      case elem::bfloat16:
        static_cast<unsigned short*>(dst)[i] = poison ? 0x7FDAu : static_cast<unsigned short>(v);
        break;
      case elem::float8_e4m3fn:
      case elem::float8_e5m2:
        static_cast<unsigned char*>(dst)[i] = poison ? 0x7F : static_cast<unsigned char>(v);
        break;
      // Integers have no poison value: random bits everywhere (as fill_poison).
      case elem::int64:
        static_cast<unsigned long long*>(dst)[i] = v;
        break;
      case elem::int32:
        static_cast<unsigned int*>(dst)[i] = static_cast<unsigned int>(v);
        break;
      case elem::int16:
        static_cast<unsigned short*>(dst)[i] = static_cast<unsigned short>(v);
        break;
      case elem::int8:
      case elem::uint8:
        static_cast<unsigned char*>(dst)[i] = static_cast<unsigned char>(v);
        break;
      case elem::boolean:
        static_cast<unsigned char*>(dst)[i] = poison ? 0xA7 : static_cast<unsigned char>(v | 2);
        break;
    }
  }
}

__global__ void kopt_empty() {}

__global__ void kopt_fill_bytes(unsigned char* dst, std::int64_t bytes, unsigned long long seed, int canary) {
  const std::int64_t words = bytes / 8;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const unsigned long long v = canary ? splitmix64(seed) : splitmix64(seed ^ splitmix64(static_cast<unsigned long long>(i)));
    reinterpret_cast<unsigned long long*>(dst)[i] = v;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const unsigned long long tail = canary ? splitmix64(seed) : splitmix64(seed ^ 0xFFFFull);
    for (std::int64_t b = words * 8; b < bytes; ++b) dst[b] = static_cast<unsigned char>(tail >> (8 * (b % 8)));
  }
}

__global__ void kopt_canary_damage(const unsigned char* src, std::int64_t bytes,
                                   unsigned long long seed, unsigned long long* count) {
  unsigned long long bad = 0;
  for (std::int64_t b = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; b < bytes;
       b += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    bad += src[b] != canary_byte(seed, b);
  if (bad) atomicAdd(count, bad);
}

__global__ void kopt_content_hash(const unsigned char* src, std::int64_t bytes, unsigned long long* out) {
  unsigned long long h = 0;
  const std::int64_t words = bytes / 8;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    unsigned long long w;
    memcpy(&w, src + 8 * i, 8);
    h ^= splitmix64(w ^ splitmix64(static_cast<unsigned long long>(i) + 0x1234567ull));
  }
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (std::int64_t b = words * 8; b < bytes; ++b)
      h ^= splitmix64(static_cast<unsigned long long>(src[b]) ^ splitmix64(static_cast<unsigned long long>(b) << 20));
  // XOR is associative and commutative, so per-thread partials combine in any order.
  for (int o = 16; o > 0; o /= 2) h ^= __shfl_xor_sync(0xFFFFFFFFu, h, o);
  if ((threadIdx.x & 31) == 0 && h) atomicXor(out, h);
}

// Reads (does not write) a buffer of at least twice the L2: every line the
// previous sample left in L2, dirty ones included, is evicted here, outside
// the timed window, and what remains is clean. A writing flush leaves up to
// 60 MB of dirty lines whose write-back then lands inside the next timed
// kernel: measured on an H200, that made a 19 us copy read 11.9 % slower
// than Nsight Compute (which starts every kernel from clean caches). See
// docs/benchmarks.md for the figures of both variants.
__global__ void kopt_l2_flush(unsigned int* buf, std::int64_t words, unsigned int value) {
  unsigned int acc = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    acc ^= __ldcg(buf + i);
  // Never true for the flush buffer's contents (zeroed at allocation, value
  // is never 0xFFFFFFFF), but the compiler cannot know: the loads stay.
  if (acc == 0xFFFFFFFFu && value == 0xFFFFFFFFu) buf[0] = acc;
}

__global__ void kopt_copy(float4* dst, const float4* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// Matrix-rate calibration: bf16 mma.sync m16n8k16 with fp32 accumulation,
// four independent accumulators per warp for ILP. mma.sync is what candidate
// kernels written without wgmma reach; on Hopper wgmma peaks higher, which is
// why the datasheet rate stays the speed-of-light bar and this one is shown
// beside it (docs/methodology.md).
__global__ void kopt_mma_loop(float* out, int iters) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned a0 = 0x3f803f80u ^ threadIdx.x, a1 = 0x3f803f80u, a2 = 0x3f803f80u, a3 = 0x3f803f80u ^ blockIdx.x;
  unsigned b0 = 0x3c003c00u, b1 = 0x3c003c00u ^ threadIdx.x;
  float c[4][4] = {};
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  float acc = 0;
  for (int j = 0; j < 4; ++j) acc += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  if (acc == 1.2345e-30f) out[0] = acc;  // keeps the loop; never true in practice
#endif
}

}  // namespace

cudaError_t mma_loop(float* out, int blocks, int threads_per_block, int iters, cudaStream_t s) {
  kopt_mma_loop<<<blocks, threads_per_block, 0, s>>>(out, iters);
  return cudaGetLastError();
}

cudaError_t fill_generated(void* dst, std::int64_t n, elem t, const gen_params& p, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  kopt_fill_generated<<<blocks_for(n), threads, 0, s>>>(dst, n, t, p);
  return cudaGetLastError();
}

cudaError_t fill_poison(void* dst, std::int64_t n, elem t, std::uint64_t seed, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  kopt_fill_poison<<<blocks_for(n), threads, 0, s>>>(dst, n, t, seed);
  return cudaGetLastError();
}

cudaError_t fill_output(void* dst, std::int64_t n, elem t, std::uint64_t seed, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  kopt_fill_output<<<blocks_for(n), threads, 0, s>>>(dst, n, t, seed);
  return cudaGetLastError();
}

cudaError_t empty_kernel(cudaStream_t s) {
  kopt_empty<<<1, 1, 0, s>>>();
  return cudaGetLastError();
}

const char* empty_kernel_name() {
  return "kopt_empty";
}

cudaError_t fill_random_bytes(void* dst, std::int64_t bytes, std::uint64_t seed, cudaStream_t s) {
  if (bytes <= 0) return cudaSuccess;
  kopt_fill_bytes<<<blocks_for(bytes / 8 + 1), threads, 0, s>>>(static_cast<unsigned char*>(dst), bytes, seed, 0);
  return cudaGetLastError();
}

// Guard regions may start at any byte (right after a tensor of odd size),
// so the canary is written byte by byte: no misaligned wide stores.
__global__ void kopt_fill_canary(unsigned char* dst, std::int64_t bytes, unsigned long long seed) {
  for (std::int64_t b = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; b < bytes;
       b += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dst[b] = canary_byte(seed, b);
}

cudaError_t fill_canary(void* dst, std::int64_t bytes, std::uint64_t seed, cudaStream_t s) {
  if (bytes <= 0) return cudaSuccess;
  kopt_fill_canary<<<blocks_for(bytes), threads, 0, s>>>(static_cast<unsigned char*>(dst), bytes, seed);
  return cudaGetLastError();
}

cudaError_t count_canary_damage(const void* src, std::int64_t bytes, std::uint64_t seed,
                                unsigned long long* d_count, cudaStream_t s) {
  if (bytes <= 0) return cudaSuccess;
  kopt_canary_damage<<<blocks_for(bytes), threads, 0, s>>>(static_cast<const unsigned char*>(src), bytes, seed, d_count);
  return cudaGetLastError();
}

cudaError_t content_hash(const void* src, std::int64_t bytes, unsigned long long* d_hash, cudaStream_t s) {
  if (bytes <= 0) return cudaSuccess;
  kopt_content_hash<<<blocks_for(bytes / 8 + 1), threads, 0, s>>>(static_cast<const unsigned char*>(src), bytes, d_hash);
  return cudaGetLastError();
}

cudaError_t l2_flush(void* buf, std::int64_t bytes, unsigned int value, cudaStream_t s) {
  const std::int64_t words = bytes / 4;
  kopt_l2_flush<<<blocks_for(words), threads, 0, s>>>(static_cast<unsigned int*>(buf), words, value);
  return cudaGetLastError();
}

const char* l2_flush_kernel_name() { return "kopt_l2_flush"; }

cudaError_t copy_kernel(void* dst, const void* src, std::int64_t bytes, cudaStream_t s) {
  const std::int64_t n = bytes / 16;
  kopt_copy<<<132 * 16, threads, 0, s>>>(static_cast<float4*>(dst), static_cast<const float4*>(src), n);
  return cudaGetLastError();
}

}  // namespace kopt::harness::kernels
