// Runs the split-context kernels of configs/bench/paged_attention_decode_baseline.cu
// (PAD_SPLIT = 1) on the CPU through bench/hopper/emu/emu.h (one std::thread per CUDA
// thread, warp shuffles and cp.async groups modelled), block by block in a random order (so
// that any split may be the last to take a ticket), and compares every output element with a
// float64 reference and with a float32 model of the reference kernel
// (paged_attention_decode_reference.cu) rounded to the output type, under the config's
// tolerance. Each case runs twice on the same workspace (counters not refilled, partials
// re-randomized): the second call checks that the last split resets its counter.
// Cases come on stdin from pad_emu.py, one per line, with the launch plan evaluated from the
// candidate JSON:
//   dtype num_seqs ctx_len HQ HKV D lens_mode seed  gridx gridy gridz block smem bps
//   partial_bytes counter_bytes
// (dtype 0 bf16, 1 fp16; lens_mode 0: every seq_len = ctx_len, 1: random in [0, ctx_len]
// with ctx_len, 1 and 0 included).
//   g++ -std=c++20 -O2 -pthread -I bench/hopper/emu -I bench/hopper/pad/stub -DKOPT_EMU \
//       -DPAD_NT=128 -DPAD_TB=4 bench/hopper/pad/pad_emu.cpp -o /tmp/pad_emu
// With -DPAD_EMU_CL (and -I bench/hopper/pad/stub_cl before -I bench/hopper/pad/stub, no
// bench/hopper/emu) it runs on stub_cl/emu.h instead: the blocks of one cluster (the launch's
// cluster x, the last field of a case line) run together with their own shared memory, so the
// PAD_CLUSTER = 1 merge through DSMEM is exercised; clusters in a random order.
//   g++ -std=c++20 -O2 -pthread -I bench/hopper/pad/stub_cl -I bench/hopper/pad/stub -DKOPT_EMU \
//       -DPAD_EMU_CL -DPAD_CLUSTER=1 -DPAD_NT=256 -DPAD_TB=4 bench/hopper/pad/pad_emu.cpp \
//       -o /tmp/pad_cl
// Exit status 0 when every case passes. A check of the kernel's indexing, control flow and
// arithmetic against that model, not of the GPU (memory ordering of the ticket is not
// modelled: blocks run one after another).
#define PAD_SPLIT 1
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <sstream>
#include <string>

#include "../../../configs/bench/paged_attention_decode_baseline.cu"

namespace {

#ifdef PAD_EMU_CL
// Clusters of cx consecutive blocks along x, in a random order, each cluster's blocks at once.
template <class F>
void launch_clusters(dim3e grid, unsigned cx, int threads, unsigned shared_bytes, std::mt19937& rng,
                     F&& body) {
  if (shared_bytes > kSmemBytes || grid.x % cx != 0) {
    std::fprintf(stderr, "shared_bytes %u > %u or grid x %u not a multiple of cluster %u\n",
                 shared_bytes, kSmemBytes, grid.x, cx);
    std::abort();
  }
  g_smem_bytes = shared_bytes;
  gridDim = grid;
  blockDim = {static_cast<unsigned>(threads), 1, 1};
  std::vector<dim3e> order;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; x += cx) order.push_back({x, y, z});
  std::shuffle(order.begin(), order.end(), rng);
  for (const dim3e c0 : order) run_cluster(c0, cx, threads, body);
}
#else
// emu.h's launch(), with the blocks in a random order.
template <class F>
void launch_shuffled(dim3e grid, int threads, unsigned shared_bytes, std::mt19937& rng, F&& body) {
  if (shared_bytes > sizeof smem) {
    std::fprintf(stderr, "shared_bytes %u > %zu\n", shared_bytes, sizeof smem);
    std::abort();
  }
  g_smem_bytes = shared_bytes;
  gridDim = grid;
  blockDim = {static_cast<unsigned>(threads), 1, 1};
  std::vector<dim3e> order;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) order.push_back({x, y, z});
  std::shuffle(order.begin(), order.end(), rng);
  for (const dim3e blk : order) {
    std::memset(smem, 0xA5, sizeof smem);
    std::barrier<> bb(threads);
    std::vector<std::unique_ptr<std::barrier<>>> wb;
    for (int w = 0; w < threads / 32; ++w) {
      wb.push_back(std::make_unique<std::barrier<>>(32));
      g_warp_bar[w] = wb.back().get();
    }
    g_block_bar = &bb;
    sync_reset();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        threadIdx = {static_cast<unsigned>(t), 0, 0};
        blockIdx = blk;
        std::vector<std::vector<std::function<void()>>> groups;
        t_groups = &groups;
        t_open.clear();
        body();
        if (!groups.empty() || !t_open.empty()) {
          std::fprintf(stderr, "emu: cp.async copies not waited for at exit\n");
          std::abort();
        }
      });
    for (auto& th : ts) th.join();
  }
}
#endif

