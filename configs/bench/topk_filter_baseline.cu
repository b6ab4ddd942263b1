// topk_filter baseline (kopt bench, optimized kernel)
//
// What: per row of fp32 logits, thr = the min(k, vocab)-th largest value
// (duplicates counted); out = x where x >= thr (ties kept, exact copy), else -inf.
//
// Exact radix select on order-preserving 32-bit keys (negatives: all bits
// flipped; positives: sign bit set). Two paths, chosen by the launch (config):
//
// Short rows (vocab <= 16 * blockDim, here 2048..4215), persistent blocks:
// - grid = min(rows, 132 * (1024 / blockDim)) (all blocks resident on an H200);
//   block b handles rows b, b + grid, ... Rows are prefetched into shared
//   memory with cp.async (16 B .cg when the row is 16-byte aligned, 4 B
//   otherwise), `nstages` deep (2 for vocab > 2048: the next row streams in
//   while the current one is selected, so DRAM never waits for the select;
//   1 for vocab <= 2048, where every row has its own resident block).
//   Every thread copies exactly the elements it later reads, so the data
//   hand-off needs no barrier (cp.async.wait_group only).
// - Each thread holds 16 values in registers. Pass 1: 12-bit histogram
//   (sign, exponent, 3 mantissa bits; 4096 shared bins, shared atomics); a
//   block suffix scan finds the bin b* holding the k-th largest and the rank
//   kk inside it. The few values of b* (about 25..45 for N(0,1) rows of 2048 or
//   4096) are compacted into a shared list and the kk-th largest is found by
//   ranking them (one candidate per thread, compare against the list). If b*
//   holds more than blockDim values (heavy ties, odd distributions), two more
//   radix passes of 10 + 10 bits over the registers finish it (exact anyway).
// - 5 barriers per row on the common path; the histogram is cleared in a
//   barrier window that exists anyway; the mask is a float compare (x >= thr),
//   so -0.0 / +0.0 behave as in the reference; stores are st.global.cs.
//
// Long rows (vocab > 8192: the 152K-vocabulary single-row decode shapes):
// - A cluster of 8 blocks x 1024 threads per row (8 SMs instead of 1); each
//   block keeps its eighth of the row in registers (float4 __ldcs, one DRAM
//   read and one write per element). Three radix passes (12 + 10 + 10 bits):
//   every block builds its local histogram, a cluster barrier, then every
//   block sums the 8 histograms through distributed shared memory (mapa +
//   ld.shared::cluster) and runs the same suffix scan, so all blocks agree
//   on the digit without another exchange. A last cluster barrier keeps each
//   block's shared memory alive until the others have read it.
// Chunks longer than the registers hold fall back to streaming the row from
// L2 in each pass (not reached by the config's workloads).
//
// Measured on H200 (2026-12-03, driver 580.159.04, `kopt eval --seeds 2`): topk_filter: 24.4 % of
// speed of light weighted over 8 shapes, 8/8 correct (the previous kernel: 12.9 %); details in
// knowledge_base/references/topk-filter.md and bench/hopper/topk/results/2026-12-03-b/.
// After that run, one line changed: the k <= 0 branch (no workload reaches it: top_k = 50) had
// the 4-byte path's slot test on 16-byte rows; it now uses each path's own test.

#define SQ 4  // float4 groups (16 values) per thread, short path
#define LQ 5  // float4 groups (20 values) per thread, cluster path

