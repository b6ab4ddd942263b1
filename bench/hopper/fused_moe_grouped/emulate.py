#!/usr/bin/env python3
"""CPU emulation of the index math of fused_moe_grouped.cu (no GPU): the route
kernel's tile table and expert-major layout, the gathered A rows, the mma.sync
accumulator layout of the 128 x 128 tile (acc[i][j][q] of warp (wm, wn), lane
-> row wm*64 + 16i + lane/4 + 8(q/2), column wn*32 + 8j + 2(lane%4) + q%2, as
in the tested gemm-bf16-mma-sync epilogue), the gate/up exchange between warps
wn and wn + 2, the act layout and gemm2's weighted scatter. float64, no bf16
rounding: a difference from the reference is an indexing error.

    python3 bench/hopper/fused_moe_grouped/emulate.py
"""
import numpy as np

BM = 128


def route(ids, experts):
    slots = ids.size
    flat = ids.reshape(-1)
    cnt = np.bincount(flat, minlength=experts)
    tiles, off, p = [], np.zeros(experts, dtype=int), 0
    for e in range(experts):
        off[e] = p
        for r in range(0, cnt[e], BM):
            tiles.append((e, p + r, min(BM, cnt[e] - r)))
        p += cnt[e]
    sorted_ = np.zeros(slots, dtype=int)
    cur = np.zeros(experts, dtype=int)
    rng = np.random.default_rng(0)
    for s in rng.permutation(slots):  # shared-memory atomics: any order inside an expert
        e = flat[s]
        sorted_[off[e] + cur[e]] = s
        cur[e] += 1
    assert len(tiles) <= -(-slots // BM) + experts
    return tiles, sorted_


def acc_map():
    """(warp, lane, i, j, q) -> (row, col) in the 128 x 128 tile."""
    m = {}
    for warp in range(8):
        wm, wn = warp >> 2, warp & 3
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            for i in range(4):
                for j in range(4):
                    for q in range(4):
                        m[(warp, lane, i, j, q)] = (wm * 64 + i * 16 + g + 8 * (q // 2), wn * 32 + j * 8 + 2 * t + q % 2)
    return m


def emulate(x, w1, w2, tw, ids):
    tokens, hidden = x.shape
    experts, two_inter, _ = w1.shape
    inter = two_inter // 2
    top_k = ids.shape[1]
    tiles, sorted_ = route(ids, experts)
    amap = acc_map()
    act = np.full((tokens * top_k, inter), np.nan)
    for (e, p0, rows) in tiles:
        slot_rows = [sorted_[p0 + min(r, rows - 1)] for r in range(BM)]
        A = x[[s // top_k for s in slot_rows]]  # gathered rows
        for i0 in range(0, inter, 64):
            brows = [i0 + r if r < 64 else inter + i0 + (r - 64) for r in range(BM)]
            C = A @ w1[e, brows].T  # the tile product
            xch = {}
            for (warp, lane, i, j, q), (r, c) in amap.items():  # up warps park their values
                wm, wn = warp >> 2, warp & 3
                if wn >= 2:
                    xch[(wm * 2 + (wn & 1), i * 16 + j * 4 + q, lane)] = C[r, c]
            for (warp, lane, i, j, q), (r, c) in amap.items():
                wm, wn = warp >> 2, warp & 3
                if wn < 2 and r < rows:
                    gt, up = C[r, c], xch[(wm * 2 + (wn & 1), i * 16 + j * 4 + q, lane)]
                    act[p0 + r, i0 + c] = gt / (1 + np.exp(-gt)) * up
    out = np.zeros((tokens, hidden))
    for (e, p0, rows) in tiles:
        A = act[[p0 + min(r, rows - 1) for r in range(BM)]]
        for h0 in range(0, hidden, 128):
            C = A @ w2[e, h0:h0 + 128].T
            for (warp, lane, i, j, q), (r, c) in amap.items():
                if r < rows:
                    slot = sorted_[p0 + r]
                    out[slot // top_k, h0 + c] += tw.reshape(-1)[slot] * C[r, c]
    return out, len(tiles)


def reference(x, w1, w2, tw, ids):
    tokens, hidden = x.shape
    inter = w1.shape[1] // 2
    out = np.zeros((tokens, hidden))
    for t in range(tokens):
        for s in range(ids.shape[1]):
            e = ids[t, s]
            g = w1[e, :inter] @ x[t]
            u = w1[e, inter:] @ x[t]
            a = g / (1 + np.exp(-g)) * u
            out[t] += tw[t, s] * (w2[e] @ a)
    return out


def main():
    rng = np.random.default_rng(3)
    for (tokens, hidden, inter, experts, top_k) in [(1, 128, 64, 8, 4), (135, 128, 128, 4, 2), (300, 256, 64, 16, 8)]:
        x = rng.normal(0, 1, (tokens, hidden))
        w1 = rng.normal(0, 0.1, (experts, 2 * inter, hidden))
        w2 = rng.normal(0, 0.1, (experts, hidden, inter))
        tw = rng.uniform(0.05, 0.5, (tokens, top_k))
        ids = rng.integers(0, experts, (tokens, top_k))
        out, nt = emulate(x, w1, w2, tw, ids)
        ref = reference(x, w1, w2, tw, ids)
        err = np.abs(out - ref).max()
        print(f"tokens={tokens} hidden={hidden} inter={inter} experts={experts} top_k={top_k} tiles={nt} "
              f"max|diff|={err:.3g} (|ref| max {np.abs(ref).max():.3g})")
        assert np.isfinite(out).all() and err < 1e-9 * max(1.0, np.abs(ref).max())
    print("emulation matches the reference")


if __name__ == "__main__":
    main()
