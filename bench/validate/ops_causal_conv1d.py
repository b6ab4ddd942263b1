"""Independent PyTorch implementation of causal_conv1d (ops.md section 13)."""
import torch
import torch.nn.functional as F


def torch_impl(inputs, axes, scalars):
    W = axes["width"]
    x = inputs["x"].float()                      # [C, T]
    w = inputs["weight"].float()                 # [C, W]
    b = inputs["bias"].float()                   # [C]
    st = inputs["initial_state"].float()[0]      # [C, W-1]
    T = x.shape[1]
    e = torch.cat([st, x], dim=1)                # [C, W-1+T]: the extended sequence
    # cross-correlation without flip, as explicit shifted products in fp32
    # (no cuDNN, which may use TF32 for fp32 convolutions)
    y = b[:, None].expand(-1, T).clone()
    for j in range(W):
        y += w[:, j:j + 1] * e[:, j:j + T]
    y = y.to(torch.bfloat16).float()
    return {"out": F.silu(y).to(torch.bfloat16)}
