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

ok = True
for shp in [(200, 384, 256, 3), (130, 256, 128, 132), (257, 512, 384, 2)]:
    for db_mode in (0, 1, 2):
        ok &= run(*shp, db_mode=db_mode)
print("ALL OK" if ok else "FAILED")
