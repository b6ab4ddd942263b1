#!/usr/bin/env python3
"""CPU emulation of the index math of configs/bench/block_scaled_mm_baseline.cu
(no GPU needed): the plan (orientation, tiles, split-K), the prepass's k
permutation, the TMA tiles, the consumer's register fragments (wgmma's
documented m64k16 f16 A-fragment layout), the accumulator layout, the scale
ratios and the epilogue of both orientations. Values in float64, so any
difference from the reference is an indexing error, not rounding.

    python3 bench/hopper/bsmm_emulate.py
"""
import numpy as np

BM, BN, BK = 128, 256, 64


def make_plan(M, N, K, ctas):
    groups = K // 128
    swap = M < N
    rows_r, rows_s = (N, M) if swap else (M, N)
    tr, ts = -(-rows_r // BM), -(-rows_s // BN)
    tiles = tr * ts
    splits = 1
    if 2 * tiles <= ctas:
        splits = min(groups, ctas // tiles)
    gps = -(-groups // splits)
    splits = -(-groups // gps)
    return dict(groups=groups, swap=swap, rows_r=rows_r, rows_s=rows_s, tiles_r=tr, tiles_s=ts,
                tiles=tiles, splits=splits, gps=gps)


def tile_coords(t, tiles_r, tiles_s, GROUP_M=8):
    group = GROUP_M * tiles_s
    g = t // group
    first = g * GROUP_M
    gm = min(tiles_r - first, GROUP_M)
    return first + (t % group) % gm, (t % group) // gm


def prep_convert(src):
    """bsmm_prep's conversion as the code writes it: per 64-byte chunk, source
    words w[16] (4 bytes each), output words o[8kk + t] = cvt(lo16(w[4t+kk])),
    o[8kk + 4 + t] = cvt(hi16(w[4t+kk])); an output word holds two f16 (low first)."""
    rows, K = src.shape
    out = np.zeros_like(src)
    for c0 in range(0, K, 64):
        blk = src[:, c0:c0 + 64]
        o = np.zeros((rows, 64))
        for t in range(4):
            for kk in range(4):
                wbytes = 4 * (4 * t + kk)  # source word 4t + kk -> bytes wbytes .. wbytes + 3
                lo, hi = 8 * kk + t, 8 * kk + 4 + t  # output word indices
                o[:, 2 * lo] = blk[:, wbytes]
                o[:, 2 * lo + 1] = blk[:, wbytes + 1]
                o[:, 2 * hi] = blk[:, wbytes + 2]
                o[:, 2 * hi + 1] = blk[:, wbytes + 3]
        out[:, c0:c0 + 64] = o
    return out


def frag_tables():
    """For one consumer warpgroup: logical A (64 x 16 per k16 step kk) <- R tile byte
    (row within the warpgroup's 64 rows, byte within the 64-byte row). load_frags:
    f[4kk+0] = lo16(word kk, row g), f[4kk+2] = hi16(word kk, row g), f[4kk+1] / f[4kk+3]
    the same for row g + 8; words are bytes 16t + 4kk .. + 3. wgmma's register A layout
    (m64k16 f16): reg0 (row 16w+g, k 2t..2t+1), reg1 (row +8), reg2 (k + 8), reg3 (row +8, k + 8)."""
    src_row = np.zeros((4, 64, 16), dtype=int)
    src_byte = np.zeros((4, 64, 16), dtype=int)
    seen = np.zeros((4, 64, 16), dtype=int)
    for w in range(4):
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            for kk in range(4):
                # (register index in f, row offset, byte offset in the 16-byte chunk)
                regs = {0: (0, 4 * kk), 2: (0, 4 * kk + 2), 1: (8, 4 * kk), 3: (8, 4 * kk + 2)}
                for j, (roff, boff) in regs.items():
                    lrow = 16 * w + g + (8 if j in (1, 3) else 0)
                    lk = 2 * t + (8 if j in (2, 3) else 0)
                    for e in range(2):
                        src_row[kk, lrow, lk + e] = 16 * w + g + roff
                        src_byte[kk, lrow, lk + e] = 16 * t + boff + e
                        seen[kk, lrow, lk + e] += 1
    assert (seen == 1).all()
    return src_row, src_byte


def acc_layout():
    """d[4j + i] of thread (w, lane): row 16w + g + 8(i/2), column 8j + 2t + i%2 (m64n256)."""
    rows = np.zeros((128, 128), dtype=int)
    cols = np.zeros((128, 128), dtype=int)
    for tid in range(128):
        w, lane = tid >> 5, tid & 31
        g, t = lane >> 2, lane & 3
        for j in range(32):
            for i in range(4):
                rows[tid, 4 * j + i] = 16 * w + g + 8 * (i // 2)
                cols[tid, 4 * j + i] = 8 * j + 2 * t + (i % 2)
    return rows, cols


def emulate(A, sa, B, sb, ctas=132, epi_v4=False, fixup=0):
    M, K = A.shape
    N = B.shape[0]
    p = make_plan(M, N, K, ctas)
    G = p["groups"]
    R, S = (B, A) if p["swap"] else (A, B)
    Sp = prep_convert(S)
    stride = p["tiles_s"] * BN
    ratio = np.ones((G, stride))
    if p["swap"]:
        for g in range(1, G):
            ratio[g, :M] = sa[:, g - 1] / sa[:, g]
    out = np.full((M, N), np.nan)
    if p["splits"] > 1 and not fixup:
        out[:] = 0
    # fixup (bench/hopper/bsmm/block_scaled_mm_fixup.cu): the partial tiles, float4 index
    # 8192 u + 256 j + ctid (ctid = 128 c + thread of the consumer warpgroup c)
    part = np.full((p["tiles"] * p["splits"], 8192, 4), np.nan) if fixup else None
    src_row, src_byte = frag_tables()
    arow, acol = acc_layout()
    for u in range(p["tiles"] * p["splits"]):
        tr, ts = tile_coords(u % p["tiles"], p["tiles_r"], p["tiles_s"])
        sp = u // p["tiles"]
        g0, g1 = sp * p["gps"], min(G, sp * p["gps"] + p["gps"])
        for c in range(2):
            d = np.zeros((128, 128))  # [thread, register]
            rl = 64 * c + arow  # R-tile row of each accumulator
            r_glob = tr * BM + rl
            s_glob = ts * BN + acol
            def sigma(g):
                if not p["swap"]:
                    rr = np.minimum(r_glob, M - 1)
                    cb = np.minimum(s_glob // 128, N // 128 - 1)
                    return sa[rr, g] * sb[cb, g]
                return sb[tr, g] * np.where(s_glob < M, sa[np.minimum(s_glob, M - 1), g], 1.0)
            for g in range(g0, g1):
                if g > g0:
                    if not p["swap"]:
                        d *= sigma(g - 1) / sigma(g)
                    else:
                        rt = sb[tr, g - 1] / sb[tr, g]
                        d *= ratio[g, s_glob] * rt
                for ks in (2 * g, 2 * g + 1):
                    # TMA tiles with zero fill
                    rt_ = np.zeros((BM, BK))
                    rr0 = tr * BM
                    nr = max(0, min(BM, p["rows_r"] - rr0))
                    rt_[:nr] = R[rr0:rr0 + nr, ks * BK:(ks + 1) * BK]
                    st_ = np.zeros((BN, BK))
                    s00 = ts * BN
                    ns = max(0, min(BN, p["rows_s"] - s00))
                    st_[:ns] = Sp[s00:s00 + ns, ks * BK:(ks + 1) * BK]
                    wg_rows = rt_[64 * c:64 * c + 64]
                    for kk in range(4):
                        a_log = wg_rows[src_row[kk], src_byte[kk]]  # 64 x 16
                        b_log = st_[:, 16 * kk:16 * kk + 16]  # 256 x 16
                        D = a_log @ b_log.T  # 64 x 256
                        d += D[arow, acol]
            d *= sigma(g1 - 1)
            if fixup and p["splits"] > 1:
                for j in range(32):
                    part[u, 256 * j + 128 * c:256 * j + 128 * c + 128] = d[:, 4 * j:4 * j + 4]
                continue
            if not p["swap"]:
                ok = (r_glob < M) & (s_glob < N)
                if p["splits"] == 1:
                    out[r_glob[ok], s_glob[ok]] = d[ok]
                else:
                    np.add.at(out, (r_glob[ok], s_glob[ok]), d[ok])
            elif not epi_v4:
                ok = s_glob < M
                if p["splits"] == 1:
                    out[s_glob[ok], r_glob[ok]] = d[ok]
                else:
                    np.add.at(out, (s_glob[ok], r_glob[ok]), d[ok])
            else:  # EPI_V4: per warp, 4 column groups through a [4][8][16] buffer
                for w in range(4):
                    r0w = tr * BM + 64 * c + 16 * w
                    for j0 in range(0, 32, 4):
                        buf = np.full(512, np.nan)
                        for lane in range(32):
                            tid = 32 * w + lane
                            g, t = lane >> 2, lane & 3
                            for jj in range(4):
                                j = j0 + jj
                                buf[(jj * 8 + 2 * t) * 16 + g] = d[tid, 4 * j]
                                buf[(jj * 8 + 2 * t + 1) * 16 + g] = d[tid, 4 * j + 1]
                                buf[(jj * 8 + 2 * t) * 16 + g + 8] = d[tid, 4 * j + 2]
                                buf[(jj * 8 + 2 * t + 1) * 16 + g + 8] = d[tid, 4 * j + 3]
                        for lane in range(32):
                            s_ = ts * BN + 8 * (j0 + (lane >> 3)) + (lane & 7)
                            if s_ < M:
                                vals = buf[lane * 16:lane * 16 + 16]
                                assert np.isfinite(vals).all()
                                if p["splits"] == 1:
                                    out[s_, r0w:r0w + 16] = vals
                                else:
                                    out[s_, r0w:r0w + 16] += vals
    if fixup and p["splits"] > 1:
        for tile in range(p["tiles"]):
            tr, ts = tile_coords(tile, p["tiles_r"], p["tiles_s"])
            # FIXUP 1: one split (the last to arrive) adds all j; FIXUP 2: split me adds
            # j in [me * 32 // splits, (me + 1) * 32 // splits)
            ranges = [(0, 32)] if fixup == 1 else [(me * 32 // p["splits"], (me + 1) * 32 // p["splits"])
                                                   for me in range(p["splits"])]
            for jlo, jhi in ranges:
                for ctid in range(256):
                    c, tid = ctid >> 7, ctid & 127
                    w, lane = tid >> 5, tid & 31
                    g, t = lane >> 2, lane & 3
                    r0 = tr * BM + 64 * c + 16 * w + g
                    s0 = ts * BN + 2 * t
                    for j in range(jlo, jhi):
                        a = sum(part[q * p["tiles"] + tile, 256 * j + ctid] for q in range(p["splits"]))
                        assert np.isfinite(a).all()
                        col = s0 + 8 * j
                        if not p["swap"]:
                            if col < N:
                                if r0 < M:
                                    out[r0, col:col + 2] = a[0:2]
                                if r0 + 8 < M:
                                    out[r0 + 8, col:col + 2] = a[2:4]
                        elif col < M:
                            out[col, r0] = a[0]
                            out[col, r0 + 8] = a[2]
                            if col + 1 < M:
                                out[col + 1, r0] = a[1]
                                out[col + 1, r0 + 8] = a[3]
    return out, p


def reference(A, sa, B, sb):
    M, K = A.shape
    N = B.shape[0]
    out = np.zeros((M, N))
    for g in range(K // 128):
        P = A[:, g * 128:(g + 1) * 128] @ B[:, g * 128:(g + 1) * 128].T
        out += P * sa[:, g:g + 1] * np.repeat(sb[:, g], 128)[None, :]
    return out


def main():
    rng = np.random.default_rng(1)
    cases = [(37, 256, 512, 132), (37, 256, 512, 3), (300, 256, 384, 132), (300, 512, 384, 4),
             (129, 384, 256, 132), (640, 384, 256, 1000), (260, 128, 256, 132),
             (237, 512, 768, 132), (349, 512, 384, 12)]
    for (M, N, K, ctas) in cases:
        A = np.round(rng.normal(0, 4, (M, K)))
        B = np.round(rng.normal(0, 4, (N, K)))
        sa = rng.uniform(0.5, 1.5, (M, K // 128))
        sb = rng.uniform(0.5, 1.5, (N // 128, K // 128))
        ref = reference(A, sa, B, sb)
        for epi_v4, fixup in ((False, 0), (True, 0), (False, 1), (False, 2)):
            out, p = emulate(A, sa, B, sb, ctas, epi_v4, fixup)
            err = np.nanmax(np.abs(out - ref)) if np.isfinite(out).all() else float("nan")
            print(f"m={M} n={N} k={K} ctas={ctas} EPI_V4={int(epi_v4)} FIXUP={fixup} swap={p['swap']} tiles={p['tiles']} "
                  f"splits={p['splits']} max|diff|={err:.3g} (|ref| max {np.abs(ref).max():.3g})")
            assert np.isfinite(out).all() and err < 1e-9 * np.abs(ref).max()
    print("emulation matches the reference")


if __name__ == "__main__":
    main()
