// Runs the kernels of the decode-attention-split-kv reference (the stream-K draft of
// 2026-12-03, installed in knowledge_base/references/decode-attention-split-kv) on the CPU
// through bench/hopper/emu/emu.h's model of the PTX primitives (plus movmatrix, below), on small
// shapes that exercise the stream-K split (block ranges that start and end inside a (sequence, kv
// head) pair, pairs spread over many blocks, empty blocks), partial 16-key units and G = 1 .. 8,
// and compares every output with a float64 reference under the operator's tolerance (atol 0.01,
// rtol 0.02). A check of the kernels' indexing and control flow, not of the GPU.
//
//   g++ -std=c++20 -O2 -pthread -I bench/hopper/emu -I bench/hopper/emu/stub -DKOPT_EMU \
//       bench/hopper/decode/decode_emu.cpp -o /tmp/decode_emu && /tmp/decode_emu
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

#include "emu.h"

// movmatrix.m8n8.trans.b16: lane l holds row l / 4, columns 2 (l % 4), + 1 (low half first)
// of X and receives the same positions of X^T.
inline unsigned movmatrix_t(unsigned x) {
  const int t = tid_(), w0 = t & ~31, l = t & 31;
  g_slot[t].u[0] = x;
  warp_sync();
  unsigned r = 0;
  for (int h = 0; h < 2; ++h) {
    const int row = 2 * (l % 4) + h, col = l / 4;  // X[row][col] = X^T[col][row]
    const unsigned u = g_slot[w0 + 4 * row + col / 2].u[0];
    const unsigned e = (col % 2) ? (u >> 16) : (u & 0xffffu);
    r |= e << (16 * h);
  }
  warp_sync();
  return r;
}
inline unsigned __shfl_sync(unsigned, unsigned v, int src) {
  const int t = tid_();
  g_slot[t].u[0] = v;
  warp_sync();
  const unsigned r = g_slot[(t & ~31) | (src & 31)].u[0];
  warp_sync();
  return r;
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long v = (unsigned long long)y << 32 | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
inline float __bfloat162float(__nv_bfloat16 b) {
  return bf2f(b.v);
}
inline __nv_bfloat16 __float2bfloat16(float f) {
  return {f2bf(f)};
}
inline int min(int a, int b) {
  return a < b ? a : b;
}
using std::fmaxf;

#include "../../../knowledge_base/references/decode-attention-split-kv/decode-attention-split-kv.cu"

namespace {
std::vector<__nv_bfloat16> randn(size_t n, std::mt19937& g) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x.v = f2bf(d(g));
  return v;
}

bool run(int batch, int seqlen, int kvh, int group, int blocks_param, unsigned seed,
         bool rows = false) {
  std::mt19937 g(seed);
  const int heads = kvh * group;
  auto q = randn((size_t)batch * heads * HD, g);
  auto kc = randn((size_t)batch * seqlen * kvh * HD, g);
  auto vc = randn((size_t)batch * seqlen * kvh * HD, g);
  // the operator.json expressions
  const long long units = (long long)batch * kvh * ((seqlen + 15) / 16);
  const long long runits = (long long)batch * ((seqlen + 15) / 16);
  const int nb = rows ? (int)std::min<long long>(blocks_param, (runits + 1) / 2)
                      : (int)std::min<long long>(blocks_param, (units + 2 * NW - 1) / (2 * NW));
  const int sl = nb / (rows ? batch : batch * kvh) + 2;
  std::vector<float> acc((size_t)batch * kvh * sl * group * HD, NAN),
      ml((size_t)batch * kvh * sl * group * 2, NAN);
  std::vector<__nv_bfloat16> out(q.size(), __nv_bfloat16{0x7fc0});
  const float scale = 0.08838834764831845f;
  if (rows)
    launch({(unsigned)nb, (unsigned)((kvh + DA_RW - 1) / DA_RW), 1}, DA_RW * 32,
           8192u * DA_RW * DA_NS, [&] {
             decode_attn_rows(q.data(), kc.data(), vc.data(), acc.data(), ml.data(), batch, seqlen,
                              kvh, group, sl, scale);
           });
  else
    launch({(unsigned)nb, 1, 1}, NW * 32, 8192u * NW * DA_NS + 4096u * (NW - 1) + 64u * NW, [&] {
      decode_attn_stream(q.data(), kc.data(), vc.data(), acc.data(), ml.data(), batch, seqlen, kvh,
                         group, sl, scale);
    });
  launch({(unsigned)kvh, (unsigned)batch, 1}, 256, 0u, [&] {
    decode_attn_combine(acc.data(), ml.data(), out.data(), seqlen, kvh, group, nb, sl, rows);
  });
  if (getenv("DBG")) {
    for (int i = 0; i < 8 && i < (int)ml.size(); ++i) std::printf("ml[%d]=%g ", i, ml[i]);
    std::printf("\nacc0 %g %g out0 %g\n", acc[0], acc[1], bf2f(out[0].v));
  }
  double worst = 0, maxabs = 0;
  long fails = 0;
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const int hk = h / group;
      std::vector<double> sc(seqlen), o(HD, 0.0);
      double mx = -1e300, l = 0;
      for (int t = 0; t < seqlen; ++t) {
        double dot = 0;
        for (int e = 0; e < HD; ++e)
          dot += (double)bf2f(q[((size_t)b * heads + h) * HD + e].v) *
                 bf2f(kc[(((size_t)b * seqlen + t) * kvh + hk) * HD + e].v);
        sc[t] = dot * scale;
        mx = std::max(mx, sc[t]);
      }
      for (int t = 0; t < seqlen; ++t) {
        const double p = std::exp(sc[t] - mx);
        l += p;
        for (int e = 0; e < HD; ++e)
          o[e] += p * bf2f(vc[(((size_t)b * seqlen + t) * kvh + hk) * HD + e].v);
      }
      for (int e = 0; e < HD; ++e) {
        const double ref = o[e] / l;
        const float got = bf2f(out[((size_t)b * heads + h) * HD + e].v);
        const double r =
            std::isnan(got) ? 1e30 : std::fabs(got - ref) / (0.01 + 0.02 * std::fabs(ref));
        worst = std::max(worst, r);
        maxabs = std::max(maxabs, std::isnan(got) ? 1e30 : std::fabs(got - ref));
        if (r > 1) ++fails;
      }
    }
  std::printf(
      "%s b%d s%d kv%d g%d blocks %d (nb %d, slots %d): %s worst %.3f of tol, max abs %.2e, %ld "
      "fail\n",
      rows ? "rows  " : "stream", batch, seqlen, kvh, group, blocks_param, nb, sl,
      fails ? "FAIL" : "ok  ", worst, maxabs, fails);
  return fails == 0;
}
}  // namespace

