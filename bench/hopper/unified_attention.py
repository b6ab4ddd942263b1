#!/usr/bin/env python3
"""Check and time the unified_attention baseline against PyTorch on the GPU
machine, on the workloads of configs/bench/unified_attention.json.

    python3 bench/hopper/unified_attention.py [--src FILE] [--variants NAME=-DX=1,...] [--only ID,...]
                                              [--check-rows N] [--no-sdpa] [--sdpa-check] [--out FILE]

`--variants none --sdpa-check` runs PyTorch alone: SDPA with bf16 inputs (P rounded to bf16, as
FlashAttention does) and with fp32 inputs, each checked under the config's tolerance like the
kernel, then timed.

CuPy compiles the baseline .cu with NVRTC for sm_90a (as kopt's worker
does) once per variant (a variant is a set of -D defines); torch makes the
inputs with the config's layout (paged K/V, a random block table of
distinct blocks), the fp32 reference (dense, TF32 off) on a subset of query
rows (the last N rows of every sequence chunk, where the causal sums are
longest, and the first rows), and the PyTorch timing: SDPA on dense KV
([n, h, L, d], causal, enable_gqa), which has no paging and is therefore
optimistic for PyTorch. Times: triton.testing.do_bench (L2 flushed between
runs, median), the baseline's two launches (prefix sums + attention)
together. kopt eval is the measurement of record; this gives the PyTorch
ratio on identical shapes and quick correctness of variants.
Prints one JSON line per (variant, workload): worst |diff| / (atol + rtol |ref|)
over the checked rows (< 1 passes), failing elements, ms, TFLOP/s, SOL."""
import argparse, json, math, os, sys
import numpy as np
import torch
import cupy
import triton.testing

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEAK = 989.5e12  # dense bf16, configs/hardware/gpus.json (H200)


def load(src, defines):
    code = open(src).read()
    opts = ("--gpu-architecture=sm_90a", "--std=c++17") + tuple(f"-D{d}" for d in defines)
    mod = cupy.RawModule(code=code, options=opts, backend="nvrtc")
    return (mod.get_function("unified_attention_cu"), mod.get_function("unified_attention_fa2"),
            mod.get_function("unified_attention_ws"))


def P(t):
    return np.uint64(t.data_ptr())


def inputs(w, seed):
    a = w["axes"]
    n, L, hq, hkv, d = a["num_seqs"], a["seq_len"], a["num_query_heads"], a["num_kv_heads"], a["head_size"]
    mb = (L + 15) // 16 + 2
    nb = mb * n + 64
    g = torch.Generator(device="cuda"); g.manual_seed(seed)
    q = torch.randn(n * L, hq, d, device="cuda", generator=g).bfloat16()
    kc = torch.randn(nb, 16, hkv, d, device="cuda", generator=g).bfloat16()
    vc = torch.randn(nb, 16, hkv, d, device="cuda", generator=g).bfloat16()
    bt = torch.randperm(nb, device="cuda", generator=g)[: n * mb].view(n, mb).int().contiguous()
    su = torch.full((n,), L, device="cuda", dtype=torch.int32)
    return dict(n=n, L=L, hq=hq, hkv=hkv, d=d, mb=mb, q=q, kc=kc, vc=vc, bt=bt, su=su)


def dense_kv(x, cache):
    n, L, mb = x["n"], x["L"], x["mb"]
    used = (L + 15) // 16
    k = cache[x["bt"][:, :used].long()]  # [n, used, 16, hkv, d]
    return k.reshape(n, used * 16, x["hkv"], x["d"])[:, :L]  # [n, L, hkv, d]


