"""moe_align_block_size in PyTorch (ops.md section 18), in the config's
fixed-size form: sorted_token_ids padded with the sentinel N past P,
expert_ids with -1 past P / block_size."""
import torch


def torch_impl(inputs, axes, scalars):
    ids = inputs["topk_ids"].reshape(-1).long()
    n = ids.numel()
    E, B = axes["num_experts"], axes["block_size"]
    max_len = n + min(n, E) * (B - 1)
    order = torch.argsort(ids, stable=True).cpu().tolist()  # flat indices grouped by expert, ascending
    counts = torch.bincount(ids, minlength=E).cpu().tolist()
    sorted_ids, blocks = [], []
    pos = 0
    for e in range(E):
        c = counts[e]
        if c == 0:
            continue
        sorted_ids += order[pos:pos + c]
        pos += c
        padded = (c + B - 1) // B * B
        sorted_ids += [n] * (padded - c)
        blocks += [e] * (padded // B)
    P = len(sorted_ids)
    dev = inputs["topk_ids"].device
    sti = torch.full((max_len,), n, dtype=torch.int32, device=dev)
    sti[:P] = torch.tensor(sorted_ids, dtype=torch.int32, device=dev)
    eid = torch.full(((max_len + B - 1) // B,), -1, dtype=torch.int32, device=dev)
    eid[:len(blocks)] = torch.tensor(blocks, dtype=torch.int32, device=dev)
    return {"sorted_token_ids": sti, "expert_ids": eid,
            "num_tokens_post_pad": torch.tensor([P], dtype=torch.int32, device=dev)}