__device__ __forceinline__ unsigned int key_of(float f) {
  const unsigned int u = __float_as_uint(f);
  return u ^ (static_cast<unsigned int>(static_cast<int>(u) >> 31) | 0x80000000u);
}
__device__ __forceinline__ float float_of(unsigned int k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
__device__ __forceinline__ unsigned int smem_u32(const void* p) {
  return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(unsigned int dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(unsigned int dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}
__device__ __forceinline__ unsigned int cluster_rank() {
  unsigned int r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned int cluster_size() {
  unsigned int r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ int ld_dsmem(unsigned int local_addr, unsigned int rank) {
  unsigned int ra;
  int v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(local_addr), "r"(rank));
  asm volatile("ld.shared::cluster.u32 %0, [%1];\n" : "=r"(v) : "r"(ra) : "memory");
  return v;
}

// After a histogram: find the bin (from the top) holding the kk-th largest.
// Every thread calls it with the same kk; every thread leaves with bin, the
// rank inside the bin and the bin's count (from *res). Barriers: 2.
// Thread t owns bins [t*bpt, (t+1)*bpt): higher threads own larger keys.
__device__ __forceinline__ int4 pick_bin(const int* hist, int nbins, int kk, int* scratch,
                                         int4* res) {
  const int nt = blockDim.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int bpt = (nbins + nt - 1) / nt;
  const int lo = min(tid * bpt, nbins), hi = min(lo + bpt, nbins);
  const bool vec = (bpt & 3) == 0;  // nbins, nt powers of two: then hi - lo is bpt or 0
  int s = 0;
  if (vec) {
    const int4* h4 = reinterpret_cast<const int4*>(hist);
    for (int g = lo >> 2; g < (hi >> 2); ++g) {
      const int4 v = h4[g];
      s += v.x + v.y + v.z + v.w;
    }
  } else {
    for (int b = lo; b < hi; ++b) s += hist[b];
  }
  int incl = s;  // inclusive suffix sum within the warp (higher lanes = larger keys)
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_down_sync(0xffffffffu, incl, o);
    if (lane + o < 32) incl += y;
  }
  if (lane == 0) scratch[warp] = incl;
  __syncthreads();
  int above = incl - s;
  for (int w = warp + 1; w < (nt >> 5); ++w) above += scratch[w];
  if (s > 0 && above < kk && kk <= above + s) {
    int acc = above, bin = lo, cnt = 0;
    if (vec) {
      const int4* h4 = reinterpret_cast<const int4*>(hist);
      for (int g = (hi >> 2) - 1; g >= (lo >> 2); --g) {
        const int4 v = h4[g];
        const int gs = v.x + v.y + v.z + v.w;
        if (acc + gs >= kk) {
          if (acc + v.w >= kk) {
            bin = 4 * g + 3;
            cnt = v.w;
            break;
          }
          acc += v.w;
          if (acc + v.z >= kk) {
            bin = 4 * g + 2;
            cnt = v.z;
            break;
          }
          acc += v.z;
          if (acc + v.y >= kk) {
            bin = 4 * g + 1;
            cnt = v.y;
            break;
          }
          acc += v.y;
          bin = 4 * g;
          cnt = v.x;
          break;
        }
        acc += gs;
      }
    } else {
      for (int b = hi - 1; b >= lo; --b) {
        const int h = hist[b];
        if (acc + h >= kk) {
          bin = b;
          cnt = h;
          break;
        }
        acc += h;
      }
    }
    *res = make_int4(bin, kk - acc, cnt, 0);
  }
  __syncthreads();
  return *res;
}

// Element index of register slot (q, j): 16-byte path: float4 number q*nt+tid;
// scalar path: value number (4q+j)*nt+tid (coalesced either way).
__device__ __forceinline__ int elem_index(bool vec, int q, int j, int nt, int tid) {
  return vec ? 4 * (q * nt + tid) + j : (4 * q + j) * nt + tid;
}

extern "C" __global__ void __launch_bounds__(1024)
    topk_filter_baseline(const float* __restrict__ logits, float* __restrict__ out, int rows,
                         int vocab, int top_k, int nstages) {
  extern __shared__ __align__(16) unsigned char dyn[];
  __shared__ int scratch[32];
  __shared__ int4 pres;
  __shared__ unsigned int tres;
  __shared__ int cnt;
  const int nt = blockDim.x, tid = threadIdx.x;
  const int V = vocab;
  const int k = min(top_k, vocab);
  const float NEG_INF = -__int_as_float(0x7f800000);
  const bool ptr_al =
      ((reinterpret_cast<unsigned long long>(logits) | reinterpret_cast<unsigned long long>(out)) &
       15ull) == 0;
  const unsigned int csz = cluster_size();

  if (csz == 1 && V <= nt * 4 * SQ) {
    // ------------------------------------------------------------------ short rows
    int* hist = reinterpret_cast<int*>(dyn);                            // 4096 bins
    unsigned int* list = reinterpret_cast<unsigned int*>(dyn + 16384);  // nt candidates
    float* stage0 = reinterpret_cast<float*>(dyn + 16384 + 4 * nt);
    const int stride = 4 * ((V + 3) >> 2);  // floats per stage (16-byte multiple)
    const int S = max(1, min(nstages, 3));
    const bool vec = (V & 3) == 0 && ptr_al;
    const int nv4 = V >> 2;
    // Valid register slots of this thread: slot validity is then a compare
    // with an immediate, not a live element index per slot (register pressure).
    const int c4 = max(0, (nv4 - tid + nt - 1) / nt);
    const int c1 = max(0, (V - tid + nt - 1) / nt);
    const int G = gridDim.x;
    for (int b = tid; b < 4096; b += nt) hist[b] = 0;
    if (tid == 0) cnt = 0;
    __syncthreads();

    auto issue = [&](int r, int st) {
      if (r < rows) {
        const float* src = logits + static_cast<long long>(r) * V;
        float* dst = stage0 + st * stride;
#pragma unroll
        for (int q = 0; q < SQ; ++q) {
          if (vec) {
            const int i4 = q * nt + tid;
            if (q < c4) cp_async16(smem_u32(dst + 4 * i4), src + 4 * i4);
          } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const int i = (4 * q + j) * nt + tid;
              if (4 * q + j < c1) cp_async4(smem_u32(dst + i), src + i);
            }
          }
        }
      }
      cp_async_commit();  // possibly empty: keeps the group count uniform
    };

    int row = blockIdx.x;
    for (int s = 0; s < S - 1; ++s) issue(row + s * G, s);
    for (int it = 0; row < rows; ++it, row += G) {
      issue(row + (S - 1) * G, (it + S - 1) % S);
      if (S == 1)
        cp_async_wait<0>();
      else if (S == 2)
        cp_async_wait<1>();
      else
        cp_async_wait<2>();
      const float* stg = stage0 + (it % S) * stride;
      float v[4 * SQ];
#pragma unroll
      for (int q = 0; q < SQ; ++q) {
        if (vec) {
          const int i4 = q * nt + tid;
          float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
          if (q < c4) f = *reinterpret_cast<const float4*>(stg + 4 * i4);
          v[4 * q] = f.x;
          v[4 * q + 1] = f.y;
          v[4 * q + 2] = f.z;
          v[4 * q + 3] = f.w;
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int i = (4 * q + j) * nt + tid;
            v[4 * q + j] = 4 * q + j < c1 ? stg[i] : 0.f;
          }
        }
      }
      float* outr = out + static_cast<long long>(row) * V;
      if (k <= 0) {  // nothing kept (not reached with k >= 1)
#pragma unroll
        for (int q = 0; q < SQ; ++q)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int i = elem_index(vec, q, j, nt, tid);
            if (vec ? q < c4 : 4 * q + j < c1) outr[i] = NEG_INF;
          }
        continue;
      }
      // pass 1: 12-bit digit
#pragma unroll
      for (int q = 0; q < SQ; ++q)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if ((vec ? q < c4 : 4 * q + j < c1)) atomicAdd(&hist[key_of(v[4 * q + j]) >> 20], 1);
      __syncthreads();
      const int4 p0 = pick_bin(hist, 4096, k, scratch, &pres);
      for (int b = tid; b < 4096; b += nt) hist[b] = 0;  // all reads of hist are done
      const unsigned int bstar = static_cast<unsigned int>(p0.x);
      unsigned int thrkey;
      if (p0.z <= nt) {
        // compact the values of bin b* and rank them
#pragma unroll
        for (int q = 0; q < SQ; ++q)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            if ((vec ? q < c4 : 4 * q + j < c1)) {
              const unsigned int key = key_of(v[4 * q + j]);
              if ((key >> 20) == bstar) list[atomicAdd(&cnt, 1)] = key;
            }
        __syncthreads();
        if (tid == 0) cnt = 0;
        const int c = p0.z, kk = p0.y;
        if (tid < c) {
          const unsigned int my = list[tid];
          int gt = 0, ge = 0;
          for (int j = 0; j < c; ++j) {
            const unsigned int u = list[j];
            gt += u > my ? 1 : 0;
            ge += u >= my ? 1 : 0;
          }
          if (gt < kk && kk <= ge) tres = my;  // every holder of the value writes the same
        }
        __syncthreads();
        thrkey = tres;
      } else {
        // many values in b*: two more radix passes (10 + 10 bits) over the registers
        unsigned int prefix = bstar << 20, mask = 0xfff00000u;
        int kk = p0.y;
        for (int p = 0; p < 2; ++p) {
          const int sh = p == 0 ? 10 : 0;
          __syncthreads();  // the cleared histogram is visible
#pragma unroll
          for (int q = 0; q < SQ; ++q)
#pragma unroll
            for (int j = 0; j < 4; ++j)
              if ((vec ? q < c4 : 4 * q + j < c1)) {
                const unsigned int key = key_of(v[4 * q + j]);
                if ((key & mask) == prefix) atomicAdd(&hist[(key >> sh) & 1023u], 1);
              }
          __syncthreads();
          const int4 pr = pick_bin(hist, 1024, kk, scratch, &pres);
          for (int b = tid; b < 1024; b += nt) hist[b] = 0;
          prefix |= static_cast<unsigned int>(pr.x) << sh;
          mask |= 1023u << sh;
          kk = pr.y;
        }
        __syncthreads();  // cleared histogram visible before the next row
        thrkey = prefix;
      }
      const float thr = float_of(thrkey);
#pragma unroll
      for (int q = 0; q < SQ; ++q) {
        if (vec) {
          const int i4 = q * nt + tid;
          if (q < c4) {
            float4 o;
            o.x = v[4 * q] >= thr ? v[4 * q] : NEG_INF;
            o.y = v[4 * q + 1] >= thr ? v[4 * q + 1] : NEG_INF;
            o.z = v[4 * q + 2] >= thr ? v[4 * q + 2] : NEG_INF;
            o.w = v[4 * q + 3] >= thr ? v[4 * q + 3] : NEG_INF;
            __stcs(reinterpret_cast<float4*>(outr) + i4, o);
          }
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int i = (4 * q + j) * nt + tid;
            if (4 * q + j < c1) __stcs(outr + i, v[4 * q + j] >= thr ? v[4 * q + j] : NEG_INF);
          }
        }
      }
    }
    cp_async_wait<0>();
    return;
  }

  // -------------------------------------------------------------------- cluster path
  int* h0 = reinterpret_cast<int*>(dyn);  // 4096 bins (pass 1)
  int* h1 = h0 + 4096;                    // 1024 bins (pass 2)
  int* h2 = h1 + 1024;                    // 1024 bins (pass 3)
  int* merged = h2 + 1024;                // 4096 bins
  const unsigned int rank = cluster_rank();
  const long long row = blockIdx.x / csz;
  const int per = (((V + static_cast<int>(csz) - 1) / static_cast<int>(csz)) + 3) & ~3;
  const int c0 = static_cast<int>(rank) * per;
  const int n = max(0, min(per, V - c0));
  const float* xr = logits + row * V + c0;
  float* outr = out + row * V + c0;
  const bool vec = (V & 3) == 0 && ptr_al;
  const int nv4 = n >> 2;  // n % 4 == 0 when vec (per and V are multiples of 4)
  const bool inreg = n <= nt * 4 * LQ;
  for (int b = tid; b < 6144; b += nt) h0[b] = 0;
  float v[4 * LQ];
  if (inreg) {
#pragma unroll
    for (int q = 0; q < LQ; ++q) {
      if (vec) {
        const int i4 = q * nt + tid;
        float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
        if (i4 < nv4) f = __ldcs(reinterpret_cast<const float4*>(xr) + i4);
        v[4 * q] = f.x;
        v[4 * q + 1] = f.y;
        v[4 * q + 2] = f.z;
        v[4 * q + 3] = f.w;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int i = (4 * q + j) * nt + tid;
          v[4 * q + j] = i < n ? __ldcs(xr + i) : 0.f;
        }
      }
    }
  }
  __syncthreads();  // cleared histograms visible
  unsigned int prefix = 0, mask = 0;
  int kk = k;
