#!/usr/bin/env python3
"""block_scaled_mm baseline (configs/bench/block_scaled_mm_baseline.cu) against
PyTorch on the GPU machine: the config's tolerance rule on a subset of rows
(the first 4096 and the last 257, against a float64 reference), CUDA-event
median times of our two launches and of torch._scaled_mm (row-wise scales,
which is coarser than 128-blocks and so optimistic for PyTorch; and the
128-block recipe where this PyTorch build accepts it).

    python3 bench/hopper/bsmm_torch.py [--quick] [--out DIR]
"""
import argparse, json, os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import FP8_CONFIG_SHAPES, P, bench, fp8_inputs, load  # noqa: E402

SRC = "configs/bench/block_scaled_mm_baseline.cu"  # --src overrides
ATOL, RTOL = 0.02, 0.002


def ref_rows(a, b, sa, sb, rows):
    n = b.shape[0]
    kk = a.shape[1]
    out = torch.zeros(len(rows), n, device="cuda", dtype=torch.float64)
    ar = a[rows].double()
    bd = b.double()
    sbe = sb.double().repeat_interleave(128, 0)  # [n, groups]
    for g in range(kk // 128):
        pk = ar[:, g * 128:(g + 1) * 128] @ bd[:, g * 128:(g + 1) * 128].T
        out += pk * sa[rows, g:g + 1].double() * sbe[None, :, g]
    return out


def check(out, ref, rows):
    d = (out[rows].double() - ref).abs()
    bad = (d > ATOL) & (d > RTOL * ref.abs())
    nan = ~torch.isfinite(out[rows])
    return dict(max_abs=d.max().item(), failing=int(bad.sum().item()), nonfinite=int(nan.sum().item()),
                checked=d.numel())


def fp8_accuracy(shapes):
    """Is the config's tolerance within reach of an fp8 tensor-core GEMM? cuBLAS's fp8 path (through
    torch._scaled_mm, row-wise scales so that the exact answer is easy to form) on the config's data."""
    for (m, n, kk) in shapes:
        a, b, sa, sb = fp8_inputs(m, n, kk, m + n)
        sar = sa[:, :1].contiguous()
        sbr = sb[:, :1].repeat_interleave(128, 0).T.contiguous()
        rows = torch.arange(0, min(m, 4096)).cuda()
        ref = (a[rows].double() @ b.double().T) * sar[rows].double() * sbr.double()
        for fast in (False, True):
            try:
                o = torch._scaled_mm(a, b.T, scale_a=sar, scale_b=sbr, out_dtype=torch.float32,
                                     use_fast_accum=fast)
                d = (o[rows].double() - ref).abs()
                bad = (d > ATOL) & (d > RTOL * ref.abs())
                print(json.dumps(dict(shape=f"{m}x{n}x{kk}", use_fast_accum=fast, max_abs=d.max().item(),
                                      failing=int(bad.sum().item()), checked=d.numel(),
                                      ref_absmax=ref.abs().max().item())), flush=True)
            except Exception as ex:
                print(json.dumps(dict(shape=f"{m}x{n}x{kk}", use_fast_accum=fast, error=str(ex)[:300])), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--stages", type=int, default=5)
    ap.add_argument("--group-m", type=int, default=8)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--epi-v4", type=int, default=0, help="the EPI_V4 parameter (vector epilogue, swapped orientation)")
    ap.add_argument("--src", default=SRC)
    ap.add_argument("--shapes", default=None, help="MxNxK,... (default: the config's 24, or 3 with --quick)")
    ap.add_argument("--fp8-accuracy", action="store_true",
                    help="only: the error of torch._scaled_mm (cuBLAS fp8, row-wise scales, fp32 out) against a "
                         "float64 reference under the config's tolerance rule")
    args = ap.parse_args()
    print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
    if args.fp8_accuracy:
        return fp8_accuracy([(4096, 4096, 4096), (8192, 2048, 2048)])
    defs = {"STAGES": args.stages, "GROUP_M": args.group_m, "EPI_V4": args.epi_v4}
    prep = load(args.src, "bsmm_prep", defs)
    gemm = load(args.src, "bsmm_f16_tma", defs)
    smem = args.stages * 40960 + 2048 + 16384 * args.epi_v4
    gemm.max_dynamic_shared_size_bytes = smem
    ctas = 132
    shapes = [(349, 2048, 2048), (4533, 2048, 2048), (237, 4096, 4096)] if args.quick else FP8_CONFIG_SHAPES
    if args.shapes:
        shapes = [tuple(int(x) for x in sh.split("x")) for sh in args.shapes.split(",")]
    rows_out = []
    for (m, n, kk) in shapes:
        a, b, sa, sb = fp8_inputs(m, n, kk, m + n)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
        mn = min(m, n)
        ws = torch.empty(2 * mn * kk + 4 * (kk // 128) * ((mn + 255) // 256) * 256, device="cuda", dtype=torch.uint8)
        maps = torch.zeros(256, device="cuda", dtype=torch.uint8)
        args_p = (P(a), P(sa), P(b), P(out), P(ws), P(maps), np.int32(m), np.int32(n), np.int32(kk), np.int32(ctas))
        args_g = (P(sa), P(sb), P(out), P(ws), P(maps), np.int32(m), np.int32(n), np.int32(kk), np.int32(ctas))

        def launch():
            prep((528,), (256,), args_p)
            gemm((ctas,), (384,), args_g, shared_mem=smem)

        launch(); torch.cuda.synchronize()
        rows = torch.cat([torch.arange(0, min(m, 4096)), torch.arange(max(0, m - 257), m)]).unique().cuda()
        ref = ref_rows(a, b, sa, sb, rows)
        chk = check(out, ref, rows)
        t = bench(launch, args.reps)
        t_prep = bench(lambda: prep((528,), (256,), args_p), args.reps)
        fl = 2.0 * m * n * kk + m * n * (3 * kk / 128 - 1)
        r = dict(shape=f"{m}x{n}x{kk}", **chk, ms=t, prep_ms=t_prep, tflops=fl / t / 1e9, sol=fl / t / 1e9 / 1979.0)
        try:  # row-wise scales: coarser than the config's 128-blocks (optimistic for PyTorch)
            sar = sa[:, :1].contiguous(); sbr = sb[:, :1].repeat_interleave(128, 0).T.contiguous()
            r["torch_rowwise_ms"] = bench(lambda: torch._scaled_mm(a, b.T, scale_a=sar, scale_b=sbr,
                                                                   out_dtype=torch.bfloat16), args.reps)
        except Exception as ex:
            r["torch_rowwise_error"] = str(ex)[:200]
        errs = []
        for name, sab, sbb in (("a_mmajor_b_kn", sa.t().contiguous().t(), sb.t().contiguous()),
                               ("a_mmajor_b_nk", sa.t().contiguous().t(), sb.contiguous()),
                               ("a_kmajor_b_kn", sa.contiguous(), sb.t().contiguous()),
                               ("a_kmajor_b_nk", sa.contiguous(), sb.contiguous())):
            try:  # the 128-block recipe (1x128 for a, 128x128 for b), where this build has it
                f = lambda: torch._scaled_mm(a, b.T, scale_a=sab, scale_b=sbb, out_dtype=torch.bfloat16)
                tb = f(); torch.cuda.synchronize()
                r["torch_block_form"] = name
                r["torch_block_maxabs_bf16"] = (tb[rows].double() - ref).abs().max().item()
                r["torch_block_ms"] = bench(f, args.reps)
                del tb
                break
            except Exception as ex:
                errs.append(name + ": " + str(ex)[:160])
        if "torch_block_ms" not in r:
            r["torch_block_error"] = " | ".join(errs)
        tm = r.get("torch_block_ms") or r.get("torch_rowwise_ms")
        if tm:
            r["torch_over_ours"] = tm / t
        rows_out.append(r)
        print(json.dumps(r), flush=True)
        del a, b, sa, sb, out, ws, ref
        torch.cuda.empty_cache()
    if args.out:
        json.dump(rows_out, open(os.path.join(args.out, "bsmm_torch.json"), "w"), indent=1)
    print("\nshape                max_abs   failing  ms       prep_ms  SOL     torch_row  torch_block  torch/ours")
    for r in rows_out:
        print(f"{r['shape']:20s} {r['max_abs']:.2e}  {r['failing']:7d}  {r['ms']:.4f}  {r['prep_ms']:.4f}  "
              f"{r['sol']:.3f}  {r.get('torch_rowwise_ms') or float('nan'):.4f}     "
              f"{r.get('torch_block_ms') or float('nan'):.4f}      {r.get('torch_over_ours') or float('nan'):.3f}")


if __name__ == "__main__":
    main()
