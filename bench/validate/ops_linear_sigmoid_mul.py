"""Independent PyTorch implementation of linear_sigmoid_mul (ops.md section 21)."""
import torch


def torch_impl(inputs, axes, scalars):
    x = inputs["hidden_states"].float()
    w = inputs["weight"].float()
    b = inputs["bias"].float()
    m = inputs["post_mul_mat"].float()
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # full fp32 products
    try:
        gate = (x @ w.t() + b).to(torch.bfloat16).float()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    return {"out": (torch.sigmoid(gate) * m).to(torch.bfloat16)}
