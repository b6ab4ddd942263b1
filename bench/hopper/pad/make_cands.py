#!/usr/bin/env python3
"""Writes the candidates of the split-context paged_attention_decode kernel (PAD_SPLIT = 1 of
configs/bench/paged_attention_decode_baseline.cu) for both configs:
    python3 bench/hopper/pad/make_cands.py [OUTDIR [SOURCE_FILE]]
OUTDIR defaults to this folder, SOURCE_FILE (relative to OUTDIR) to the shipped .cu.
The launch-plan expressions below are the ones pad_emu.py evaluates for the CPU check."""
import json, os, sys

H = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1] if len(sys.argv) > 1 else H
src = sys.argv[2] if len(sys.argv) > 2 else os.path.relpath(
    os.path.join(H, "../../../configs/bench/paged_attention_decode_baseline.cu"), out)

NB = "ceil_div(ctx_len, 16)"  # the table width (max_blocks)
# Splits per sequence: enough blocks (splits x sequences x kv heads) to reach PAD_CTAS,
# at most one split per cache block.
NS = f"max(1, min({NB}, ceil_div(PAD_CTAS, num_seqs * num_kv_heads)))"
BPS = f"ceil_div({NB}, {NS})"  # cache blocks per split
GZ = f"ceil_div({NB}, {BPS})"  # the splits that the longest sequence fills
TILE = f"min(PAD_TB, {BPS})"
STAGES = f"min(2, ceil_div({BPS}, PAD_TB))"
G = "(num_heads / num_kv_heads)"
# kvs [STAGES][TILE][K, V][16 D] + qraw [G][D] (2-byte elements), then floats: qs, accs
# [G][D], red [G][16 max(NW, TILE)], prob [G][16 TILE], (max, sum) then merge weights
# [GZ][G] (float2), max / sum / rescale [G], the ticket flag.
SMEM = (f"{STAGES} * {TILE} * head_size * 64 + {G} * head_size * 2 + 4 * (2 * {G} * head_size"
        f" + {G} * 16 * max(PAD_NT / 32, {TILE}) + {G} * {TILE} * 16 + 3 * {G} + 2 * {GZ} * {G} + 1)")
assert len(SMEM) < 1024, len(SMEM)

# PAD_CLUSTER = 1: the splits of a (sequence, kv head) are one cluster (at most 8, portable), so
# the split count is capped at 8 and the cluster is the grid's x extent.
NS_CL = f"max(1, min({NB}, 8, ceil_div(PAD_CTAS, num_seqs * num_kv_heads)))"
BPS_CL = f"ceil_div({NB}, {NS_CL})"
GZ_CL = f"ceil_div({NB}, {BPS_CL})"
TILE_CL = f"min(PAD_TB, {BPS_CL})"
STAGES_CL = f"min(2, ceil_div({BPS_CL}, PAD_TB))"
SMEM_CL = (f"{STAGES_CL} * {TILE_CL} * head_size * 64 + {G} * head_size * 2 + 4 * (2 * {G} * head_size"
           f" + {G} * 16 * max(PAD_NT / 32, {TILE_CL}) + {G} * {TILE_CL} * 16 + 3 * {G} + 2 * {GZ_CL} * {G} + 1)")
assert len(SMEM_CL) < 1024, len(SMEM_CL)

VARIANTS = {  # name: (PAD_NT, PAD_TB, PAD_CTAS)
    "split": (128, 4, 264),
    "split_nt256": (256, 4, 264),
    "split_nt512": (512, 4, 264),
    "split_c528": (128, 4, 528),
    "split_c64": (128, 4, 64),
}
# name: (PAD_NT, PAD_TB, PAD_CTAS, extra parameters); the cluster merge and the L2 prefetch
VARIANTS2 = {
    "cl128": (128, 4, 264, {"PAD_CLUSTER": 1}),
    "cl256": (256, 4, 264, {"PAD_CLUSTER": 1}),
    "clpf128": (128, 4, 264, {"PAD_CLUSTER": 1, "PAD_PF": 1}),
    "clpf256": (256, 4, 264, {"PAD_CLUSTER": 1, "PAD_PF": 1}),
    "pf256": (256, 4, 264, {"PAD_PF": 1}),
}


def cand2(kernel, nt, tb, ctas, extra):
    c = cand(kernel, nt, tb, ctas)
    for k, v in extra.items():
        c["parameters"][k] = {"values": [v], "default": v}
    if extra.get("PAD_CLUSTER"):
        # no workspace use (the kernel still takes the two pointers)
        c["workspaces"] = {"partials": {"bytes": "16", "zero_init": False},
                           "counters": {"bytes": "16", "zero_init": False}}
        L = c["launches"][0]
        L["grid"][0] = GZ_CL
        L["cluster"] = [GZ_CL, 1, 1]
        L["shared_bytes"] = SMEM_CL
        L["args"][10]["int"] = BPS_CL
    return c


def cand(kernel, nt, tb, ctas):
    return {
        "source_file": src,
        "parameters": {
            "PAD_SPLIT": {"values": [1], "default": 1},
            "PAD_NT": {"values": [nt], "default": nt},
            "PAD_TB": {"values": [tb], "default": tb},
            "PAD_CTAS": {"values": [ctas], "default": ctas},
        },
        "workspaces": {
            "partials": {"bytes": f"num_seqs * num_heads * {GZ} * (head_size + 2) * 4", "zero_init": False},
            "counters": {"bytes": "num_seqs * num_kv_heads * 4", "zero_init": True},
        },
        "launches": [{
            "kernel": kernel,
            "grid": [GZ, "num_kv_heads", "num_seqs"],
            "block": ["PAD_NT"],
            "shared_bytes": SMEM,
            "args": [
                {"tensor": "query"}, {"tensor": "k_cache"}, {"tensor": "v_cache"},
                {"tensor": "block_tables"}, {"tensor": "seq_lens"}, {"tensor": "out"},
                {"int": "num_heads", "type": "int32"}, {"int": "num_kv_heads", "type": "int32"},
                {"int": "head_size", "type": "int32"}, {"int": NB, "type": "int32"},
                {"int": BPS, "type": "int32"},
                {"workspace": "partials"}, {"workspace": "counters"},
            ],
        }],
    }


if __name__ == "__main__":
    for name, (nt, tb, ctas) in VARIANTS.items():
        for suf, k in (("bf16", "paged_attention_decode_split_bf16"), ("fp16", "paged_attention_decode_split_fp16")):
            with open(os.path.join(out, f"cand_{name}_{suf}.json"), "w") as f:
                json.dump(cand(k, nt, tb, ctas), f, indent=1)
                f.write("\n")
    for name, (nt, tb, ctas, extra) in VARIANTS2.items():
        for suf, k in (("bf16", "paged_attention_decode_split_bf16"), ("fp16", "paged_attention_decode_split_fp16")):
            with open(os.path.join(out, f"cand_{name}_{suf}.json"), "w") as f:
                json.dump(cand2(k, nt, tb, ctas, extra), f, indent=1)
                f.write("\n")
