#!/usr/bin/env python3
"""Writes the launch plans of configs/bench/fused_moe_baseline.cu: candidate JSONs for kopt eval
(--candidate) and the plan that configs/bench/fused_moe.json carries as its
baseline. Parameters: W1, W2 (BN 256 when 1, 128 when 0, of gemm1 and gemm2;
either a constant or an expression of the axes) and ORDMAX (ordered scatter
through moe_reduce when inter <= ORDMAX, atomic otherwise).
    python3 bench/hopper/fused_moe_grouped/make_plans.py"""
import json, os

HERE = os.path.dirname(os.path.abspath(__file__))
ORD = "(1 - min(1, inter / (ORDMAX + 1)))"  # 1: ordered mode
ints = lambda names: [{"int": n, "type": "int32"} for n in names]
COMMON = ["tokens", "hidden", "inter", "top_k", "experts"]
BOUND = "(ceil_div(tokens * top_k, 128) + experts)"  # the route's tile bound


def plan(source, w1, w2, ordmax, route_agg=0):
    return {
        "source_file": source,
        "parameters": {"ORDMAX": {"values": [ordmax], "default": ordmax},
                       "ROUTE_AGG": {"values": [route_agg], "default": route_agg}},
        "workspaces": {
            "route": {"bytes": "4 * (1 + 3 * " + BOUND + " + tokens * top_k)", "zero_init": False},
            "act": {"bytes": "2 * tokens * top_k * inter", "zero_init": False},
            "ys": {"bytes": "2 * tokens * top_k * hidden * " + ORD + " + 256", "zero_init": False},
        },
        "launches": [
            {"kernel": "moe_route", "grid": [1], "block": [1024],
             "args": [{"tensor": "topk_ids"}, {"workspace": "route"}] + ints(["tokens", "top_k", "experts"])},
            {"kernel": "moe_gemm1", "grid": [f"min(132, {BOUND} * (inter / (64 + 64 * {w1})))"],
             "block": [384], "shared_bytes": "4 * 49152 + 2048",
             "args": [{"tensor": "hidden_states"}, {"tensor": "w1"}, {"workspace": "route"},
                      {"workspace": "act"}, {"tensor": "out"}] + ints(COMMON + [w1, "1 - " + ORD])},
            {"kernel": "moe_gemm2", "grid": [f"min(132, {BOUND} * (hidden / (128 + 128 * {w2})))"],
             "block": [384], "shared_bytes": "4 * 49152 + 2048",
             "args": [{"workspace": "act"}, {"tensor": "w2"}, {"workspace": "route"},
                      {"tensor": "topk_weights"}, {"tensor": "out"}, {"workspace": "ys"}]
                     + ints(COMMON + [w2, ORD])},
            {"kernel": "moe_reduce", "grid": [f"ceil_div(tokens * hidden / 8, 256) * {ORD} + 1 - {ORD}"],
             "block": [256],
             "args": [{"workspace": "ys"}, {"tensor": "out"}] + ints(["tokens", "hidden", "top_k", ORD])},
        ],
    }


VARIANTS = {  # name: (W1, W2, ORDMAX)
    "wg_n256_n256": ("1", "1", 512),
    "wg_n128_n128": ("0", "0", 512),
    "wg_n256_n128": ("1", "0", 512),
    "wg_n128_n256": ("0", "1", 512),
}
# The baseline's rule (measured 2026-12-02, docs/benchmarks.md): gemm1 at BN 128
# when the slots average under 4 rows per expert (decode: twice the blocks to
# stream the weights); gemm2 at BN 128 when its BN-256 tile count (estimated:
# experts hit x tiles per expert x hidden / 256) is under half a wave.
W1_RULE = "min(1, tokens * top_k / (4 * experts))"
W2_RULE = "min(1, min(experts, tokens * top_k) * ceil_div(tokens * top_k, 128 * experts) * (hidden / 256) / 67)"
VARIANTS["wg_rule"] = (W1_RULE, W2_RULE, 512)
VARIANTS["wg_rule_agg"] = (W1_RULE, W2_RULE, 512, 1)

if __name__ == "__main__":
    for name, v in VARIANTS.items():
        with open(os.path.join(HERE, name + ".json"), "w") as f:
            f.write(json.dumps(plan("../../../configs/bench/fused_moe_baseline.cu", *v), indent=1) + "\n")
    # configs/bench/fused_moe.json: "baseline" = this plan over fused_moe_baseline.cu
    cfg_path = os.path.join(HERE, "..", "..", "..", "configs", "bench", "fused_moe.json")
    text = open(cfg_path).read()
    cfg = json.loads(text)
    base = json.dumps(plan("fused_moe_baseline.cu", W1_RULE, W2_RULE, 512), indent=2).replace("\n", "\n  ")
    if "baseline" in cfg:  # replace the object written before: it is the last key
        text = text[: text.rindex(',\n  "baseline": ')] + "\n}\n"
    end = text.rstrip().rindex("}")
    text = text[:end].rstrip() + ',\n  "baseline": ' + base + "\n}\n"
    assert json.loads(text)["baseline"] == json.loads(base)
    with open(cfg_path, "w") as f:
        f.write(text)
