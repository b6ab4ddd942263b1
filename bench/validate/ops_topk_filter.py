"""topk_filter in PyTorch (ops.md section 7): keep values >= the k-th
largest (ties kept), -inf elsewhere."""
import torch


def torch_impl(inputs, axes, scalars):
    x = inputs["logits"]
    k = min(int(scalars["top_k"]), axes["vocab"])
    thr = torch.topk(x, k, dim=-1).values[:, -1:]
    return {"out": torch.where(x >= thr, x, torch.full_like(x, float("-inf")))}
