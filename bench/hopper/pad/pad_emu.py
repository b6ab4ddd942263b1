#!/usr/bin/env python3
"""CPU check of the split-context kernels: evaluates a candidate's launch plan (grid, block,
shared_bytes, the bps argument, workspace sizes) for every case with kopt's integer
expression rules and feeds the cases to the emulator (pad_emu.cpp):
    python3 bench/hopper/pad/pad_emu.py CANDIDATE.json EMU_BINARY [--quick] [--only NAME,NAME]
(--quick leaves out s0, the slowest case; --only runs the cases named)
The cases: the 8 workloads of paged_attention_decode(_fp16).json and edge cases."""
import json, re, subprocess, sys


def ev(expr, names):
    e = re.sub(r"\bceil_div\b", "_cd", expr).replace("/", "//")
    return int(eval(e, {"_cd": lambda a, b: -(-a // b), "min": min, "max": max}, dict(names)))


# name dtype num_seqs ctx_len num_heads num_kv_heads head_size lens_mode
CASES = [
    ("s0_s256_l64_h16_kv16_d128", 0, 256, 64, 16, 16, 128, 0),
    ("s1_s1_l128_h16_kv2_d256", 0, 1, 128, 16, 2, 256, 0),
    ("s2_s128_l64_h3_kv3_d128", 0, 128, 64, 3, 3, 128, 0),
    ("s3_s4_l128_h32_kv4_d128", 0, 4, 128, 32, 4, 128, 0),
    ("s5_s1_l128_h4_kv1_d128", 0, 1, 128, 4, 1, 128, 0),
    ("s4_s4_l128_h32_kv8_d128", 1, 4, 128, 32, 8, 128, 0),
    ("s6_s4_l128_h40_kv8_d128", 1, 4, 128, 40, 8, 128, 0),
    ("s7_s4_l128_h64_kv8_d128", 1, 4, 128, 64, 8, 128, 0),
    # edges: ctx not a multiple of 16, G = 1, random lengths incl. 1 and 0
    ("e1_ctx37_G1", 0, 3, 37, 8, 8, 128, 1),
    # one position, G = 8
    ("e2_ctx1_G8", 1, 2, 1, 8, 1, 128, 0),
    # many sequences: one split, several tiles (two stages), G = 5, d 64, random lengths
    ("e3_tiles_G5_d64", 1, 40, 300, 40, 8, 64, 1),
    # d 72 (an odd number of 8-element chunks), G = 3, random lengths
    ("e4_d72_G3", 0, 5, 200, 12, 4, 72, 1),
    # G = 16 (two passes of 8 heads), 7 blocks
    ("e5_G16_ctx100", 0, 1, 100, 16, 1, 128, 0),
    # several splits of several tiles each, G = 2
    ("e6_splits_tiles", 1, 25, 320, 8, 4, 128, 1),
    # d 256 with G = 8 and an odd context, random lengths
    ("e7_d256_ctx77", 0, 3, 77, 16, 2, 256, 1),
    # 2 cache blocks per split (32-position tiles: the segmented softmax at P = 32), 3 splits
    ("e8_p32_G4", 1, 60, 96, 8, 2, 128, 1),
]


def main():
    cand = json.load(open(sys.argv[1]))
    quick = "--quick" in sys.argv
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    params = {k: v["default"] for k, v in cand["parameters"].items()}
    L = cand["launches"][0]
    lines = []
    for i, (name, dt, S, ctx, hq, hkv, d, lm) in enumerate(CASES):
        if (quick and name.startswith("s0")) or (only and name not in only):
            continue
        names = dict(params, num_seqs=S, ctx_len=ctx, num_heads=hq, num_kv_heads=hkv, head_size=d)
        g = [ev(x, names) for x in L["grid"]]
        blk = ev(L["block"][0], names)
        sm = ev(L["shared_bytes"], names)
        cx = ev(L["cluster"][0], names) if "cluster" in L else 1
        assert 1 <= cx <= 8 and g[0] % cx == 0, (name, cx, g)
        bps = ev(L["args"][10]["int"], names)
        assert ev(L["args"][9]["int"], names) == -(-ctx // 16)
        pb = ev(cand["workspaces"]["partials"]["bytes"], names)
        cb = ev(cand["workspaces"]["counters"]["bytes"], names)
        assert sm <= 227 * 1024, (name, sm)
        lines.append(f"{name} {dt} {S} {ctx} {hq} {hkv} {d} {lm} {1000 + i} {g[0]} {g[1]} {g[2]} {blk} {sm} {bps} {pb} {cb} {cx}")
    r = subprocess.run([sys.argv[2]], input="\n".join(lines) + "\n", text=True)
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
