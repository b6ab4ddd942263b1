#!/usr/bin/env python3
"""block_scaled_mm on the GPU machine (issue 23, helper bsmm2), three parts:

  --variants: the cluster kernel (bench/hopper/bsmm_cluster/block_scaled_mm_cluster.cu) in its split-K
      forms on the small-m shapes: `atomics` (cl = 1, scalar atomicAdd epilogue, the kernel
      measured on 2026-12-02), `v4` (cl = 1, EPI_V4 = 1) and `cluster` (the launch plan's rule:
      cl = 4 when the tile count is <= 32, 2 when <= 66; the K splits added through
      distributed shared memory). Correctness on a row subset against float64 (the config's
      rule), time with triton.testing.do_bench (L2 flushed, median) of both launches.
  --torch: torch._scaled_mm (cuBLAS fp8, row-wise scales: coarser than the 128-blocks, so
      optimistic for PyTorch) on all 24 shapes, fp32 and bf16 out, triton.testing.do_bench.
  --fp8-slices: the fp8 tensor core's accuracy on this config's data as a function of the
      promotion interval: out = sum over K slices of width W of an fp8 GEMM of the slice
      (cuBLAS, fresh accumulator per slice) times the slice's group scales, summed in float64,
      against the exact float64 result, W = 32, 64, 128; the config's tolerance rule.

    python3 bench/hopper/bsmm_cluster.py --variants --torch --fp8-slices --out DIR
"""
import argparse, json, os, sys
import numpy as np
import torch
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import FP8_CONFIG_SHAPES, P, fp8_inputs, load  # noqa: E402
from bsmm_torch import ATOL, RTOL, check, ref_rows  # noqa: E402

SRC = "bench/hopper/bsmm_cluster/block_scaled_mm_cluster.cu"  # the kernel with the cl argument
PEAK = 1979.0  # TFLOP/s, dense fp8, datasheet (configs/hardware/gpus.json)


def flops(m, n, k):
    return 2.0 * m * n * k + m * n * (3 * k / 128 - 1)


