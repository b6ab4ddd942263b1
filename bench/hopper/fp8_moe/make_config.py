#!/usr/bin/env python3
"""Writes the baseline block of configs/bench/fp8_blockscale_fused_moe.json (launch plan of
fp8_blockscale_fused_moe_baseline.cu) and candidate files for variants.
    python3 make_config.py CONFIG_IN CONFIG_OUT [CANDIDATE_DIR]"""
import json, sys, copy

GE = "min(1, tokens / 64)"          # tensor-core path
LT = "(1 - min(1, tokens / 64))"    # GEMV path
TILES = "(ceil_div(tokens * top_k, 64) + num_experts)"


def on(expr, en):
    return f"({expr}) * {en} + (1 - {en})"


def ints(*names):
    return [{"int": n, "type": "int32"} for n in names]


def plan(source="fp8_blockscale_fused_moe_baseline.cu", gv_warps=4, gv_minb=8, f8_int=0):
    p = {
        "source_file": source,
        "parameters": {
            "GV_WARPS": {"values": [gv_warps], "default": gv_warps},
            "GV_MINB": {"values": [gv_minb], "default": gv_minb},
            "F8_INT": {"values": [f8_int], "default": f8_int},
        },
        "workspaces": {
            "lists": {"bytes": f"num_experts * tokens * 4 * {GE} + 256", "zero_init": False},
            "counts": {"bytes": "num_experts * 4", "zero_init": False},
            "act": {"bytes": "tokens * top_k * inter * 2", "zero_init": False},
            "y": {"bytes": f"tokens * top_k * hidden * 4 * {GE} + 256", "zero_init": False},
        },
        "launches": [
            {"kernel": "fmoe_stage1",
             "grid": [f"tokens * top_k * {LT} + num_experts * {GE}", f"(inter / 16) * {LT} + {GE}"],
             "block": ["32 * GV_WARPS"], "shared_bytes": f"(2 * hidden + 1024) * {LT} + 16",
             "args": [{"tensor": "hidden_states"}, {"tensor": "a_scale"}, {"tensor": "w1"},
                      {"tensor": "fc1_scale"}, {"tensor": "topk_ids"}, {"workspace": "act"},
                      {"workspace": "lists"}, {"workspace": "counts"}]
                     + ints("tokens", "hidden", "inter", "top_k", LT)},
            {"kernel": "fmoe_tc1", "grid": [on("inter / 64", GE), on(TILES, GE)], "block": [128],
             "shared_bytes": "3 * (64 * 144 + 128 * 144)",
             "args": [{"tensor": "hidden_states"}, {"tensor": "a_scale"}, {"tensor": "w1"},
                      {"tensor": "fc1_scale"}, {"workspace": "lists"}, {"workspace": "counts"},
                      {"workspace": "act"}]
                     + ints("tokens", "hidden", "inter", "top_k", "num_experts", GE)},
            {"kernel": "fmoe_tc2", "grid": [on("hidden / 128", GE), on(TILES, GE)], "block": [128],
             "shared_bytes": "3 * (64 * 288 + 128 * 144)",
             "args": [{"workspace": "act"}, {"tensor": "w2"}, {"tensor": "fc2_scale"},
                      {"workspace": "lists"}, {"workspace": "counts"}, {"workspace": "y"}]
                     + ints("tokens", "hidden", "inter", "num_experts", GE)},
            {"kernel": "fmoe_stage4",
             "grid": [f"tokens * {LT} + ceil_div(tokens * hidden, 32 * GV_WARPS) * {GE}",
                      f"(hidden / 16) * {LT} + {GE}"],
             "block": ["32 * GV_WARPS"], "shared_bytes": f"(2 * top_k * inter + 1024) * {LT} + 16",
             "args": [{"workspace": "act"}, {"tensor": "w2"}, {"tensor": "fc2_scale"},
                      {"tensor": "topk_ids"}, {"tensor": "topk_weights"}, {"workspace": "y"},
                      {"tensor": "out"}]
                     + ints("tokens", "hidden", "inter", "top_k", LT)},
        ],
    }
    return p


VARIANTS = {  # name: (GV_WARPS, GV_MINB, F8_INT)
    "w4": (4, 8, 0), "w4int": (4, 8, 1), "w8": (8, 4, 0), "w4r": (4, 1, 0), "w8int": (8, 4, 1), "w8r": (8, 1, 0), "w4m6": (4, 6, 0)}


def compact(obj, ind="  "):
    """JSON in the config files' style: one launch per line group, short lists inline."""
    return json.dumps(obj, indent=2).replace("\n", "\n" + ind)


if __name__ == "__main__":
    # python3 make_config.py CONFIG_IN CONFIG_OUT BASELINE_VARIANT [SEED_VARIANT [CAND_DIR CAND...]]
    src = open(sys.argv[1]).read()
    base = VARIANTS[sys.argv[3]]
    block = '  "baseline": ' + compact(plan(gv_warps=base[0], gv_minb=base[1], f8_int=base[2])) + ",\n"
    if len(sys.argv) > 4 and sys.argv[4] != "-":
        sd = VARIANTS[sys.argv[4]]
        block += '  "seed": ' + compact(plan(gv_warps=sd[0], gv_minb=sd[1], f8_int=sd[2])) + ",\n"
    k = src.index('  "reference": {')
    out = src[:k] + block + src[k:]
    json.loads(out)
    open(sys.argv[2], "w").write(out)
    for name in sys.argv[6:]:
        v = VARIANTS[name]
        json.dump(plan(gv_warps=v[0], gv_minb=v[1], f8_int=v[2]), open(f"{sys.argv[5]}/cand_{name}.json", "w"), indent=2)
