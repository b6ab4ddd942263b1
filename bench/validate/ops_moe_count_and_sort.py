"""Independent PyTorch implementation of moe_count_and_sort (ops.md section 22)."""
import torch


def torch_impl(inputs, axes, scalars):
    E = axes["num_experts"]
    ids = inputs["topk_ids"].reshape(-1).long()
    valid = (ids >= 0) & (ids < E)
    counts = torch.bincount(ids[valid], minlength=E)
    cumsum = torch.zeros(E + 1, dtype=torch.long, device=ids.device)
    cumsum[1:] = torch.cumsum(counts, 0)
    flat = torch.arange(ids.numel(), device=ids.device)
    # stable sort by expert id keeps ascending flat order within an expert
    order = torch.sort(ids[valid], stable=True).indices
    sorted_ids = flat[valid][order]
    return {"sorted_token_ids": sorted_ids.int(), "expert_token_counts": counts.int(), "cumsum": cumsum.int()}