def plan_cl(m, n):  # the launch plan's rule (configs/bench/block_scaled_mm.json)
    t = -(-max(m, n) // 128) * -(-min(m, n) // 256)
    cl = 1 + min(1, 66 // t) + 2 * min(1, 32 // t)
    return cl, 132 - 4 * min(1, 32 // t)


def dob(fn):
    return triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")


def variants(shapes, src, out_rows):
    mods = {}
    for (m, n, kk) in shapes:
        a, b, sa, sb = fp8_inputs(m, n, kk, m + n)
        rows = torch.cat([torch.arange(0, min(m, 2048)), torch.arange(max(0, m - 129), m)]).unique().cuda()
        ref = ref_rows(a, b, sa, sb, rows)
        cl_rule, grid_rule = plan_cl(m, n)
        for name, epi, cl, grid in (("atomics", 0, 1, 132), ("v4", 1, 1, 132), ("cluster", 0, cl_rule, grid_rule)):
            if name == "cluster" and cl == 1:
                continue
            key = (epi, cl)
            try:
                if key not in mods:
                    defs = {"STAGES": 5, "GROUP_M": 8, "EPI_V4": epi}
                    if cl > 1:
                        defs["CLUSTER_CT"] = cl
                    prep = load(src, "bsmm_prep", defs)
                    gemm = load(src, "bsmm_f16_tma", defs)
                    smem = 5 * 40960 + 2048 + 16384 * epi
                    gemm.max_dynamic_shared_size_bytes = smem
                    mods[key] = (prep, gemm, smem)
                prep, gemm, smem = mods[key]
                out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
                mn = min(m, n)
                ws = torch.empty(2 * mn * kk + 4 * (kk // 128) * ((mn + 255) // 256) * 256, device="cuda",
                                 dtype=torch.uint8)
                maps = torch.zeros(256, device="cuda", dtype=torch.uint8)
                ap = (P(a), P(sa), P(b), P(out), P(ws), P(maps), np.int32(m), np.int32(n), np.int32(kk),
                      np.int32(132), np.int32(cl))
                ag = (P(sa), P(sb), P(out), P(ws), P(maps), np.int32(m), np.int32(n), np.int32(kk), np.int32(132),
                      np.int32(cl))

                def launch():
                    prep((528,), (256,), ap)
                    gemm((grid,), (384,), ag, shared_mem=smem)

                launch(); torch.cuda.synchronize()
                chk = check(out, ref, rows)
                t = dob(launch)
                r = dict(part="variant", shape=f"{m}x{n}x{kk}", variant=name, cl=cl, grid=grid, **chk, ms=t,
                         sol=flops(m, n, kk) / t / 1e9 / PEAK)
                del out, ws
            except Exception as ex:
                r = dict(part="variant", shape=f"{m}x{n}x{kk}", variant=name, cl=cl, error=str(ex)[:300])
            out_rows.append(r)
            print(json.dumps(r), flush=True)
        del a, b, sa, sb, ref
        torch.cuda.empty_cache()


def torch_times(shapes, out_rows):
    for (m, n, kk) in shapes:
        r = dict(part="torch", shape=f"{m}x{n}x{kk}")
        try:
            a, b, sa, sb = fp8_inputs(m, n, kk, m + n)
            sar = sa[:, :1].contiguous()
            sbr = sb[:, :1].repeat_interleave(128, 0).T.contiguous()
            for dt, nm in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
                f = lambda: torch._scaled_mm(a, b.T, scale_a=sar, scale_b=sbr, out_dtype=dt)
                f(); torch.cuda.synchronize()
                t = dob(f)
                r[f"ms_{nm}"] = t
                r[f"sol_{nm}"] = flops(m, n, kk) / t / 1e9 / PEAK
            del a, b, sa, sb
        except Exception as ex:
            r["error"] = str(ex)[:300]
        torch.cuda.empty_cache()
        out_rows.append(r)
        print(json.dumps(r), flush=True)


def fp8_slices(shapes, out_rows, nrows=1024):
    for (m, n, kk) in shapes:
        a, b, sa, sb = fp8_inputs(m, n, kk, m + n)
        rows = torch.arange(0, min(m, nrows)).cuda()
        ref = ref_rows(a, b, sa, sb, rows)
        ar = a[rows].contiguous()
        one_a = torch.ones(len(rows), 1, device="cuda")
        one_b = torch.ones(1, n, device="cuda")
        sbe = sb.double().repeat_interleave(128, 0)  # [n, groups]
        for w in (32, 64, 128):
            r = dict(part="fp8_slices", shape=f"{m}x{n}x{kk}", width=w, rows=len(rows))
            try:
                acc = torch.zeros(len(rows), n, device="cuda", dtype=torch.float64)
                for k0 in range(0, kk, w):
                    g = k0 // 128
                    pa = ar[:, k0:k0 + w].contiguous()
                    pb = b[:, k0:k0 + w].contiguous()
                    pk = torch._scaled_mm(pa, pb.T, scale_a=one_a, scale_b=one_b, out_dtype=torch.float32)
                    acc += pk.double() * sa[rows, g:g + 1].double() * sbe[None, :, g]
                d = (acc - ref).abs()
                bad = (d > ATOL) & (d > RTOL * ref.abs())
                r.update(max_abs=d.max().item(), failing=int(bad.sum().item()), checked=d.numel())
            except Exception as ex:
                r["error"] = str(ex)[:300]
            out_rows.append(r)
            print(json.dumps(r), flush=True)
        del a, b, sa, sb, ref, ar
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--torch", action="store_true")
    ap.add_argument("--fp8-slices", action="store_true")
    ap.add_argument("--src", default=SRC)
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
    rows = []
    path = os.path.join(args.out, "bsmm_cluster.json")
    try:
        if args.variants:
            variants([(237, 4096, 4096), (349, 2048, 2048), (1024, 2048, 2048)], args.src, rows)
            json.dump(rows, open(path, "w"), indent=1)
        if args.fp8_slices:
            fp8_slices([(4096, 4096, 4096), (8192, 2048, 2048)], rows)
            json.dump(rows, open(path, "w"), indent=1)
        if args.torch:
            torch_times(FP8_CONFIG_SHAPES, rows)
    finally:
        json.dump(rows, open(path, "w"), indent=1)


if __name__ == "__main__":
    main()
