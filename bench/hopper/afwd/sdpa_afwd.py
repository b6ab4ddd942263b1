#!/usr/bin/env python3
"""What a PyTorch user would run for attention_forward: torch SDPA on the config's workloads.

For every workload of configs/bench/attention_forward.json (or --only IDS): q, k, v bf16 ~ N(0,1)
in [1, heads, seq_len, head_dim], F.scaled_dot_product_attention (non-causal, PyTorch picks the
backend: flash for bf16 on Hopper), timed with triton.testing.do_bench (L2 flushed between runs,
median). The output is checked under the config's tolerance against an fp32 computation of the
same definition on sampled query rows (the first and last 64 rows of every head; the giants would
not fit a full fp32 score matrix). SOL uses the config's roofline (bf16 tensor peak of
configs/hardware/gpus.json for the device). One JSON line per workload on stdout.

    python3 bench/hopper/afwd/sdpa_afwd.py [--only s0_l720_h16_d72,...] [--rows 64]
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F
import triton.testing


def peak(dev_name):
    gpus = json.load(open("configs/hardware/gpus.json"))["gpus"]
    for g in gpus.values():
        if any(m in dev_name for m in g["match"]):
            return g["flops_per_s"]["bf16_tensor"], g["dram_bytes_per_s"]
    sys.exit(f"no peaks for {dev_name}")


def check(q, k, v, out, rows, atol, rtol):
    """Worst |out - ref| / (atol + rtol |ref|) over the sampled rows (<= 1 passes)."""
    L = q.shape[2]
    idx = torch.cat([torch.arange(0, min(rows, L)), torch.arange(max(0, L - rows), L)]).unique().cuda()
    qs = q[:, :, idx, :].float()
    s = torch.matmul(qs, k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    ref = torch.matmul(torch.softmax(s, dim=-1), v.float()).bfloat16().float()
    got = out[:, :, idx, :].float()
    ratio = (got - ref).abs() / (atol + rtol * ref.abs())
    return float(ratio.max()), int((ratio > 1).sum()), int(ratio.numel())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/bench/attention_forward.json")
    ap.add_argument("--only", default="")
    ap.add_argument("--rows", type=int, default=64)
    a = ap.parse_args()
    cfg = json.load(open(a.config))
    tol = cfg["tolerance"]
    fpeak, bw = peak(torch.cuda.get_device_name())
    only = set(filter(None, a.only.split(",")))
    torch.manual_seed(0)
    for w in cfg["workloads"]:
        if only and w["id"] not in only:
            continue
        L, H, D = (w["axes"][n] for n in ("seq_len", "num_heads", "head_dim"))
        q, k, v = (torch.randn(1, H, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        out = F.scaled_dot_product_attention(q, k, v)
        worst, failing, checked = check(q, k, v, out, a.rows, tol["atol"], tol["rtol"])
        ms = triton.testing.do_bench(lambda: F.scaled_dot_product_attention(q, k, v), return_mode="median")
        # The config's roofline (attention_forward.json "roofline"), evaluated here.
        t_sol = max(4.0 * L * L * H * D / fpeak, (8.0 * L * H * D + 16) / bw)
        print(json.dumps({"id": w["id"], "weight": w["weight"], "sdpa_ms": ms, "sol": t_sol / (ms * 1e-3),
                          "worst_over_tol": worst, "failing": failing, "checked": checked,
                          "torch": torch.__version__, "device": torch.cuda.get_device_name()}), flush=True)
        del q, k, v, out
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