int main() {
  bool ok = true;
  ok &= run(1, 100, 2, 4, 264, 1);         // 13 units -> 2 blocks
  ok &= run(2, 300, 2, 8, 5, 2);           // ranges cross pairs
  ok &= run(1, 1000, 1, 4, 3, 3);          // one pair over 3 blocks, partial unit
  ok &= run(3, 37, 2, 1, 264, 4);          // G = 1, tiny
  ok &= run(2, 513, 1, 3, 7, 5);           // odd G
  ok &= run(1, 4096, 1, 8, 64, 6);         // long, many slots
  ok &= run(4, 64, 2, 2, 3, 7);            // blocks hold several pairs
  ok &= run(1, 100, 8, 4, 132, 11, true);  // rows: 4 blocks
  ok &= run(3, 300, 2, 8, 5, 12, true);    // rows: ranges cross sequences, 6 idle warps
  ok &= run(1, 1000, 9, 4, 3, 13, true);   // rows: kv 9 -> 2 head groups
  ok &= run(5, 37, 1, 1, 132, 14, true);   // rows: G = 1, tiny
  ok &= run(2, 2049, 8, 8, 7, 15, true);   // rows: partial unit, long
  if (getenv("FULL")) {                    // the operator's b1 workloads at the default grid (slow)
    ok &= run(1, 4096, 8, 4, 264, 21);
    ok &= run(1, 4096, 8, 4, 132, 22, true);
    ok &= run(1, 100, 8, 4, 264, 23);
  }
  return ok ? 0 : 1;
}
