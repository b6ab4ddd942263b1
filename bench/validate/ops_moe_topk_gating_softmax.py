"""Independent PyTorch implementation of moe_topk_gating_softmax (ops.md section 14)."""
import torch


def torch_impl(inputs, axes, scalars):
    k = axes["top_k"]
    p = torch.softmax(inputs["gating_output"].float(), dim=-1)
    # descending probability, ties by ascending id: sort by id first, then a
    # stable descending sort by value
    vals, idx = torch.sort(p, dim=-1, descending=True, stable=True)
    return {"topk_weights": vals[:, :k].contiguous(), "topk_ids": idx[:, :k].int().contiguous()}
