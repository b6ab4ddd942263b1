#!/usr/bin/env python3
"""Writes configs/bench/<op>.json for the Atrex-Bench operators defined here,
from the Atrex-Bench shapes (bench/suite/atrex.py: weights, shape ids).

The configs are committed; this script documents how they were made and
regenerates them after a change to a definition. It keeps a config's
existing "baseline" entry (written by hand), so rerunning it does not
lose baselines. Usage: make_configs.py [OP ...] [--data DIR]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import atrex  # noqa: E402

OUT = os.path.join(atrex.REPO, "configs", "bench")

BF16_TOL = {"atol": 0.01, "rtol": 0.02, "matched_ratio": 1.0}
FP16_TOL = {"atol": 0.002, "rtol": 0.005, "matched_ratio": 1.0}
FP32_TOL = {"atol": 1e-4, "rtol": 1e-4, "matched_ratio": 1.0}
EXACT = {"atol": 0, "rtol": 0, "matched_ratio": 1.0}
# One e4m3 step is 6.25-12.5 % of the value (2^-9 absolute among
# subnormals): rtol 0.13 admits a single rounding-step disagreement, which
# differences of one fp32 ulp before the cast can cause, but nothing more.
FP8_TOL = {"atol": 0.002, "rtol": 0.13, "matched_ratio": 1.0}


def tensor(shape, dtype, desc="", gen=None, **kw):
    t = {"shape": shape, "dtype": dtype}
    if gen is not None:
        t["generator"] = gen
    if desc:
        t["description"] = desc
    t.update(kw)
    return t


def normal(mean=0, stddev=1, scale=None):
    g = {"kind": "normal", "mean": mean, "stddev": stddev}
    if scale is not None:
        g["scale"] = scale
    return g


def arg_t(name):
    return {"tensor": name}


def arg_i(expr, t="int32"):
    return {"int": expr, "type": t}


def arg_s(name, t="float32"):
    return {"scalar": name, "type": t}


def workloads(op, data, axes_of, id_of, keep=None):
    """One workload per shape: id s<sid>_<id_of(axes)>, weight per the rule."""
    rec = atrex.op_record(op, data)
    out = []
    for sid in sorted(rec["shapes"], key=int):
        s = rec["shapes"][sid]
        if keep is not None and not keep(s):
            continue
        axes = axes_of(s["input_kwargs"], s["init_kwargs"] or {})
        w = {"id": "s%s_%s" % (sid, id_of(axes)), "axes": axes, "weight": s["weight"]}
        if s["description"]:
            w["description"] = "atrex shape %s: %s" % (sid, s["description"].strip())
        out.append(w)
    return out


DEFS = {}


def define(fn):
    DEFS[fn.__name__] = fn
    return fn


# ---------------------------------------------------------------- rms_norm
@define
def rms_norm(data):
    wl = workloads("rms_norm", data,
                   lambda k, i: {"tokens": k["token_count"], "hidden": k["hidden_size"]},
                   lambda a: "t%d_h%d" % (a["tokens"], a["hidden"]))
    return {
        "name": "rms_norm",
        "op_type": "rmsnorm",
        "description": ("RMSNorm (vLLM rms_norm): out = bf16((x * rinv) * weight) per row with "
                        "rinv = 1 / sqrt(mean(x^2) + eps), fp32 math, one rounding at the end. "
                        "x ~ 0.02 N(0,1), weight ~ 1 + 0.02 N(0,1). Shapes from Atrex-Bench "
                        "(vLLM/SGLang traces)."),
        "tags": ["norm", "memory-bound", "bf16", "atrex-bench"],
        "axes": {"tokens": {"type": "var", "description": "rows"},
                 "hidden": {"type": "var", "description": "row length"}},
        "scalars": {"eps": {"dtype": "float32", "value": 1e-6, "description": "inside the square root"}},
        "inputs": {"x": tensor(["tokens", "hidden"], "bfloat16", gen=normal(0, 0.02)),
                   "weight": tensor(["hidden"], "bfloat16", gen=normal(1, 0.02))},
        "outputs": {"out": tensor(["tokens", "hidden"], "bfloat16")},
        "tolerance": BF16_TOL,
        "roofline": {"flops": "3 * tokens * hidden + tokens", "flop_unit": "fp32"},
        "workloads": wl,
        "reference": {
            "source_file": "rms_norm_reference.cu",
            "launches": [{"kernel": "rms_norm_ref", "grid": ["ceil_div(tokens, 128)"], "block": [128],
                          "args": [arg_t("x"), arg_t("weight"), arg_t("out"), arg_i("tokens"),
                                   arg_i("hidden"), arg_s("eps")]}]},
    }


# ------------------------------------------------------ fused_add_rms_norm
@define
def fused_add_rms_norm(data):
    wl = workloads("fused_add_rms_norm", data,
                   lambda k, i: {"tokens": k["token_count"], "hidden": k["hidden_size"]},
                   lambda a: "t%d_h%d" % (a["tokens"], a["hidden"]))
    return {
        "name": "fused_add_rms_norm",
        "op_type": "rmsnorm",
        "description": ("Residual add then RMSNorm (vLLM fused_add_rms_norm): r = bf16(x + residual) "
                        "(rounded once); out = bf16(r * (1 / sqrt(mean(r^2) + eps)) * weight) in fp32 "
                        "on the rounded r; residual_out = r. Out of place, as in Atrex-Bench (vLLM "
                        "overwrites its inputs). x ~ 0.02 N(0,1), residual ~ N(0,1), "
                        "weight ~ 1 + 0.02 N(0,1)."),
        "tags": ["norm", "memory-bound", "bf16", "atrex-bench"],
        "axes": {"tokens": {"type": "var", "description": "rows"},
                 "hidden": {"type": "var", "description": "row length"}},
        "scalars": {"eps": {"dtype": "float32", "value": 1e-6, "description": "inside the square root"}},
        "inputs": {"x": tensor(["tokens", "hidden"], "bfloat16", gen=normal(0, 0.02)),
                   "residual": tensor(["tokens", "hidden"], "bfloat16", gen=normal(0, 1)),
                   "weight": tensor(["hidden"], "bfloat16", gen=normal(1, 0.02))},
        "outputs": {"out": tensor(["tokens", "hidden"], "bfloat16"),
                    "residual_out": tensor(["tokens", "hidden"], "bfloat16", "bf16(x + residual)",
                                           tolerance=EXACT)},
        "tolerance": BF16_TOL,
        "roofline": {"flops": "4 * tokens * hidden + tokens", "flop_unit": "fp32"},
        "workloads": wl,
        "reference": {
            "source_file": "fused_add_rms_norm_reference.cu",
            "launches": [{"kernel": "fused_add_rms_norm_ref", "grid": ["ceil_div(tokens, 128)"], "block": [128],
                          "args": [arg_t("x"), arg_t("residual"), arg_t("weight"), arg_t("out"),
                                   arg_t("residual_out"), arg_i("tokens"), arg_i("hidden"), arg_s("eps")]}]},
    }


# ------------------------------------------------------------ silu_and_mul
@define
def silu_and_mul(data):
    wl = workloads("silu_and_mul", data,
                   lambda k, i: {"tokens": k["shape"][0], "d": k["shape"][1] // 2},
                   lambda a: "n%d_d%d" % (a["tokens"], a["d"]))
    return {
        "name": "silu_and_mul",
        "op_type": "activation",
        "description": ("SwiGLU activation (vLLM silu_and_mul): x is [tokens, 2d]; "
                        "out[n, j] = bf16(float(bf16(silu(x[n, j]))) * x[n, d + j]), silu(z) = z / (1 + exp(-z)) "
                        "in fp32; two roundings. x ~ N(0,1)."),
        "tags": ["activation", "memory-bound", "bf16", "atrex-bench"],
        "axes": {"tokens": {"type": "var", "description": "rows"},
                 "d": {"type": "var", "description": "half of the input row; output row length"}},
        "inputs": {"x": tensor(["tokens", "2 * d"], "bfloat16", gen=normal(0, 1))},
        "outputs": {"out": tensor(["tokens", "d"], "bfloat16")},
        "tolerance": BF16_TOL,
        "roofline": {"flops": "5 * tokens * d", "flop_unit": "fp32"},
        "workloads": wl,
        "reference": {
            "source_file": "silu_and_mul_reference.cu",
            "launches": [{"kernel": "silu_and_mul_ref", "grid": ["ceil_div(tokens * d, 256)"], "block": [256],
                          "args": [arg_t("x"), arg_t("out"), arg_i("tokens * d", "int64"), arg_i("d")]}]},
    }


# ------------------------------------------------ fp8_dynamic_per_token_quant
@define
def fp8_dynamic_per_token_quant(data):
    wl = workloads("fp8_dynamic_per_token_quant", data,
                   lambda k, i: {"tokens": k["token_count"], "hidden": k["hidden_size"]},
                   lambda a: "t%d_h%d" % (a["tokens"], a["hidden"]))
    return {
        "name": "fp8_dynamic_per_token_quant",
        "op_type": "quantization",
        "description": ("Dynamic per-row FP8 quantization. On NVIDIA the native format is e4m3fn "
                        "(max 448); Atrex-Bench uses AMD's e4m3fnuz (max 240), so 240 becomes 448 "
                        "throughout. Per row: m = max(max|x|, 1e-12); scale = m * fp32(1/448) "
                        "(a multiplication by the rounded reciprocal, as PyTorch evaluates tensor / "
                        "constant, not an IEEE division); inv = 1 / scale (correctly rounded); "
                        "q = e4m3fn(clamp(x * inv, -448, 448)) rounded to nearest even. "
                        "Outputs q [tokens, hidden] and scale [tokens]. x ~ N(0,1) bf16. Exact fp8 "
                        "rounding needs IEEE division: no fast math."),
        "tags": ["quantization", "fp8", "memory-bound", "atrex-bench"],
        "axes": {"tokens": {"type": "var", "description": "rows"},
                 "hidden": {"type": "var", "description": "row length"}},
        "inputs": {"x": tensor(["tokens", "hidden"], "bfloat16", gen=normal(0, 1))},
        "outputs": {"q": tensor(["tokens", "hidden"], "float8_e4m3fn", "quantized x"),
                    "scale": tensor(["tokens"], "float32", "per-row scale", tolerance={"atol": 0, "rtol": 1e-6})},
        "tolerance": FP8_TOL,
        "roofline": {"flops": "tokens * hidden + tokens", "flop_unit": "fp32"},
        "workloads": wl,
        "reference": {
            "source_file": "fp8_dynamic_per_token_quant_reference.cu",
            "launches": [{"kernel": "fp8_per_token_quant_ref", "grid": ["ceil_div(tokens, 128)"], "block": [128],
                          "args": [arg_t("x"), arg_t("q"), arg_t("scale"), arg_i("tokens"), arg_i("hidden")]}]},
    }


# ---------------------------------------------------------- reshape_and_cache
@define
def reshape_and_cache(data):
    wl = workloads("reshape_and_cache", data,
                   lambda k, i: {"tokens": k["shape"][0], "heads": k["shape"][1], "head_dim": k["shape"][2]},
                   lambda a: "t%d_h%d_d%d" % (a["tokens"], a["heads"], a["head_dim"]))
    cache = ["ceil_div(tokens, 16)", "block_size", "heads", "head_dim"]
    return {
        "name": "reshape_and_cache",
        "op_type": "kv_cache",
        "description": ("Scatter new K/V rows into a paged cache in the flash layout [blocks, 16, heads, "
                        "head_dim] (vLLM reshape_and_cache_flash), out of place as in Atrex-Bench: the "
                        "outputs are copies of the input caches in which, for each token t with "
                        "slot = slot_mapping[t] >= 0, row slot (of the cache viewed as [blocks * 16, heads, "
                        "head_dim]) is key[t] (value: value[t]), an exact copy; every other row keeps the "
                        "input cache's contents. The cache has ceil(tokens / 16) blocks as in Atrex-Bench. "
                        "Simplification: Atrex-Bench's slot_mapping is the identity and its caches are "
                        "zeros; here slot_mapping is a random injective map into the cache's slots and the "
                        "caches hold N(0,1) noise, which also checks that unwritten rows are kept."),
        "tags": ["kv-cache", "memory-bound", "data-movement", "bf16", "atrex-bench"],
        "axes": {"tokens": {"type": "var", "description": "new tokens"},
                 "heads": {"type": "var", "description": "KV heads"},
                 "head_dim": {"type": "var", "description": "head size"},
                 "block_size": {"type": "const", "value": 16, "description": "tokens per cache block"}},
        "inputs": {"key": tensor(["tokens", "heads", "head_dim"], "bfloat16", gen=normal()),
                   "value": tensor(["tokens", "heads", "head_dim"], "bfloat16", gen=normal()),
                   "key_cache": tensor(cache, "bfloat16", "paged key cache before the update", gen=normal()),
                   "value_cache": tensor(cache, "bfloat16", "paged value cache before the update", gen=normal()),
                   "slot_mapping": tensor(["tokens"], "int64", "cache slot of each token (distinct)",
                                          gen={"kind": "permutation", "n": "ceil_div(tokens, 16) * 16"})},
        "outputs": {"key_cache_out": tensor(cache, "bfloat16", "key cache after the update"),
                    "value_cache_out": tensor(cache, "bfloat16", "value cache after the update")},
        "tolerance": EXACT,
        "roofline": {"flops": "0", "flop_unit": "fp32"},
        "workloads": wl,
        "reference": {
            "source_file": "reshape_and_cache_reference.cu",
            "launches": [{"kernel": "cache_copy_ref", "grid": ["ceil_div(tokens, 16) * 16"], "block": [128],
                          "args": [arg_t("key_cache"), arg_t("value_cache"), arg_t("key_cache_out"),
                                   arg_t("value_cache_out"), arg_i("heads * head_dim")]},
                         {"kernel": "reshape_and_cache_ref", "grid": ["tokens"], "block": [128],
                          "args": [arg_t("key"), arg_t("value"), arg_t("key_cache_out"), arg_t("value_cache_out"),
                                   arg_t("slot_mapping"), arg_i("heads * head_dim")]}]},
    }


# ------------------------------------------------------ moe_align_block_size
@define
def moe_align_block_size(data):
    wl = workloads("moe_align_block_size", data,
                   lambda k, i: {"tokens": k["token_count"]},
                   lambda a: "t%d" % a["tokens"])
    n = "tokens * top_k"
    maxlen = "%s + min(%s, num_experts) * (block_size - 1)" % (n, n)
    blocks_est = "max(min(%s, num_experts), %s / block_size + min(%s, num_experts) / 2)" % (n, n, n)
    return {
        "name": "moe_align_block_size",
        "op_type": "moe_routing",
        "description": ("MoE routing preprocessing (vLLM moe_align_block_size), block_size 128, 128 experts, "
                        "top-8. Flatten topk_ids row-major (f = t * 8 + s, N = 8 * tokens entries); for each "
                        "expert e with c_e > 0, in increasing e: append the f with id e in increasing order, "
                        "then (-c_e mod 128) copies of the sentinel N. P = the total length; expert_ids lists "
                        "each non-empty expert ceil(c_e / 128) times; num_tokens_post_pad = [P]. All exact. "
                        "Fixed-size outputs (kopt tensors have static shapes; Atrex-Bench returns exactly P "
                        "entries): sorted_token_ids has the worst-case length N + min(N, 128) * 127 and "
                        "positions >= P hold the sentinel N; expert_ids has ceil(that / 128) entries and "
                        "positions >= P / 128 hold -1. topk_ids ~ uniform [0, 128), duplicates within a row "
                        "allowed. Roofline bytes: reading topk_ids plus writing P + P / 128 + 1 int32 with "
                        "P estimated in closed form (Atrex-Bench's count is from one random draw)."),
        "tags": ["moe", "routing", "integer", "sort", "atrex-bench"],
        "axes": {"tokens": {"type": "var", "description": "tokens"},
                 "top_k": {"type": "const", "value": 8, "description": "experts per token"},
                 "num_experts": {"type": "const", "value": 128},
                 "block_size": {"type": "const", "value": 128, "description": "padding granule"}},
        "inputs": {"topk_ids": tensor(["tokens", "top_k"], "int32", "expert of each (token, slot)",
                                      gen={"kind": "int_range", "low": 0, "high": "num_experts"})},
        "outputs": {"sorted_token_ids": tensor([maxlen], "int32", "flat indices grouped by expert, padded"),
                    "expert_ids": tensor(["ceil_div(%s, block_size)" % maxlen], "int32", "expert of each block, -1 after the last"),
                    "num_tokens_post_pad": tensor([1], "int32", "P")},
        "tolerance": EXACT,
        "roofline": {"flops": "0", "flop_unit": "fp32",
                     "bytes": "4 * %s + 4 * (129 * %s + 1)" % (n, blocks_est)},
        "workloads": wl,
        "reference": {
            "source_file": "moe_align_block_size_reference.cu",
            "launches": [{"kernel": "moe_align_ref", "grid": [1], "block": ["num_experts"],
                          "shared_bytes": "(num_experts + 1) * 4",
                          "args": [arg_t("topk_ids"), arg_t("sorted_token_ids"), arg_t("expert_ids"),
                                   arg_t("num_tokens_post_pad"), arg_i(n), arg_i("num_experts"),
                                   arg_i("block_size"), arg_i(maxlen)]}]},
    }


# -------------------------------------------------------------- topk_filter
@define
def topk_filter(data):
    wl = workloads("topk_filter", data,
                   lambda k, i: {"rows": k["seq_len"], "vocab": k["hidden_size"]},
                   lambda a: "r%d_v%d" % (a["rows"], a["vocab"]))
    return {
        "name": "topk_filter",
        "op_type": "sampling",
        "description": ("Top-k logit masking (vLLM sampler / FlashInfer TopKMaskLogits), k = 50: per row, "
                        "thr = the min(k, vocab)-th largest value counting duplicates; out = logits where "
                        "logits >= thr (every tie with the threshold is kept, exact copy), else -inf. "
                        "logits ~ N(0,1) fp32. Exact comparison (the -inf positions must match)."),
        "tags": ["sampling", "top-k", "selection", "fp32", "atrex-bench"],
        "axes": {"rows": {"type": "var", "description": "sequences being sampled"},
                 "vocab": {"type": "var", "description": "vocabulary size"}},
        "scalars": {"top_k": {"dtype": "int32", "value": 50, "description": "k"}},
        "inputs": {"logits": tensor(["rows", "vocab"], "float32", gen=normal())},
        "outputs": {"out": tensor(["rows", "vocab"], "float32")},
        "tolerance": EXACT,
        "roofline": {"flops": "0", "flop_unit": "fp32"},
        "workloads": wl,
        "reference": {
            "source_file": "topk_filter_reference.cu",
            "launches": [{"kernel": "topk_filter_ref", "grid": ["rows"], "block": [256],
                          "args": [arg_t("logits"), arg_t("out"), arg_i("vocab"), arg_s("top_k", "int32")]}]},
    }


# ----------------------------------------------------------- fused_qkv_rope
def _qkv_rope(data, dtype, shape_dtype, name):
    wl = workloads("fused_qkv_rope", data,
                   lambda k, i: {"tokens": k["total_tokens"], "num_heads": k["num_heads"],
                                 "num_kv_heads": k["num_kv_heads"]},
                   lambda a: "t%d_h%d_kv%d" % (a["tokens"], a["num_heads"], a["num_kv_heads"]),
                   keep=lambda s: s["input_kwargs"]["dtype"] == shape_dtype)
    heads = "(num_heads + 2 * num_kv_heads)"
    return {
        "name": name,
        "op_type": "rope",
        "description": ("Split a fused QKV row into q, k, v heads and apply NeoX rotary embedding to q and k "
                        "(rtp-llm add_fusedQKV_bias_transpose_prefill, no bias): columns [0, H*D) are q, the "
                        "next HKV*D k, the next HKV*D v; inv_freq[i] = 1 / 10000^(2i/128) (fp32), "
                        "theta = position * inv_freq[i]; for i < 64: y[i] = x[i] cos - x[i+64] sin, "
                        "y[i+64] = x[i+64] cos + x[i] sin in fp32, rounded to %s; v is copied. "
                        "This config holds Atrex-Bench's %s shapes (fused_qkv_rope%s holds the %s ones). "
                        "Simplification: Atrex-Bench's positions are 0 (every shape has one token), which "
                        "makes the rotation the identity; here positions ~ uniform [0, 2048) so the rotation "
                        "is exercised." % (dtype, dtype, "_fp16" if dtype == "bfloat16" else "",
                                            "float16" if dtype == "bfloat16" else "bfloat16")),
        "tags": ["rope", "attention-prep", "memory-bound", "launch-bound", dtype, "atrex-bench"],
        "axes": {"tokens": {"type": "var"}, "num_heads": {"type": "var", "description": "query heads"},
                 "num_kv_heads": {"type": "var"},
                 "head_dim": {"type": "const", "value": 128}, "rope_dim": {"type": "const", "value": 128}},
        "inputs": {"qkv": tensor(["tokens", "%s * head_dim" % heads], dtype, gen=normal()),
                   "positions": tensor(["tokens"], "int32", gen={"kind": "int_range", "low": 0, "high": 2048})},
        "outputs": {"q": tensor(["tokens", "num_heads", "head_dim"], dtype),
                    "k": tensor(["tokens", "num_kv_heads", "head_dim"], dtype),
                    "v": tensor(["tokens", "num_kv_heads", "head_dim"], dtype, tolerance=EXACT)},
        "tolerance": BF16_TOL if dtype == "bfloat16" else FP16_TOL,
        "roofline": {"flops": "3 * tokens * (num_heads + num_kv_heads) * head_dim + 3 * tokens * rope_dim / 2",
                     "flop_unit": "fp32"},
        "workloads": wl,
        "reference": {
            "source_file": "fused_qkv_rope_reference.cu",
            "launches": [{"kernel": "qkv_rope_ref_" + ("bf16" if dtype == "bfloat16" else "fp16"),
                          "grid": ["ceil_div(tokens * %s * head_dim, 128)" % heads], "block": [128],
                          "args": [arg_t("qkv"), arg_t("positions"), arg_t("q"), arg_t("k"), arg_t("v"),
                                   arg_i("tokens"), arg_i("num_heads"), arg_i("num_kv_heads"), arg_i("head_dim"),
                                   arg_i("rope_dim")]}]},
    }


@define
def fused_qkv_rope(data):
    return _qkv_rope(data, "bfloat16", "bf16", "fused_qkv_rope")


@define
def fused_qkv_rope_fp16(data):
    return _qkv_rope(data, "float16", "fp16", "fused_qkv_rope_fp16")


# --------------------------------------------------- paged_attention_decode
def _paged(data, dtype, shape_dtype, name):
    wl = workloads("paged_attention_decode", data,
                   lambda k, i: {"num_seqs": k["num_seqs"], "ctx_len": k["ctx_len"], "num_heads": k["num_query_heads"],
                                 "num_kv_heads": k["num_kv_heads"], "head_size": k["head_size"]},
                   lambda a: "s%d_l%d_h%d_kv%d_d%d" % (a["num_seqs"], a["ctx_len"], a["num_heads"],
                                                       a["num_kv_heads"], a["head_size"]),
                   keep=lambda s: s["input_kwargs"]["dtype"] == shape_dtype)
    nb = "ceil_div(ctx_len, block_size) * num_seqs + 16"
    return {
        "name": name,
        "op_type": "attention",
        "description": ("Decode attention, one query per sequence, against a paged KV cache in vLLM's legacy "
                        "layout (rtp-llm/AITER paged_attention): key element (block b, kv head h, dim d, slot t) "
                        "is k_cache[b, h, d / 8, t, d %% 8]; value element v_cache[b, h, d, t]. Position p < "
                        "seq_lens[i] lives in block block_tables[i, p / 16], slot p %% 16. GQA: query head q "
                        "reads kv head q / (num_heads / num_kv_heads). s_p = (q . K_p) / sqrt(head_size) in fp32, "
                        "softmax over all p < seq_len (no mask), out = sum p V_p rounded to %s. This config "
                        "holds Atrex-Bench's %s shapes (%s holds the others). Simplification: Atrex-Bench's "
                        "block table maps sequence i to blocks i*MBS.. in order; here each row holds distinct "
                        "random blocks of the cache (sequences may share blocks, which reads allow). "
                        "seq_lens all equal ctx_len, as in Atrex-Bench." %
                        (dtype, dtype, "paged_attention_decode_fp16" if dtype == "bfloat16" else "paged_attention_decode")),
        "tags": ["attention", "decode", "paged-kv", "gqa", dtype, "atrex-bench"],
        "axes": {"num_seqs": {"type": "var"}, "ctx_len": {"type": "var", "description": "tokens per sequence"},
                 "num_heads": {"type": "var", "description": "query heads"}, "num_kv_heads": {"type": "var"},
                 "head_size": {"type": "var"},
                 "block_size": {"type": "const", "value": 16}, "x": {"type": "const", "value": 8,
                                                                      "description": "16 bytes of elements"}},
        "inputs": {"query": tensor(["num_seqs", "num_heads", "head_size"], dtype, gen=normal()),
                   "k_cache": tensor([nb, "num_kv_heads", "head_size / x", "block_size", "x"], dtype, gen=normal()),
                   "v_cache": tensor([nb, "num_kv_heads", "head_size", "block_size"], dtype, gen=normal()),
                   "block_tables": tensor(["num_seqs", "ceil_div(ctx_len, block_size)"], "int32",
                                          gen={"kind": "permutation", "n": nb}),
                   "seq_lens": tensor(["num_seqs"], "int32", gen={"kind": "int_range", "low": "ctx_len",
                                                                  "high": "ctx_len + 1"})},
        "outputs": {"out": tensor(["num_seqs", "num_heads", "head_size"], dtype)},
        "tolerance": BF16_TOL if dtype == "bfloat16" else FP16_TOL,
        "roofline": {"flops": "4 * num_seqs * num_heads * ctx_len * head_size + 2 * num_seqs * ctx_len",
                     "flop_unit": "bf16_tensor" if dtype == "bfloat16" else "fp16_tensor"},
        "workloads": wl,
        "reference": {
            "source_file": "paged_attention_decode_reference.cu",
            "launches": [{"kernel": "paged_attention_ref_" + ("bf16" if dtype == "bfloat16" else "fp16"),
                          "grid": ["num_seqs", "num_heads"], "block": ["head_size"],
                          "shared_bytes": "ctx_len * 4",
                          "args": [arg_t("query"), arg_t("k_cache"), arg_t("v_cache"), arg_t("block_tables"),
                                   arg_t("seq_lens"), arg_t("out"), arg_i("num_heads"), arg_i("num_kv_heads"),
                                   arg_i("head_size"), arg_i("ceil_div(ctx_len, block_size)")]}]},
    }


@define
def paged_attention_decode(data):
    return _paged(data, "bfloat16", "bf16", "paged_attention_decode")


@define
def paged_attention_decode_fp16(data):
    return _paged(data, "float16", "fp16", "paged_attention_decode_fp16")


# ---------------------------------------------------------- block_scaled_mm
@define
def block_scaled_mm(data):
    wl = workloads("block_scaled_mm", data,
                   lambda k, i: {"m": k["m"], "n": k["n"], "k": k["k"]},
                   lambda a: "m%d_n%d_k%d" % (a["m"], a["n"], a["k"]))
    return {
        "name": "block_scaled_mm",
        "op_type": "gemm",
        "description": ("FP8 e4m3fn GEMM out = A B^T with block scales (vLLM w8a8_triton_block_scaled_mm): "
                        "a [m, k], b [n, k] (weight, N x K), a_scales [m, k/128] per (row, 128-wide K group), "
                        "b_scales [n/128, k/128] per 128 x 128 tile. out[i, j] = sum over K groups kb of "
                        "(P_kb * a_scales[i, kb]) * b_scales[j / 128, kb], P_kb = sum over the group's 128 "
                        "k of a[i, k] * b[j, k] in fp32 (each group scaled before it is added). fp32 output. "
                        "Simplification: Atrex-Bench quantizes N(0,1) data per group to +-448; here a and b "
                        "are fp8 draws of N(0, 160^2) saturated to +-448 and the scales ~ U[0.004, 0.008), "
                        "which gives the same value ranges and output magnitudes (about 45)."),
        "tags": ["gemm", "fp8", "block-scaled", "compute-bound", "atrex-bench"],
        "axes": {"m": {"type": "var", "description": "rows of A (tokens)"},
                 "n": {"type": "var", "description": "output features"},
                 "k": {"type": "var", "description": "reduction length"},
                 "group": {"type": "const", "value": 128, "description": "scale block size along n and k"}},
        "inputs": {"a": tensor(["m", "k"], "float8_e4m3fn", gen=normal(0, 160)),
                   "a_scales": tensor(["m", "k / group"], "float32", gen={"kind": "uniform", "low": 0.004, "high": 0.008}),
                   "b": tensor(["n", "k"], "float8_e4m3fn", gen=normal(0, 160)),
                   "b_scales": tensor(["n / group", "k / group"], "float32",
                                      gen={"kind": "uniform", "low": 0.004, "high": 0.008})},
        "outputs": {"out": tensor(["m", "n"], "float32")},
        "tolerance": {"atol": 0.02, "rtol": 0.002, "matched_ratio": 1.0},
        "roofline": {"flops": "2 * m * n * k + m * n * (3 * k / group - 1)", "flop_unit": "fp8_tensor"},
        "workloads": wl,
        "reference": {
            "source_file": "block_scaled_mm_reference.cu",
            "launches": [{"kernel": "block_scaled_mm_ref", "grid": ["ceil_div(n, 64)", "ceil_div(m, 64)"],
                          "block": [16, 16],
                          "args": [arg_t("a"), arg_t("a_scales"), arg_t("b"), arg_t("b_scales"), arg_t("out"),
                                   arg_i("m"), arg_i("n"), arg_i("k")]}]},
    }


# ---------------------------------------------------------------- fused_moe
@define
def fused_moe(data):
    wl = workloads("fused_moe", data,
                   lambda k, i: {"tokens": k["token_count"], "hidden": k["hidden_size"],
                                 "inter": k["intermediate_size"], "experts": k["num_experts"], "top_k": k["top_k"]},
                   lambda a: "t%d_h%d_i%d_e%d_k%d" % (a["tokens"], a["hidden"], a["inter"], a["experts"], a["top_k"]))
    return {
        "name": "fused_moe",
        "op_type": "moe",
        "description": ("Top-k mixture-of-experts SwiGLU FFN (vLLM fused_experts), bf16 weights, fp32 math "
                        "and output: for token t and slot s with e = topk_ids[t, s]: gate_i = x . w1[e, i], "
                        "up_i = x . w1[e, inter + i], a_i = silu(gate_i) * up_i (no rounding), "
                        "y_h = sum_i a_i w2[e, h, i]; out[t] = sum_s topk_weights[t, s] * y (duplicate ids "
                        "within a row add up). hidden_states ~ 0.1 N(0,1). Simplifications (the config "
                        "language has no per-workload generator parameters or softmax generator): "
                        "w1 ~ N(0, 0.02^2), w2 ~ N(0, 0.03^2) for every shape (Atrex-Bench: 1/sqrt(hidden) and "
                        "1/sqrt(inter)), topk_weights ~ U[0.05, 0.5) (Atrex-Bench: a softmax over top_k draws). "
                        "topk_ids ~ uniform [0, experts), duplicates allowed as in Atrex-Bench. Roofline: "
                        "Atrex-Bench's counts come from one random draw (distinct (token, expert) pairs, experts "
                        "hit); the config uses the expected values."),
        "tags": ["moe", "gemm", "swiglu", "bf16", "compute-bound", "atrex-bench"],
        "axes": {"tokens": {"type": "var"}, "hidden": {"type": "var"}, "inter": {"type": "var", "description": "intermediate size"},
                 "experts": {"type": "var"}, "top_k": {"type": "var"}},
        "inputs": {"hidden_states": tensor(["tokens", "hidden"], "bfloat16", gen=normal(0, 0.1)),
                   "w1": tensor(["experts", "2 * inter", "hidden"], "bfloat16", "gate rows then up rows", gen=normal(0, 0.02)),
                   "w2": tensor(["experts", "hidden", "inter"], "bfloat16", gen=normal(0, 0.03)),
                   "topk_weights": tensor(["tokens", "top_k"], "float32", gen={"kind": "uniform", "low": 0.05, "high": 0.5}),
                   "topk_ids": tensor(["tokens", "top_k"], "int32", gen={"kind": "int_range", "low": 0, "high": "experts"})},
        "outputs": {"out": tensor(["tokens", "hidden"], "float32")},
        "tolerance": {"atol": 2e-4, "rtol": 0.02, "matched_ratio": 1.0},
        "roofline": {"flops": ("tokens * (2 * experts * top_k - top_k * (top_k - 1)) * (6 * hidden * inter + 4 * inter)"
                               " / (2 * experts) + 2 * tokens * top_k * hidden"),
                     "flop_unit": "bf16_tensor",
                     "bytes": ("2 * tokens * hidden + 8 * tokens * top_k + 6 * min(experts, tokens * top_k) * inter * hidden"
                               " + 4 * tokens * hidden")},
        "workloads": wl,
        "reference": {
            "source_file": "fused_moe_reference.cu",
            "workspaces": {"act": {"bytes": "tokens * top_k * inter * 4"}},
            "launches": [{"kernel": "fused_moe_act_ref", "grid": ["tokens * top_k", "ceil_div(inter, 8)"], "block": [256],
                          "shared_bytes": "hidden * 4",
                          "args": [arg_t("hidden_states"), arg_t("w1"), arg_t("topk_ids"), {"workspace": "act"},
                                   arg_i("hidden"), arg_i("inter"), arg_i("top_k")]},
                         {"kernel": "fused_moe_down_ref", "grid": ["tokens", "ceil_div(hidden, 8)"], "block": [256],
                          "args": [{"workspace": "act"}, arg_t("w2"), arg_t("topk_ids"), arg_t("topk_weights"),
                                   arg_t("out"), arg_i("hidden"), arg_i("inter"), arg_i("top_k")]}]},
    }


# -------------------------------------------------------- attention_forward
@define
def attention_forward(data):
    wl = workloads("attention_forward", data,
                   lambda k, i: {"seq_len": k["seq_lens"][0], "num_heads": k["num_heads"], "head_dim": k["head_dim"]},
                   lambda a: "l%d_h%d_d%d" % (a["seq_len"], a["num_heads"], a["head_dim"]))
    for w in wl:
        assert w["axes"]["seq_len"] > 0
    return {
        "name": "attention_forward",
        "op_type": "attention",
        "description": ("Bidirectional (non-causal) multi-head attention over one packed sequence, the "
                        "encoder / vision-tower case (vLLM attention_forward_varlen, CK FMHA): q, k, v "
                        "[seq_len, heads, head_dim] bf16 ~ N(0,1); per head s = q . k / sqrt(head_dim) against "
                        "all keys in fp32, softmax, o = sum p v in fp32, out = bf16(o). No GQA. "
                        "Simplification: every Atrex-Bench shape has exactly one sequence, so the config has no "
                        "cu_seqlens inputs (cu_seqlens = [0, seq_len]); the roofline bytes still count their "
                        "16 bytes, as Atrex-Bench does."),
        "tags": ["attention", "prefill", "non-causal", "bf16", "compute-bound", "atrex-bench"],
        "axes": {"seq_len": {"type": "var"}, "num_heads": {"type": "var"}, "head_dim": {"type": "var"}},
        "inputs": {"q": tensor(["seq_len", "num_heads", "head_dim"], "bfloat16", gen=normal()),
                   "k": tensor(["seq_len", "num_heads", "head_dim"], "bfloat16", gen=normal()),
                   "v": tensor(["seq_len", "num_heads", "head_dim"], "bfloat16", gen=normal())},
        "outputs": {"out": tensor(["seq_len", "num_heads", "head_dim"], "bfloat16")},
        "tolerance": BF16_TOL,
        "roofline": {"flops": "4 * seq_len * seq_len * num_heads * head_dim", "flop_unit": "bf16_tensor",
                     "bytes": "8 * seq_len * num_heads * head_dim + 16"},
        "workloads": wl,
        "reference": {
            "source_file": "attention_forward_reference.cu",
            "launches": [{"kernel": "attention_forward_ref", "grid": ["ceil_div(seq_len, 128)", "num_heads"],
                          "block": [128], "shared_bytes": "64 * head_dim * 8",
                          "args": [arg_t("q"), arg_t("k"), arg_t("v"), arg_t("out"), arg_i("seq_len"),
                                   arg_i("num_heads"), arg_i("head_dim")]}]},
    }


def write(op, cfg):
    path = os.path.join(OUT, op + ".json")
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        for key in ("baseline", "seed"):
            if key in old:
                cfg[key] = old[key]
    full = {"$schema": "../schema/operator.schema.json"}
    full.update(cfg)
    with open(path, "w") as f:
        f.write(dump(full))
    return path


def dump(obj, indent=0):
    """JSON with short arrays/objects (workloads, launches) on one line."""
    one = json.dumps(obj)
    if len(one) + indent <= 110 or not isinstance(obj, (dict, list)):
        return one
    pad = " " * (indent + 2)
    if isinstance(obj, list):
        return "[\n" + ",\n".join(pad + dump(v, indent + 2) for v in obj) + "\n" + " " * indent + "]"
    return ("{\n" + ",\n".join(pad + json.dumps(k) + ": " + dump(v, indent + 2) for k, v in obj.items())
            + "\n" + " " * indent + "}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ops", nargs="*")
    ap.add_argument("--data", default=atrex.DEFAULT_DATA)
    a = ap.parse_args(argv)
    for op in a.ops or sorted(DEFS):
        if op not in DEFS:
            print("unknown operator %s (defined: %s)" % (op, ", ".join(sorted(DEFS))), file=sys.stderr)
            return 2
        print(write(op, DEFS[op](a.data)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