template <class T>
float tf(T v);
template <>
float tf(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
float tf(__half v) {
  return __half2float(v);
}
template <class T>
T fromf(float f);
template <>
__nv_bfloat16 fromf(float f) {
  return __float2bfloat16(f);
}
template <>
__half fromf(float f) {
  return __float2half_rn(f);
}

struct Case {
  int dtype, S, ctx, HQ, HKV, D, lens_mode;
  unsigned seed;
  unsigned gx, gy, gz;
  int block;
  unsigned smem;
  int bps;
  long long part_bytes, cnt_bytes;
  unsigned cx = 1;  // the launch's cluster x (1: no cluster)
};

template <class T>
bool run_case(const Case& c) {
  std::mt19937 rng(c.seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int BSZ = 16, mb = (c.ctx + 15) / 16, nblocks = mb * c.S + 16, G = c.HQ / c.HKV;
  const double atol = c.dtype == 0 ? 0.01 : 0.002, rtol = c.dtype == 0 ? 0.02 : 0.005;
  std::vector<T> q(static_cast<size_t>(c.S) * c.HQ * c.D),
      k(static_cast<size_t>(nblocks) * c.HKV * c.D * BSZ), v(k.size()), out(q.size());
  for (auto& x : q) x = fromf<T>(nd(rng));
  for (auto& x : k) x = fromf<T>(nd(rng));
  for (auto& x : v) x = fromf<T>(nd(rng));
  std::vector<int> perm(nblocks);
  for (int i = 0; i < nblocks; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int> bt(static_cast<size_t>(c.S) * mb), lens(c.S, c.ctx);
  for (size_t i = 0; i < bt.size(); ++i) bt[i] = perm[i];
  if (c.lens_mode == 1) {
    std::uniform_int_distribution<int> ld(0, c.ctx);
    for (int s = 0; s < c.S; ++s) lens[s] = ld(rng);
    lens[0] = c.ctx;
    if (c.S > 1) lens[1] = 1;
    if (c.S > 2) lens[2] = 0;
  }
  // The blocks past a sequence's end are never read for it: poison the V (and K) of the slots
  // past each sequence's length in its last block with NaN (the kernel must not let them in).
  for (int s = 0; s < c.S; ++s) {
    const int n = lens[s];
    if (n % 16 == 0 || n == 0) continue;
    const long long blk = bt[static_cast<size_t>(s) * mb + n / 16];
    // another sequence may share this block (it never does here: distinct blocks)
    for (int h = 0; h < c.HKV; ++h)
      for (int d = 0; d < c.D; ++d)
        for (int t = n % 16; t < 16; ++t) {
          const size_t base = (static_cast<size_t>(blk) * c.HKV + h) * c.D * BSZ;
          v[base + static_cast<size_t>(d) * BSZ + t] = fromf<T>(NAN);
          k[base + (static_cast<size_t>(d / 8) * BSZ + t) * 8 + d % 8] = fromf<T>(NAN);
        }
  }
  std::vector<float> part(static_cast<size_t>(c.part_bytes / 4));
  std::vector<int> cnt(static_cast<size_t>(c.cnt_bytes / 4), 0);

  // float64 reference and float32 model of the reference kernel
  std::vector<double> ref(q.size());
  std::vector<float> ref32(q.size());
  for (int s = 0; s < c.S; ++s)
    for (int hq = 0; hq < c.HQ; ++hq) {
      const int kvh = hq / G, n = lens[s];
      const size_t o = (static_cast<size_t>(s) * c.HQ + hq) * c.D;
      if (n <= 0) {
        for (int d = 0; d < c.D; ++d) ref[o + d] = ref32[o + d] = 0;
        continue;
      }
      std::vector<double> sc(n);
      std::vector<float> sc32(n);
      auto kidx = [&](int p, int d) {
        const long long blk = bt[static_cast<size_t>(s) * mb + p / 16];
        return (((blk * c.HKV + kvh) * (c.D / 8) + d / 8) * 16 + p % 16) * 8 + d % 8;
      };
      auto vidx = [&](int p, int d) {
        const long long blk = bt[static_cast<size_t>(s) * mb + p / 16];
        return ((blk * c.HKV + kvh) * c.D + d) * 16 + p % 16;
      };
      for (int p = 0; p < n; ++p) {
        double a = 0;
        float a32 = 0;
        for (int d = 0; d < c.D; ++d) {
          a += static_cast<double>(tf(q[o + d])) * tf(k[kidx(p, d)]);
          a32 = std::fma(tf(q[o + d]), tf(k[kidx(p, d)]), a32);
        }
        sc[p] = a / std::sqrt(static_cast<double>(c.D));
        sc32[p] = a32 / std::sqrt(static_cast<float>(c.D));
      }
      const double m = *std::max_element(sc.begin(), sc.end());
      float m32 = sc32[0];
      for (int p = 1; p < n; ++p) m32 = std::fmax(m32, sc32[p]);
      double sum = 0;
      float sum32 = 0;
      for (int p = 0; p < n; ++p) {
        sum += std::exp(sc[p] - m);
        sum32 += std::exp(sc32[p] - m32);
      }
      for (int d = 0; d < c.D; ++d) {
        double a = 0;
        float a32 = 0;
        for (int p = 0; p < n; ++p) {
          a += std::exp(sc[p] - m) / sum * tf(v[vidx(p, d)]);
          a32 = std::fma(std::exp(sc32[p] - m32) / sum32, tf(v[vidx(p, d)]), a32);
        }
        ref[o + d] = a;
        ref32[o + d] = tf(fromf<T>(a32));
      }
    }

  bool ok = true;
  for (int call = 0; call < 2; ++call) {
    for (auto& x : out) x = fromf<T>(NAN);
    std::uniform_int_distribution<unsigned> bd(0, 255);
    for (auto& x : part) {  // random bytes, as the worker's refill
      unsigned char b[4] = {
          static_cast<unsigned char>(bd(rng)), static_cast<unsigned char>(bd(rng)),
          static_cast<unsigned char>(bd(rng)), static_cast<unsigned char>(bd(rng))};
      std::memcpy(&x, b, 4);
    }
    auto body = [&] {
      if constexpr (sizeof(T) == 2 && std::is_same_v<T, __nv_bfloat16>)
        paged_attention_decode_split_bf16(q.data(), k.data(), v.data(), bt.data(), lens.data(),
                                          out.data(), c.HQ, c.HKV, c.D, mb, c.bps, part.data(),
                                          cnt.data());
      else
        paged_attention_decode_split_fp16(q.data(), k.data(), v.data(), bt.data(), lens.data(),
                                          out.data(), c.HQ, c.HKV, c.D, mb, c.bps, part.data(),
                                          cnt.data());
    };
#ifdef PAD_EMU_CL
    launch_clusters({c.gx, c.gy, c.gz}, c.cx, c.block, c.smem, rng, body);
#else
    if (c.cx != 1) {
      std::fprintf(stderr, "a cluster launch needs the -DPAD_EMU_CL build\n");
      std::abort();
    }
    launch_shuffled({c.gx, c.gy, c.gz}, c.block, c.smem, rng, body);
#endif
    double worst = 0, worst32 = 0;
    size_t bad = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const double g = tf(out[i]);
      const double r = (std::fabs(g - ref[i])) / (atol + rtol * std::fabs(ref[i]));
      const double r32 = (std::fabs(g - ref32[i])) / (atol + rtol * std::fabs(ref32[i]));
      if (!(r <= 1.0) || !(r32 <= 1.0)) ++bad;
      worst = std::max(worst, std::isnan(r) ? 1e30 : r);
      worst32 = std::max(worst32, std::isnan(r32) ? 1e30 : r32);
    }
    const bool cnt_zero = std::all_of(cnt.begin(), cnt.end(), [](int x) { return x == 0; });
    std::printf(
        "  call %d: %zu / %zu elements out of tolerance; worst err/(atol+rtol|ref|) %.4f vs fp64, "
        "%.4f vs "
        "fp32 reference model; counters %s\n",
        call, bad, out.size(), worst, worst32, cnt_zero ? "reset" : "NOT reset");
    ok = ok && bad == 0 && cnt_zero;
  }
  return ok;
}

}  // namespace

int main() {
  std::string line;
  int fails = 0, n = 0;
  while (std::getline(std::cin, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    Case c{};
    std::string name;
    is >> name >> c.dtype >> c.S >> c.ctx >> c.HQ >> c.HKV >> c.D >> c.lens_mode >> c.seed >>
        c.gx >> c.gy >> c.gz >> c.block >> c.smem >> c.bps >> c.part_bytes >> c.cnt_bytes;
    if (!(is >> c.cx)) c.cx = 1;
    if (c.block != PAD_NT) {
      std::fprintf(stderr, "%s: block %d but built with PAD_NT %d\n", name.c_str(), c.block,
                   PAD_NT);
      return 2;
    }
    std::printf(
        "%s: %s S %d ctx %d HQ %d HKV %d D %d lens %s, grid (%u, %u, %u) x %d, smem %u, bps %d\n",
        name.c_str(), c.dtype ? "fp16" : "bf16", c.S, c.ctx, c.HQ, c.HKV, c.D,
        c.lens_mode ? "random" : "= ctx", c.gx, c.gy, c.gz, c.block, c.smem, c.bps);
    std::fflush(stdout);
    const bool ok = c.dtype == 0 ? run_case<__nv_bfloat16>(c) : run_case<__half>(c);
    std::printf("  %s\n", ok ? "PASS" : "FAIL");
    std::fflush(stdout);
    fails += !ok;
    ++n;
  }
  std::printf("%d / %d cases pass\n", n - fails, n);
  return fails ? 1 : 0;
}
