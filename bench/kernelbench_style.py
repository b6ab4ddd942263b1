#!/usr/bin/env python3
"""A KernelBench-style evaluation of the RMSNorm seed kernel, for comparison
with `kopt eval` on the same machine (docs/benchmarks.md, throughput).

What KernelBench's harness does, reproduced here with the same kernel
source: build a PyTorch extension with torch.utils.cpp_extension.load_inline
(nvcc + host wrapper), then per workload check correctness against a
PyTorch reference on a few random inputs and time with CUDA events (100
trials, no L2 flush). Prints the wall time of build and evaluation as JSON.
"""
import json
import os
import sys
import time

t_start = time.time()
import torch
from torch.utils.cpp_extension import load_inline

here = os.path.dirname(os.path.abspath(__file__))
kernel_src = open(os.path.join(here, "..", "configs", "examples", "rmsnorm_seed.cu")).read()
op = json.load(open(os.path.join(here, "rmsnorm_throughput.json")))

cuda_src = kernel_src + r'''
#include <torch/extension.h>
torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps) {
  auto out = torch::empty_like(x);
  const int tokens = x.size(0), hidden = x.size(1);
  rmsnorm_seed<<<tokens, BLOCK>>>(reinterpret_cast<const __nv_bfloat16*>(x.data_ptr()),
      reinterpret_cast<const __nv_bfloat16*>(w.data_ptr()), reinterpret_cast<__nv_bfloat16*>(out.data_ptr()),
      hidden, (float)eps);
  return out;
}
'''
cpp_src = "torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps);"
t0 = time.time()
ext = load_inline(name="kb_rmsnorm_%d" % os.getpid(), cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["rmsnorm"], extra_cuda_cflags=["-O3", "-DBLOCK=256", "-DVEC=8", "-arch=sm_90a"],
                  verbose=False)
t_build = time.time() - t0

def reference(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(torch.bfloat16)

t1 = time.time()
results = []
for wl in op["workloads"]:
    t, h = wl["axes"]["tokens"], wl["axes"]["hidden"]
    ok = True
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.randn(t, h, device="cuda", dtype=torch.bfloat16)
        w = (torch.rand(h, device="cuda") + 0.5).to(torch.bfloat16)
        ok = ok and torch.allclose(ext.rmsnorm(x, w, 1e-6).float(), reference(x, w).float(), atol=2e-2, rtol=2e-2)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(100):
        start.record()
        ext.rmsnorm(x, w, 1e-6)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    results.append({"workload": wl["id"], "correct": bool(ok), "median_ms": times[len(times) // 2]})
t_eval = time.time() - t1
print(json.dumps({"build_s": t_build, "eval_s": t_eval, "total_s": time.time() - t_start,
                  "torch": torch.__version__, "workloads": results}))