def launch_fn(fns, x, out, cu, wgmma, ns=3):
    fcu, fa, fws = fns
    d, L = x["d"], x["L"]
    if wgmma == 3 and d == 128:  # the warp-specialized kernel: 384 threads, Q 32 KiB + ns stages of 32 KiB
        smem = 2048 + 32768 + ns * 32768
        fws.max_dynamic_shared_size_bytes = smem
        grid = (x["hq"], (L + 127) // 128, x["n"])
        args = (P(x["q"]), P(x["kc"]), P(x["vc"]), P(x["su"]), P(x["bt"]), P(out), P(cu), np.int32(x["hq"]),
                np.int32(x["hkv"]), np.int32(d), np.int32(16), np.int32(x["mb"]))

        def run_ws():
            fcu((1,), (1024,), (P(x["su"]), P(cu), np.int32(x["n"])))
            fws(grid, (384,), args, shared_mem=smem)
        return run_ws
    # the config's launch plan (bm: 128 rows for d <= 128 on the mma.sync path and on
    # the two-warpgroup wgmma path (UA_WGMMA=2, 256 threads), 64 on the one-warpgroup
    # wgmma path and for d >= 192), shared memory the largest any variant needs
    # (BN 64 at d 128 on the mma.sync path; 101376 bytes on the two-warpgroup path)
    X = min(1, 191 // d)
    bm = 64 if (wgmma == 1 and d == 128) else 64 + 64 * X
    threads = 256 if (wgmma == 2 and d == 128) else 128
    smem = max((192 + 192 * X) * (32 * ((d + 15) // 16) + 16), 101376 if d == 128 else 0)
    fa.max_dynamic_shared_size_bytes = smem
    grid = (x["hq"], (L + bm - 1) // bm, x["n"])
    args = (P(x["q"]), P(x["kc"]), P(x["vc"]), P(x["su"]), P(x["bt"]), P(out), P(cu), np.int32(x["hq"]),
            np.int32(x["hkv"]), np.int32(d), np.int32(16), np.int32(x["mb"]))

    def run():
        fcu((1,), (1024,), (P(x["su"]), P(cu), np.int32(x["n"])))
        fa(grid, (threads,), args, shared_mem=smem)
    return run


def check(x, out, rows, atol, rtol):
    """fp32 reference on the last `rows` and first 64 query rows of every sequence (chunks of sequences)."""
    n, L, hq, hkv, d = x["n"], x["L"], x["hq"], x["hkv"], x["d"]
    K = dense_kv(x, x["kc"]).float(); V = dense_kv(x, x["vc"]).float()
    sel = sorted(set(list(range(max(0, L - rows), L)) + list(range(min(64, L)))))
    sel_t = torch.tensor(sel, device="cuda")
    worst, fails, total = 0.0, 0, 0
    G = hq // hkv
    cs = max(1, int(2e9 // (len(sel) * hq * L * 4)))
    for s0 in range(0, n, cs):
        s1 = min(n, s0 + cs)
        qq = x["q"].view(n, L, hq, d)[s0:s1][:, sel_t].float()  # [c, R, hq, d]
        kk = K[s0:s1].repeat_interleave(G, dim=2)  # [c, L, hq, d]
        vv = V[s0:s1].repeat_interleave(G, dim=2)
        s = torch.einsum("crhd,clhd->chrl", qq, kk) / math.sqrt(d)
        mask = torch.arange(L, device="cuda")[None, :] > sel_t[:, None]
        s.masked_fill_(mask[None, None], float("-inf"))
        p = torch.softmax(s, dim=-1)
        ref = torch.einsum("chrl,clhd->crhd", p, vv).bfloat16().float()
        got = out.view(n, L, hq, d)[s0:s1][:, sel_t].float()
        diff = (got - ref).abs()
        tol = atol + rtol * ref.abs()
        r = diff / tol
        r = torch.where(torch.isfinite(got), r, torch.full_like(r, float("inf")))
        worst = max(worst, r.max().item())
        fails += int((r > 1).sum().item())
        total += r.numel()
        del qq, kk, vv, s, p, ref, got
    return worst, fails, total


def sdpa_fn(x, fp32=False):
    """PyTorch SDPA on dense KV (no paging: optimistic for PyTorch); fp32=True upcasts q, k, v, so
    that P is not rounded to bf16 (what a user who needs this config's tolerance would run)."""
    n, L, hq, hkv, d = x["n"], x["L"], x["hq"], x["hkv"], x["d"]
    q = x["q"].view(n, L, hq, d).transpose(1, 2)
    k = dense_kv(x, x["kc"]).transpose(1, 2).contiguous()
    v = dense_kv(x, x["vc"]).transpose(1, 2).contiguous()
    if fp32:
        q, k, v = q.float(), k.float(), v.float()
    f = torch.nn.functional.scaled_dot_product_attention
    return lambda: f(q, k, v, is_causal=True, enable_gqa=True)


def sdpa_rows(x, w, flops, rows_checked, atol, rtol):
    """SDPA in bf16 and in fp32 as subjects of their own: output checked like ours, then timed."""
    n, L, hq, d = x["n"], x["L"], x["hq"], x["d"]
    res = []
    for name, fp32 in (("sdpa_bf16", False), ("sdpa_fp32", True)):
        r = dict(variant=name, workload=w["id"], weight=w["weight"])
        try:
            fn = sdpa_fn(x, fp32)
            o = fn().transpose(1, 2).reshape(n * L, hq, d).bfloat16()
            worst, fails, total = check(x, o, rows_checked, atol, rtol)
            del o
            t = triton.testing.do_bench(fn, return_mode="median")
            r.update(worst_over_tol=round(worst, 4), fails=fails, checked=total, ms=round(t, 5),
                     sol=round(flops / t / 1e-3 / PEAK, 4))
        except Exception as ex:  # out of memory, or no backend for the combination
            r.update(error=str(ex)[:300])
        print(json.dumps(r), flush=True)
        res.append(r)
        torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=os.path.join(ROOT, "configs/bench/unified_attention_baseline.cu"))
    ap.add_argument("--config", default=os.path.join(ROOT, "configs/bench/unified_attention.json"))
    ap.add_argument("--variants", default="default=", help="NAME=DEF1,DEF2;NAME2=...")
    ap.add_argument("--only", default="")
    ap.add_argument("--check-rows", type=int, default=256)
    ap.add_argument("--no-sdpa", action="store_true")
    ap.add_argument("--sdpa-check", action="store_true",
                    help="also check SDPA's output (bf16 and fp32 inputs) under the config's tolerance")
    ap.add_argument("--no-check", default="", help="variants to time only")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cfg = json.load(open(a.config))
    atol, rtol = cfg["tolerance"]["atol"], cfg["tolerance"]["rtol"]
    only = a.only.split(",") if a.only else None  # run in this order (the heaviest first)
    variants = []  # --variants none: PyTorch only (with --sdpa-check)
    for v in ([] if a.variants == "none" else a.variants.split(";")):
        name, _, defs = v.partition("=")
        variants.append((name, [d for d in defs.split(",") if d]))
    fns = {}
    for name, defs in variants:
        try:
            fns[name] = load(a.src, defs)
        except Exception as ex:
            print(json.dumps(dict(variant=name, error=str(ex)[:2000])), flush=True)
    rows = []
    order = list(enumerate(cfg["workloads"]))
    if only:
        pos = {wid: i for i, wid in enumerate(only)}
        order = sorted((x for x in order if x[1]["id"] in pos), key=lambda x: pos[x[1]["id"]])
    for wi, w in order:
        x = inputs(w, 1000 + wi)
        n, L, hq, d = x["n"], x["L"], x["hq"], x["d"]
        flops = 2 * hq * d * n * L * (L + 1)
        tt = None
        if not a.no_sdpa:
            try:
                tt = triton.testing.do_bench(sdpa_fn(x), return_mode="median")
            except Exception as ex:
                tt = None
                print(json.dumps(dict(workload=w["id"], sdpa_error=str(ex)[:300])), flush=True)
        if a.sdpa_check:
            rows += sdpa_rows(x, w, flops, a.check_rows, atol, rtol)
        for name, defs in variants:
            if name not in fns:
                continue
            out = torch.full_like(x["q"], float("nan"))
            cu = torch.empty(n + 1, device="cuda", dtype=torch.int32)
            wg = next((int(v.split("=")[1]) for v in defs if v.startswith("UA_WGMMA=")), 0)
            ns = next((int(v.split("=")[1]) for v in defs if v.startswith("UA_NS=")), 3)
            run = launch_fn(fns[name], x, out, cu, wg, ns)
            run(); torch.cuda.synchronize()
            r = dict(variant=name, workload=w["id"], weight=w["weight"])
            if name not in a.no_check.split(","):
                worst, fails, total = check(x, out, a.check_rows, atol, rtol)
                r.update(worst_over_tol=round(worst, 4), fails=fails, checked=total)
            t = triton.testing.do_bench(run, return_mode="median")
            r.update(ms=round(t, 5), tflops=round(flops / t / 1e9, 1), sol=round(flops / t / 1e-3 / PEAK, 4))
            if tt is not None:
                r.update(sdpa_ms=round(tt, 5), sdpa_sol=round(flops / tt / 1e-3 / PEAK, 4), sdpa_over_ours=round(tt / t, 3))
            rows.append(r)
            print(json.dumps(r), flush=True)
            del out
        del x
        torch.cuda.empty_cache()
    # weighted summary per variant (SOL weighted by workload weight, over the workloads run)
    for name, _ in variants:
        rs = [r for r in rows if r["variant"] == name]
        if not rs:
            continue
        wsum = sum(r["weight"] for r in rs)
        s = dict(variant=name, workloads=len(rs), weighted_sol=round(sum(r["weight"] * r["sol"] for r in rs) / wsum, 4))
        if all("sdpa_sol" in r for r in rs):
            s["sdpa_weighted_sol"] = round(sum(r["weight"] * r["sdpa_sol"] for r in rs) / wsum, 4)
        s["all_pass"] = all(r.get("fails", 0) == 0 and r.get("worst_over_tol", 0) < 1 for r in rs if "fails" in r)
        print(json.dumps(dict(summary=s)), flush=True)
    for name in ("sdpa_bf16", "sdpa_fp32"):
        rs = [r for r in rows if r["variant"] == name and "sol" in r]
        if rs:
            wsum = sum(r["weight"] for r in rs)
            print(json.dumps(dict(summary=dict(variant=name, workloads=len(rs),
                                               weighted_sol=round(sum(r["weight"] * r["sol"] for r in rs) / wsum, 4),
                                               all_pass=all(r["fails"] == 0 for r in rs)))), flush=True)
    if a.out:
        json.dump(rows, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
