// CPU model of the GDR_DECODE=1 path of gated_delta_rule_update_baseline.cu (tokens == 1):
// the same thread -> (column quad, row group) mapping, lane shuffles, per-warp shared-memory
// partials and the slot guess, against a transcription of the reference kernel.
// g++ -O1 -o /tmp/gdru_model gdru_model.cpp && /tmp/gdru_model
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
typedef unsigned short bf;
static float b2f(bf x) { unsigned u = unsigned(x) << 16; float f; memcpy(&f, &u, 4); return f; }
static bf f2b(float f) { unsigned u; memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return bf(u >> 16); }
static float wsum(float* v) {  // butterfly like warp_sum: every lane ends with the same total
  for (int o = 16; o > 0; o >>= 1) { float t[32]; for (int l = 0; l < 32; ++l) t[l] = v[l] + v[l ^ o]; memcpy(v, t, sizeof t); }
  return v[0];
}
int main() {
  const int K = 128, V = 128, COLS = 32, G = 8;
  struct Sh { int hq, hv, batch, count; std::vector<int> idx; } shapes[] = {
      {16, 32, 1, 2, {0}}, {4, 8, 1, 2, {0}}, {8, 16, 1, 2, {0}}, {8, 16, 1, 2, {1}}, {4, 8, 2, 2, {1, 0}}, {4, 8, 2, 3, {2, 1}}};
  int bad = 0;
  for (auto& S : shapes) {
    std::mt19937 rng(7 + S.hv + S.idx[0]);
    std::normal_distribution<float> n(0, 1);
    const int B = S.batch, HQ = S.hq, HV = S.hv;
    std::vector<float> Alog(HV), st(size_t(S.count) * HV * K * V);
    std::vector<bf> a(B * HV), dtb(HV), q(B * HQ * K), k(B * HQ * K), v(B * HV * V), b(B * HV);
    for (auto& x : Alog) x = 0.02f * n(rng);
    for (auto& x : a) x = f2b(0.02f * n(rng));
    for (auto& x : dtb) x = f2b(0.02f * n(rng));
    for (auto& x : q) x = f2b(0.02f * n(rng));
    for (auto& x : k) x = f2b(n(rng));
    for (auto& x : v) x = f2b(0.02f * n(rng));
    for (auto& x : b) x = f2b(n(rng));
    for (auto& x : st) x = 0.02f * n(rng);
    std::vector<float> sr = st, sk = st;
    std::vector<bf> outr(B * HV * V), outk(B * HV * V, 0xffff);
    // reference (one column per thread, t = 0 only)
    for (int bb = 0; bb < B; ++bb)
      for (int j = 0; j < HV; ++j) {
        int ratio = std::max(HV / HQ, 1), hq = std::min(j / ratio, HQ - 1);
        float* H = &sr[(size_t(S.idx[bb]) * HV + j) * K * V];
        float kh[K], qh[K], ks = 0, qs = 0;
        for (int i = 0; i < K; ++i) { kh[i] = b2f(k[(bb * HQ + hq) * K + i]); qh[i] = b2f(q[(bb * HQ + hq) * K + i]); }
        for (int i = 0; i < K; ++i) { ks += kh[i] * kh[i]; qs += qh[i] * qh[i]; }
        float kn = fmaxf(sqrtf(ks), 1e-6f), qn = fmaxf(sqrtf(qs), 1e-6f), x = b2f(a[bb * HV + j]) + b2f(dtb[j]);
        float sp = x > 20 ? x : log1pf(expf(x)), decay = expf(-expf(Alog[j]) * sp), beta = 1 / (1 + expf(-b2f(b[bb * HV + j])));
        for (int i = 0; i < K; ++i) { kh[i] /= kn; qh[i] = qh[i] / qn * (1 / sqrtf(float(K))); }
        for (int c = 0; c < V; ++c) {
          float p = 0, o = 0;
          for (int i = 0; i < K; ++i) { H[i * V + c] *= decay; p += H[i * V + c] * kh[i]; }
          float d = (b2f(v[(bb * HV + j) * V + c]) - p) * beta;
          for (int i = 0; i < K; ++i) { H[i * V + c] += kh[i] * d; o += H[i * V + c] * qh[i]; }
          outr[(bb * HV + j) * V + c] = f2b(o);
        }
      }
    // model of the decode path: grid batch * HV * (V / 32), 256 threads
    for (int blk = 0; blk < B * HV * (V / COLS); ++blk) {
      int tiles = V / COLS, bj = blk / tiles, tile = blk % tiles, bb = bj / HV, j = bj % HV;
      int ratio = std::max(HV / HQ, 1), hq = std::min(j / ratio, HQ - 1);
      int slot = S.idx[bb], guess = bb % std::max(S.count, 1);
      float h[256][4][4], red0[G][8][4], red1[G][8][4], khs[256][4], qhs[256][4];
      float x = b2f(a[bb * HV + j]) + b2f(dtb[j]), sp = x > 20 ? x : log1pf(expf(x));
      float decay = expf(-expf(Alog[j]) * sp), beta = 1 / (1 + expf(-b2f(b[bb * HV + j])));
      for (int w = 0; w < G; ++w) {
        float kv[32][4], qv[32][4], ss[32];
        for (int l = 0; l < 32; ++l)
          for (int e = 0; e < 4; ++e) {
            kv[l][e] = 4 * l < K ? b2f(k[(bb * HQ + hq) * K + 4 * l + e]) : 0;
            qv[l][e] = 4 * l < K ? b2f(q[(bb * HQ + hq) * K + 4 * l + e]) : 0;
          }
        for (int l = 0; l < 32; ++l) ss[l] = kv[l][0] * kv[l][0] + kv[l][1] * kv[l][1] + kv[l][2] * kv[l][2] + kv[l][3] * kv[l][3];
        float kn = fmaxf(sqrtf(wsum(ss)), 1e-6f);
        for (int l = 0; l < 32; ++l) ss[l] = qv[l][0] * qv[l][0] + qv[l][1] * qv[l][1] + qv[l][2] * qv[l][2] + qv[l][3] * qv[l][3];
        float qn = fmaxf(sqrtf(wsum(ss)), 1e-6f);
        float pw[32][4];
        for (int l = 0; l < 32; ++l) {
          int t = w * 32 + l, cq = l & 7, rg = w * 4 + (l >> 3), c = tile * COLS + cq * 4;
          bool ok = c < V && 4 * rg < K;
          const float* Hg = &sk[(size_t(guess) * HV + j) * K * V + size_t(4 * rg) * V + c];
          const float* Hs = &sk[(size_t(slot) * HV + j) * K * V + size_t(4 * rg) * V + c];
          for (int i = 0; i < 4; ++i) for (int e = 0; e < 4; ++e) h[t][i][e] = ok ? (slot != guess ? Hs : Hg)[i * V + e] : 0;
          for (int i = 0; i < 4; ++i) { khs[t][i] = kv[rg][i] / kn; qhs[t][i] = qv[rg][i] / qn * (1 / sqrtf(float(K))); }
          for (int e = 0; e < 4; ++e) pw[l][e] = 0;
          for (int i = 0; i < 4; ++i) for (int e = 0; e < 4; ++e) { h[t][i][e] *= decay; pw[l][e] = fmaf(h[t][i][e], khs[t][i], pw[l][e]); }
        }
        for (int o = 8; o < 32; o <<= 1) { float tt[32][4]; for (int l = 0; l < 32; ++l) for (int e = 0; e < 4; ++e) tt[l][e] = pw[l][e] + pw[l ^ o][e]; memcpy(pw, tt, sizeof tt); }
        for (int l = 0; l < 8; ++l) for (int e = 0; e < 4; ++e) red0[w][l][e] = pw[l][e];
      }
      // after the first barrier
      float ow[G][32][4];
      for (int t = 0; t < 256; ++t) {
        int w = t >> 5, l = t & 31, cq = l & 7, rg = w * 4 + (l >> 3), c = tile * COLS + cq * 4;
        bool ok = c < V && 4 * rg < K;
        float p[4] = {0, 0, 0, 0}, d[4];
        for (int gg = 0; gg < G; ++gg) for (int e = 0; e < 4; ++e) p[e] += red0[gg][cq][e];
        for (int e = 0; e < 4; ++e) d[e] = (b2f(v[(bb * HV + j) * V + c + e]) - p[e]) * beta;
        for (int e = 0; e < 4; ++e) ow[w][l][e] = 0;
        float* H = &sk[(size_t(slot) * HV + j) * K * V + size_t(4 * rg) * V + c];
        for (int i = 0; i < 4; ++i) for (int e = 0; e < 4; ++e) {
          h[t][i][e] = fmaf(khs[t][i], d[e], h[t][i][e]);
          ow[w][l][e] = fmaf(h[t][i][e], qhs[t][i], ow[w][l][e]);
        }
        if (ok) for (int i = 0; i < 4; ++i) for (int e = 0; e < 4; ++e) H[i * V + e] = h[t][i][e];
      }
      // (the stores above happen after every thread's loads: the model loads all threads of a
      // warp first, and different threads touch disjoint state elements)
      for (int w = 0; w < G; ++w) {
        for (int o = 8; o < 32; o <<= 1) { float tt[32][4]; for (int l = 0; l < 32; ++l) for (int e = 0; e < 4; ++e) tt[l][e] = ow[w][l][e] + ow[w][l ^ o][e]; memcpy(ow[w], tt, sizeof tt); }
        for (int l = 0; l < 8; ++l) for (int e = 0; e < 4; ++e) red1[w][l][e] = ow[w][l][e];
      }
      for (int l = 0; l < 8; ++l) {
        int c = tile * COLS + l * 4;
        for (int e = 0; e < 4; ++e) { float s = 0; for (int gg = 0; gg < G; ++gg) s += red1[gg][l][e]; outk[(bb * HV + j) * V + c + e] = f2b(s); }
      }
    }
    int bs = 0, bo = 0; double ms = 0, mo = 0;
    for (size_t i = 0; i < st.size(); ++i) { double e = fabs(sk[i] - sr[i]); ms = std::max(ms, e); if (e > 1e-5 + 1e-3 * fabs(sr[i])) ++bs; }
    for (size_t i = 0; i < outr.size(); ++i) { double r = b2f(outr[i]), e = fabs(b2f(outk[i]) - r); mo = std::max(mo, e); if (e > 1e-6 + 0.02 * fabs(r)) ++bo; }
    printf("hq %2d hv %2d batch %d slots %d idx[0] %d: state max err %.2e (%d out of tol), out max err %.2e (%d out of tol)\n", HQ, HV, B, S.count, S.idx[0], ms, bs, mo, bo);
    bad += bs + bo;
  }
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad != 0;
}
