"""Independent PyTorch implementation of layer_norm (ops.md section 24)."""
import torch


def torch_impl(inputs, axes, scalars):
    x = inputs["x"].double()
    w = inputs["weight"].double()
    b = inputs["bias"].double()
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # biased variance
    y = (x - mu) / torch.sqrt(var + float(scalars["eps"])) * w + b
    return {"out": y.to(torch.bfloat16)}
