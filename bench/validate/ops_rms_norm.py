"""rms_norm in PyTorch (ops.md section 10): fp32 math, one rounding."""
import torch


def torch_impl(inputs, axes, scalars):
    x = inputs["x"].float()
    w = inputs["weight"].float()
    ms = (x * x).mean(dim=-1, keepdim=True)
    rinv = 1.0 / torch.sqrt(ms + scalars["eps"])
    return {"out": ((x * rinv) * w).to(torch.bfloat16)}
