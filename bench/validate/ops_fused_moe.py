"""fused_moe in PyTorch (ops.md section 2): per expert in ascending order,
gather the (token, slot) pairs routed to it, run gate/up, silu * up and down
in fp32 (no TF32), and add weight * result into the token's output."""
import torch
import torch.nn.functional as F


def torch_impl(inputs, axes, scalars):
    torch.backends.cuda.matmul.allow_tf32 = False
    x = inputs["hidden_states"]
    I = axes["inter"]
    ids = inputs["topk_ids"].long()
    wts = inputs["topk_weights"].float()
    out = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float32, device=x.device)
    for e in range(axes["experts"]):
        t_idx, s_idx = (ids == e).nonzero(as_tuple=True)
        if t_idx.numel() == 0:
            continue
        xe = x[t_idx].float()
        gu = xe @ inputs["w1"][e].float().T  # [n_e, 2I]
        act = F.silu(gu[:, :I]) * gu[:, I:]
        y = act @ inputs["w2"][e].float().T  # [n_e, H]
        out.index_add_(0, t_idx, y * wts[t_idx, s_idx][:, None])
    return {"out": out}
