#!/usr/bin/env python3
"""CPU emulation of the FP8 path's index math in configs/bench/block_scaled_mm_baseline.cu
(FP8 = 1): tile order, TMA boxes with the 128-byte swizzle (16-byte chunk j of row r stored
at chunk j ^ (r % 8)), the wgmma shared-memory descriptors (start + 32 B per k32, +8192 B for
consumer warpgroup c, +16384 B for column half h, rows 8 apart by SBO 1024 B, the swizzle
XOR on address bits 4-6 from bits 7-9), the accumulator layout, the per-group scales and the
epilogue. float64 values: any difference from the reference is an indexing error.
    python3 bench/hopper/bsmm8/fp8_emulate.py"""
import numpy as np

def tile_coords(t, tiles_r, tiles_s, GROUP_M=8):
    group = GROUP_M * tiles_s
    g = t // group
    first = g * GROUP_M
    gm = min(tiles_r - first, GROUP_M)
    return first + (t % group) % gm, (t % group) // gm

def tma_box(src, r0, k0, rows, M):  # box [rows, 128 bytes] -> swizzled bytes (as values)
    box = np.zeros(rows * 128)
    for r in range(rows):
        gr = r0 + r
        if gr >= M: continue  # zero fill
        for kb in range(128):
            box[r * 128 + ((kb // 16) ^ (r % 8)) * 16 + kb % 16] = src[gr, k0 + kb]
    return box

def desc_read(smem, start, rows, kk):  # K-major, 128 B swizzle: value (row, k) of the k32 slice
    out = np.zeros((rows, 32))
    for row in range(rows):
        for k in range(32):
            L = start + 32 * kk + (row // 8) * 1024 + (row % 8) * 128 + k
            out[row, k] = smem[L ^ (((L >> 7) & 7) << 4)]
    return out

def run(M, N, K, ctas=132, db_mode=False, seed=0):
    rng = np.random.default_rng(seed)
    G, nb = K // 128, N // 128
    A = rng.integers(-8, 9, (M, K)).astype(np.float64)
    B = rng.integers(-8, 9, (N, K)).astype(np.float64)
    As = rng.integers(1, 5, (M, G)).astype(np.float64)
    Bs = rng.integers(1, 5, (nb, G)).astype(np.float64)
    ref = np.zeros((M, N))
    for g in range(G):
        P = A[:, 128 * g:128 * g + 128] @ B[:, 128 * g:128 * g + 128].T
        ref += P * As[:, g:g + 1] * np.repeat(Bs[:, g], 128)[None, :]
    out = np.full((M, N), np.nan)
    BN = 128 if db_mode == 2 else 256  # FP8_DB = 2: 128 x 128 tiles
    tr8, ts8 = -(-M // 128), -(-N // BN)
    seen = set()
    for blk in range(ctas):
        for u in range(blk, tr8 * ts8, ctas):
            tr, ts = tile_coords(u, tr8, ts8)
            assert (tr, ts) not in seen; seen.add((tr, ts))
            for c in range(2):
                acc = np.zeros((128, 64, 2, 2))  # [thread, jj, h, i]-ish, index by thread below
                acc = {}
                for g in range(G):
                    smem = np.zeros(16384 + BN * 128)
                    smem[:16384] = tma_box(A, tr * 128, 128 * g, 128, M)
                    Bp = np.zeros((N + 256, K)); Bp[:N] = B  # TMA zero fill beyond N
                    smem[16384:] = tma_box(Bp, ts * BN, 128 * g, BN, N)
                    nsub = 64 if db_mode == 1 else 128  # FP8_DB = 1: m64n64k32 quarters
                    for kk in range(4):
                        for qq in range(BN // nsub):
                            a = desc_read(smem, 8192 * c, 64, kk)
                            b = desc_read(smem, 16384 + 128 * nsub * qq, nsub, kk)
                            D = a @ b.T  # 64 x nsub, fresh accumulator
                            for tid in range(128):
                                w, lane = tid >> 5, tid & 31
                                gq, t = lane >> 2, lane & 3
                                r0 = tr * 128 + 64 * c + 16 * w + gq
                                sa0 = As[min(r0, M - 1), g]; sa1 = As[min(r0 + 8, M - 1), g]
                                sb = [Bs[min(2 * ts, nb - 1), g], Bs[min(2 * ts + 1, nb - 1), g]]
                                if BN == 128: sb = [Bs[ts, g]] * 2
                                sc = [sa0 * sb[0], sa1 * sb[0], sa0 * sb[1], sa1 * sb[1]]
                                h = qq * nsub // 128
                                for jj in range(nsub // 8):
                                    for i in range(4):
                                        row = 16 * w + gq + 8 * (i // 2)
                                        col = 8 * jj + 2 * t + (i % 2)
                                        key = (tid, (nsub // 2) * qq + 4 * jj + i)
                                        acc[key] = acc.get(key, 0.0) + D[row, col] * sc[2 * h + i // 2]
                for tid in range(128):
                    w, lane = tid >> 5, tid & 31
                    gq, t = lane >> 2, lane & 3
                    r0 = tr * 128 + 64 * c + 16 * w + gq
                    for h in range(BN // 128):
                        for jj in range(16):
                            col = ts * BN + 128 * h + 8 * jj + 2 * t
                            if col >= N: continue
                            for q in range(2):
                                r = r0 + 8 * q
                                if r < M:
                                    out[r, col] = acc[(tid, 64 * h + 4 * jj + 2 * q)]
                                    out[r, col + 1] = acc[(tid, 64 * h + 4 * jj + 2 * q + 1)]
    err = np.nanmax(np.abs(out - ref)) if not np.isnan(out).any() else float("nan")
    print(f"M={M} N={N} K={K} ctas={ctas} FP8_DB={int(db_mode)}: unwritten {int(np.isnan(out).sum())}, max abs diff {err}")
    return np.isnan(out).sum() == 0 and err == 0

# ---- FP8_SMALL = 1 (FP8_DB = 2): the FP8 plan with split-K and the chained epilogue --------
# Vectorized (numpy) so that the real s0 / s1 / s12 shapes run; mirrors the kernel's code:
# make_plan (FP8_SMALL branch), the ticket / epoch, the producer's and the consumers' unit loops
# (checked to consume the same (tile, group) sequence), the TMA boxes and descriptors as above,
# the per-k32 promotion with the clamped scale pointers, and the chain: slot of unit u = float4
# u * 4096 + 256 jj + ctid, quarter qt = jj 4qt .. 4qt + 3, flags[4u + qt] = epoch; the last
# split writes out. Units run one after another in ticket order; a wait that finds its flag
# not yet at this launch's epoch would block on a later ticket (deadlock): reported.

def make_plan8(M, N, K, ctas):
    groups = K // 128
    tiles_r, tiles_s = -(-M // 128), -(-N // 128)
    tiles = tiles_r * tiles_s
    splits = 1
    if 2 * tiles <= ctas: splits = min(groups, ctas // tiles)
    gps = -(-groups // splits)
    return dict(groups=groups, tiles_r=tiles_r, tiles_s=tiles_s, tiles=tiles, gps=gps,
                splits=-(-groups // gps))

_rb = np.arange(128)[:, None]; _kb = np.arange(128)[None, :]
_BOX_DST = (_rb * 128 + ((_kb // 16) ^ (_rb % 8)) * 16 + _kb % 16).ravel()

def tma_box_v(src, r0, k0, nrows):  # 128-row box, 128 B, zero fill past nrows
    gr = r0 + _rb
    vals = src[np.minimum(gr, nrows - 1), k0 + _kb] * (gr < nrows)
    box = np.zeros(128 * 128); box[_BOX_DST] = vals.ravel()
    return box

def desc_idx(start, rows, kk):  # smem byte index of (row, k) of the k32 slice kk
    row = np.arange(rows)[:, None]; k = np.arange(32)[None, :]
    L = start + 32 * kk + (row // 8) * 1024 + (row % 8) * 128 + k
    return L ^ (((L >> 7) & 7) << 4)

_DA = [[desc_idx(8192 * c, 64, kk) for kk in range(4)] for c in range(2)]
_DB = [desc_idx(16384, 128, kk) for kk in range(4)]
_tid = np.arange(128)[:, None]; _i = np.arange(64)[None, :]
_w, _gq, _t = _tid >> 5, (_tid & 31) >> 2, _tid & 3
ROW_L = 16 * _w + _gq + 8 * ((_i % 4) // 2)       # tp[i] row in the warpgroup's 64 (128 x 64)
COL_L = 8 * (_i // 4) + 2 * _t + (_i % 2)         # tp[i] column in the tile's 128
HI = np.broadcast_to((_i % 4) // 2, (128, 64))    # 0: sc0 (row r0), 1: sc1 (row r0 + 8)

def launch_small(st, A, B, As, Bs, M, N, K, ctas, acc_xor=0, arrival=None, mode=1):
    """One launch pair (prep + main) on persistent state st (ws, flags, ticket counter).
    mode = FP8_SMALL: 1 = one loop over the plan's units from the ticket's u0; 2 = a branch on
    p.splits: split as in 1, unsplit the FP8_SMALL = 0 loop (u = blockIdx.x .. tiles step
    gridDim.x, all groups, no chain)."""
    p = make_plan8(M, N, K, ctas)
    G, tiles, tr8, ts8 = p["groups"], p["tiles"], p["tiles_r"], p["tiles_s"]
    units = tiles * p["splits"]
    assert units <= ctas or p["splits"] == 1
    assert 260 + 16 * 4 * (units if p["splits"] > 1 else 0) <= 260 + 16 * ctas * 4  # flags bytes
    assert 65536 * units <= 131072 * ctas or p["splits"] == 1  # conv workspace covers the slots
    if mode >= 5:  # bsmm_fp8_1l: per-block maps after the flags, inside "maps" of its plan
        off = (260 + 16 * ctas + 127) & ~127
        assert off >= 260 + 16 * ctas and off % 128 == 0
        assert off + 256 * ctas <= 260 + 16 * ctas + 128 + 256 * ctas  # the plan's maps bytes
        pf = set()  # prefetched (matrix, row, group) over the grid, as in bsmm_fp8_1l
        for b in range(ctas):
            if b >= units: continue
            tr, ts = tile_coords(b % tiles, tr8, ts8)
            g0 = (b // tiles) * p["gps"]; g1 = min(G, g0 + p["gps"])
            for i in range(512):
                g = g0 + (i >> 8); row = i & 127; isb = (i >> 7) & 1
                r = (ts if isb else tr) * 128 + row
                if g < g1 and r < (N if isb else M):
                    assert 0 <= r * K + 128 * g and r * K + 128 * g + 127 < (N if isb else M) * K
                    pf.add((isb, r, g))
        want = set()
        for u in range(min(units, ctas)):  # first unit of every block = units 0 .. ctas - 1
            tr, ts = tile_coords(u % tiles, tr8, ts8)
            g0 = (u // tiles) * p["gps"]
            for g in range(g0, min(G, g0 + p["gps"], g0 + 2)):
                want |= {(0, tr * 128 + r, g) for r in range(128) if tr * 128 + r < M}
                want |= {(1, ts * 128 + r, g) for r in range(128) if ts * 128 + r < N}
        assert pf == want, "prefetch does not cover the first two groups of every first unit"
    out = np.full((M, N), np.nan); writes = np.zeros((M, N), int)
    order = list(range(ctas)) if arrival is None else list(arrival)
    tick = {}
    for b in order:  # tickets in arrival order (only where split)
        if p["splits"] > 1: tick[b] = st["ticket"]; st["ticket"] += 1
        else: tick[b] = b
    ax = np.arange(64) ^ acc_xor  # acc[AX(i)] holds element i
    # FP8_SMALL = 2: producer and consumers branch on the same p (make_plan of the same
    # arguments), so both take the split instance or both the unsplit one.
    split_code = mode == 1 or p["splits"] > 1
    for b in sorted(order, key=lambda x: tick[x]):
        ticket = tick[b]; u0 = ticket % ctas; epoch = ticket // ctas + 1
        # producer's sequence of (tr, ts, g): fp8_producer<SPLIT>
        prod = []
        for u in (range(u0, units, ctas) if split_code else range(b, tiles, ctas)):
            tr, ts = tile_coords(u % tiles if split_code else u, tr8, ts8)
            g0 = (u // tiles) * p["gps"] if split_code else 0
            g1 = min(G, g0 + p["gps"]) if split_code else G
            prod += [(tr, ts, g) for g in range(g0, g1)]
        cons = []
        for u in (range(u0, tiles * p["splits"], ctas) if split_code else range(b, tiles, ctas)):
            tr, ts = tile_coords(u % tiles if split_code else u, tr8, ts8)
            sp = u // tiles if split_code else 0
            g0 = sp * p["gps"] if split_code else 0
            g1 = min(G, g0 + p["gps"]) if split_code else G
            acc = np.zeros((2, 128, 64))
            r0 = tr * 128 + 64 * np.arange(2)[:, None] + 16 * (np.arange(128) >> 5)[None, :] + ((np.arange(128) & 31) >> 2)[None, :]
            for g in range(g0, g1):
                cons.append((tr, ts, g))
                tr_p, ts_p, g_p = prod[len(cons) - 1]  # what the stage holds
                smem = np.concatenate([tma_box_v(A, tr_p * 128, 128 * g_p, M),
                                       tma_box_v(B, ts_p * 128, 128 * g_p, N)])
                for c in range(2):
                    sa0 = As[np.minimum(r0[c], M - 1), g]; sa1 = As[np.minimum(r0[c] + 8, M - 1), g]
                    xb = Bs[ts, g]
                    sc = np.where(HI == 0, (sa0 * xb)[:, None], (sa1 * xb)[:, None])
                    for kk in range(4):
                        D = smem[_DA[c][kk]] @ smem[_DB[kk]].T  # fresh 64 x 128 accumulator
                        acc[c][:, ax] += D[ROW_L, COL_L] * sc
            def store_out(c, jjs):
                for jj in jjs:
                    for q in range(2):
                        rows = r0[c] + 8 * q; ok = rows < M
                        cols = ts * 128 + 8 * jj + 2 * (np.arange(128) & 3)  # col of acc[AX(4jj)], t = tid % 4
                        for e in range(2):
                            v = acc[c][:, ax[4 * jj + 2 * q + e]]
                            out[rows[ok], cols[ok] + e] = v[ok]; writes[rows[ok], cols[ok] + e] += 1
            if split_code and p["splits"] > 1 and mode >= 4:
                # FP8_SMALL >= 4: one flag per unit (flags[4u]); the reader takes all 16 float4
                # of its predecessor's slot (two batches of 8 jj), the writer stores all 16.
                if sp > 0:
                    f = 4 * (u - tiles)
                    if not st["flags"][f] - epoch >= 0:
                        raise RuntimeError(f"unit {u} waits for a later ticket (deadlock)")
                    for c in range(2):
                        ctid = 128 * c + np.arange(128)
                        for h in range(2):
                            for i in range(8):
                                jj = 8 * h + i
                                v = st["ws"][(u - tiles) * 4096 + 256 * jj + ctid]
                                for e in range(4): acc[c][:, ax[4 * jj + e]] += v[:, e]
                if sp < p["splits"] - 1:
                    for c in range(2):
                        ctid = 128 * c + np.arange(128)
                        for jj in range(16):
                            st["ws"][u * 4096 + 256 * jj + ctid] = np.stack([acc[c][:, ax[4 * jj + e]] for e in range(4)], 1)
                    st["flags"][4 * u] = epoch  # after the fence and the barrier
                    continue
                for c in range(2): store_out(c, range(16))  # the last split: the plain epilogue
                continue
            if split_code and p["splits"] > 1:  # fp8_consumer<SPLIT>: SPLIT && p.splits > 1
                last = sp == p["splits"] - 1
                for qt in range(4):
                    if sp > 0:
                        f = 4 * (u - tiles) + qt
                        if not st["flags"][f] - epoch >= 0:
                            raise RuntimeError(f"unit {u} quarter {qt} waits for a later ticket (deadlock)")
                        for c in range(2):
                            ctid = 128 * c + np.arange(128)
                            for i in range(4):
                                jj = 4 * qt + i
                                v = st["ws"][(u - tiles) * 4096 + 256 * jj + ctid]  # prev + 256 jj
                                for e in range(4): acc[c][:, ax[4 * jj + e]] += v[:, e]
                    if not last:
                        for c in range(2):
                            ctid = 128 * c + np.arange(128)
                            for i in range(4):
                                jj = 4 * qt + i
                                st["ws"][u * 4096 + 256 * jj + ctid] = np.stack([acc[c][:, ax[4 * jj + e]] for e in range(4)], 1)
                        st["flags"][4 * u + qt] = epoch  # after the fence and the barrier
                    else:
                        for c in range(2): store_out(c, range(4 * qt, 4 * qt + 4))
                continue
            for c in range(2): store_out(c, range(16))
        assert cons == prod, "producer and consumers disagree on the stage sequence"
    return out, writes, p

def ref_out(A, B, As, Bs, M, N, K):
    ref = np.zeros((M, N))
    for g in range(K // 128):
        P = A[:, 128 * g:128 * g + 128] @ B[:, 128 * g:128 * g + 128].T
        ref += P * As[:, g:g + 1] * np.repeat(Bs[:, g], 128)[None, :]
    return ref

def small_case(shapes, ctas=132, acc_xor=0, seed=1, mode=1):
    """Several launches in a row on one workspace (no zeroing between them, as in kopt's
    repeated timing runs), each with fresh data and shuffled block arrival."""
    rng = np.random.default_rng(seed)
    st = dict(ws=rng.normal(size=(ctas * 4096, 4)) * 1e6,  # garbage: conv is not zeroed
              flags=np.zeros(4 * ctas, np.int64), ticket=0)
    ok = True
    for (M, N, K) in shapes:
        G, nb = K // 128, N // 128
        A = rng.integers(-8, 9, (M, K)).astype(np.float64)
        B = rng.integers(-8, 9, (N, K)).astype(np.float64)
        As = rng.integers(1, 5, (M, G)).astype(np.float64)
        Bs = rng.integers(1, 5, (nb, G)).astype(np.float64)
        out, writes, p = launch_small(st, A, B, As, Bs, M, N, K, ctas, acc_xor, rng.permutation(ctas), mode)
        ref = ref_out(A, B, As, Bs, M, N, K)
        err = np.abs(out - ref).max() if not np.isnan(out).any() else float("nan")
        good = (writes == 1).all() and err == 0
        print(f"FP8_SMALL={mode} M={M} N={N} K={K} ctas={ctas} AX^{acc_xor}: tiles {p['tiles']} splits {p['splits']} "
              f"gps {p['gps']} | written once {bool((writes == 1).all())}, max abs diff {err} -> {'ok' if good else 'FAIL'}")
        ok &= bool(good)
    return ok

if __name__ == "__main__":
    import sys
    ok = True
    if "--new-only" in sys.argv:  # only the FP8_SMALL = 4 / 5 cases (below)
        for mode in (4, 5):
            ok &= small_case([(349, 2048, 2048), (1024, 2048, 2048), (237, 4096, 4096),
                              (1024, 2048, 2048), (349, 2048, 2048), (237, 4096, 4096)], mode=mode)
            ok &= small_case([(77, 256, 896), (300, 512, 256), (77, 256, 896), (300, 512, 256)],
                             ctas=6, mode=mode)
            ok &= small_case([(237, 512, 1024)], ctas=16, acc_xor=1, mode=mode)
        print("ALL OK" if ok else "FAILED")
        sys.exit(0 if ok else 1)
    if "--small-only" not in sys.argv:
        for shp in [(200, 384, 256, 3), (130, 256, 128, 132), (257, 512, 384, 2)]:
            for db_mode in (0, 1, 2):
                ok &= run(*shp, db_mode=db_mode)
    # s0, s12, s1 and s2 as they are (132 blocks): 2 splits / 2 splits / unsplit / unsplit with
    # several units per block; then ragged splits (7 groups in 3 splits), AX = 1.
    ok &= small_case([(349, 2048, 2048), (237, 4096, 4096), (1024, 2048, 2048), (349, 2048, 2048)])
    ok &= small_case([(4533, 2048, 2048)]) if "--big" in sys.argv else True
    ok &= small_case([(77, 256, 896), (300, 512, 256), (77, 256, 896)], ctas=6)  # 2 units per block in the 2nd
    ok &= small_case([(237, 512, 1024)], ctas=16, acc_xor=1)
    # FP8_SMALL = 2: split and unsplit launches interleaved on one workspace (the unsplit ones
    # take no ticket, so the split ones' epochs must still line up), 2 unsplit units per block.
    ok &= small_case([(349, 2048, 2048), (1024, 2048, 2048), (237, 4096, 4096), (1024, 2048, 2048),
                      (349, 2048, 2048)], mode=2)
    ok &= small_case([(77, 256, 896), (300, 512, 256), (77, 256, 896), (300, 512, 256)], ctas=6, mode=2)
    ok &= small_case([(237, 512, 1024)], ctas=16, acc_xor=1, mode=2)
    # FP8_SMALL = 4 / 5 (one flag per split unit; 5: one launch, its prefetch and maps slots):
    # the same sequences, ragged 3-split chains included.
    for mode in (4, 5):
        ok &= small_case([(349, 2048, 2048), (1024, 2048, 2048), (237, 4096, 4096), (1024, 2048, 2048),
                          (349, 2048, 2048), (237, 4096, 4096)], mode=mode)
        ok &= small_case([(77, 256, 896), (300, 512, 256), (77, 256, 896), (300, 512, 256)], ctas=6, mode=mode)
        ok &= small_case([(237, 512, 1024)], ctas=16, acc_xor=1, mode=mode)
    print("ALL OK" if ok else "FAILED")