#pragma unroll 1
  for (int p = 0; p < 3; ++p) {
    int* hist = p == 0 ? h0 : (p == 1 ? h1 : h2);
    const int nb = p == 0 ? 4096 : 1024, sh = p == 0 ? 20 : (p == 1 ? 10 : 0);
    if (k > 0) {
      if (inreg) {
#pragma unroll
        for (int q = 0; q < LQ; ++q)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            if (elem_index(vec, q, j, nt, tid) < n) {
              const unsigned int key = key_of(v[4 * q + j]);
              if ((key & mask) == prefix)
                atomicAdd(&hist[(key >> sh) & static_cast<unsigned int>(nb - 1)], 1);
            }
      } else {
        for (int i = tid; i < n; i += nt) {
          const unsigned int key = key_of(xr[i]);
          if ((key & mask) == prefix)
            atomicAdd(&hist[(key >> sh) & static_cast<unsigned int>(nb - 1)], 1);
        }
      }
    }
    cluster_sync_all();  // every block's histogram of this pass is complete
    if (k > 0) {
      const unsigned int ha = smem_u32(hist);
      for (int b = tid; b < nb; b += nt) {
        int s = 0;
        for (unsigned int r = 0; r < csz; ++r) s += ld_dsmem(ha + 4u * b, r);
        merged[b] = s;
      }
      __syncthreads();
      const int4 pr = pick_bin(merged, nb, kk, scratch, &pres);
      prefix |= static_cast<unsigned int>(pr.x) << sh;
      mask |= static_cast<unsigned int>(nb - 1) << sh;
      kk = pr.y;
    }
  }
  const float thr = k > 0 ? float_of(prefix) : __int_as_float(0x7f800000);  // k <= 0: nothing kept
  if (inreg) {
#pragma unroll
    for (int q = 0; q < LQ; ++q) {
      if (vec) {
        const int i4 = q * nt + tid;
        if (i4 < nv4) {
          float4 o;
          o.x = v[4 * q] >= thr && k > 0 ? v[4 * q] : NEG_INF;
          o.y = v[4 * q + 1] >= thr && k > 0 ? v[4 * q + 1] : NEG_INF;
          o.z = v[4 * q + 2] >= thr && k > 0 ? v[4 * q + 2] : NEG_INF;
          o.w = v[4 * q + 3] >= thr && k > 0 ? v[4 * q + 3] : NEG_INF;
          __stcs(reinterpret_cast<float4*>(outr) + i4, o);
        }
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int i = (4 * q + j) * nt + tid;
          if (i < n) __stcs(outr + i, v[4 * q + j] >= thr && k > 0 ? v[4 * q + j] : NEG_INF);
        }
      }
    }
  } else {
    for (int i = tid; i < n; i += nt) {
      const float x = xr[i];
      outr[i] = x >= thr && k > 0 ? x : NEG_INF;
    }
  }
  cluster_sync_all();  // no block leaves while another may still read its histograms
}
