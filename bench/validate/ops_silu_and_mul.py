"""silu_and_mul in PyTorch (ops.md section 15): silu rounded to bf16, then
the product rounded again."""
import torch
import torch.nn.functional as F


def torch_impl(inputs, axes, scalars):
    x = inputs["x"]
    d = axes["d"]
    s = F.silu(x[:, :d].float()).to(torch.bfloat16)
    return {"out": (s.float() * x[:, d:].float()).to(torch.bfloat16)}
