"""fused_add_rms_norm in PyTorch (ops.md section 17): the sum is rounded to
bf16 once and the norm is taken over the rounded values."""
import torch


def torch_impl(inputs, axes, scalars):
    r = (inputs["x"].float() + inputs["residual"].float()).to(torch.bfloat16)
    rf = r.float()
    rinv = 1.0 / torch.sqrt((rf * rf).mean(dim=-1, keepdim=True) + scalars["eps"])
    out = ((rf * rinv) * inputs["weight"].float()).to(torch.bfloat16)
    return {"out": out, "residual_out": r}
