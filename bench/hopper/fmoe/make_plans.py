#!/usr/bin/env python3
"""Launch plans of the fused_moe kernel with the TMA / skip / split-K / shared-memory-map
parameters (issue 23, helper fmoe): candidate JSONs for kopt eval --candidate (source
fused_moe_tma.cu here), and, with --config, the plan that configs/bench/fused_moe.json carries
as its baseline (source configs/bench/fused_moe_baseline.cu: copy fused_moe_tma.cu there).
    python3 bench/hopper/fmoe/make_plans.py [--config]"""
import json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ORD = "(1 - min(1, inter / (ORDMAX + 1)))"  # 1: ordered mode
ints = lambda names: [{"int": n, "type": "int32"} for n in names]
COMMON = ["tokens", "hidden", "inter", "top_k", "experts"]
BOUND = "(ceil_div(tokens * top_k, 128) + experts)"  # the route's tile bound
# The tile-width rule of the 2026-12-02 baseline (bench/hopper/fused_moe_grouped/make_plans.py).
W1_RULE = "min(1, tokens * top_k / (4 * experts))"
W2_RULE = "min(1, min(experts, tokens * top_k) * ceil_div(tokens * top_k, 128 * experts) * (hidden / 256) / 67)"


def plan(source, tma, skip, split, maps_smem=1, red4=0, epi=4, w1=W1_RULE, w2=W2_RULE, ordmax=512):
    par = lambda v: {"values": [v], "default": v}
    return {
        "source_file": source,
        "parameters": {"ORDMAX": par(ordmax), "ROUTE_AGG": par(0), "MOE_TMA": par(tma),
                       "MOE_SKIP": par(skip), "MOE_SPLIT": par(split), "SPLIT_EPI": par(epi),
                       "MAPS_SMEM": par(maps_smem), "RED_V4": par(red4)},
        "workspaces": {
            "route": {"bytes": "4 * (1 + 3 * " + BOUND + " + tokens * top_k)", "zero_init": False},
            "act": {"bytes": "2 * tokens * top_k * inter", "zero_init": False},
            "ys": {"bytes": "2 * tokens * top_k * hidden * " + ORD + " + 256", "zero_init": False},
            "maps": {"bytes": "640", "zero_init": False},
        },
        "launches": [
            {"kernel": "moe_route", "grid": [1], "block": [1024],
             "args": [{"tensor": "topk_ids"}, {"workspace": "route"}] + ints(["tokens", "top_k", "experts"])
                     + [{"tensor": "w1"}, {"tensor": "w2"}, {"workspace": "act"}, {"workspace": "maps"}]
                     + ints(["hidden", "inter"])},
            {"kernel": "moe_gemm1", "grid": [f"min(132, {BOUND} * (inter / (64 + 64 * {w1})))"],
             "block": [384], "shared_bytes": "4 * 49152 + 2048",
             "args": [{"tensor": "hidden_states"}, {"tensor": "w1"}, {"workspace": "route"},
                      {"workspace": "act"}, {"tensor": "out"}, {"workspace": "maps"}]
                     + ints(COMMON + [w1, "1 - " + ORD])},
            {"kernel": "moe_gemm2", "grid": [f"min(132, {BOUND} * (hidden / (128 + 128 * {w2})))"],
             "block": [384], "shared_bytes": "4 * 49152 + 2048",
             "args": [{"workspace": "act"}, {"tensor": "w2"}, {"workspace": "route"},
                      {"tensor": "topk_weights"}, {"tensor": "out"}, {"workspace": "ys"},
                      {"workspace": "maps"}] + ints(COMMON + [w2, ORD])},
            {"kernel": "moe_reduce", "grid": [f"ceil_div(tokens * hidden / 8, 256) * {ORD} + 1 - {ORD}"],
             "block": [256],
             "args": [{"workspace": "ys"}, {"tensor": "out"}] + ints(["tokens", "hidden", "top_k", ORD])},
        ],
    }


VARIANTS = {  # name: (MOE_TMA, MOE_SKIP, MOE_SPLIT, MAPS_SMEM[, RED_V4])
    "v_tma": (1, 0, 1, 0),
    "v_tma_skip": (1, 1, 1, 0),
    "v_tma_skip_split": (1, 1, 4, 0),  # measured 2026-12-03 12:44 (then with the 20 B spill)
    "v_tss_smem": (1, 1, 4, 1),  # + the tensor maps built in shared memory
    "v_tss_smem_red4": (1, 1, 4, 1, 1),  # + gemm2's atomic epilogue with red.v4
    "v_cpasync_skip_split": (0, 1, 4, 0),
}
DEFAULT = (1, 1, 4, 1)

# Probes of 2026-12-04 (helper fmoe): one plan change each, on every shape, so that the per-shape
# rows say which choice wins where (same cubin as the baseline: only plan expressions change).
PROBES = {  # name: plan overrides
    "p_w1n": {"w1": "0"},  # gemm1 at BN 128: twice the tiles, against gemm1's wave tail
    "p_w2n": {"w2": "0"},  # gemm2 at BN 128 (and the split rule sees twice the tiles)
    "p_atm": {"ordmax": 256},  # atomic combine at inter 384 too (no ys round trip, no reduce)
}

if __name__ == "__main__":
    if "--probes" in sys.argv:  # into the directory given after it, source next to them
        out = sys.argv[sys.argv.index("--probes") + 1]
        for name, kw in PROBES.items():
            with open(os.path.join(out, name + ".json"), "w") as f:
                f.write(json.dumps(plan("fused_moe_baseline.cu", *DEFAULT, **kw), indent=1) + "\n")
        sys.exit(0)
    src = "fused_moe_tma.cu"
    for name, v in VARIANTS.items():
        with open(os.path.join(HERE, name + ".json"), "w") as f:
            f.write(json.dumps(plan(src, *v), indent=1) + "\n")
    if "--config" in sys.argv:
        cfg_path = os.path.join(HERE, "..", "..", "..", "configs", "bench", "fused_moe.json")
        text = open(cfg_path).read()
        base = json.dumps(plan("fused_moe_baseline.cu", *DEFAULT), indent=2).replace("\n", "\n  ")
        text = text[: text.rindex(',\n  "baseline": ')] + "\n}\n"
        end = text.rstrip().rindex("}")
        text = text[:end].rstrip() + ',\n  "baseline": ' + base + "\n}\n"
        assert json.loads(text)["baseline"] == json.loads(base)
        with open(cfg_path, "w") as f:
            f.write(text)
