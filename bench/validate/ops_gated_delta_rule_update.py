"""Independent PyTorch implementation of gated_delta_rule_update (ops.md section 8).
The config updates the state pool in place (input "state"); the expected final
pool is returned under that name."""
import torch

NOTES = "final_state is the in-place input 'state'"


def torch_impl(inputs, axes, scalars):
    B, T = axes["batch"], axes["tokens"]
    HQ, HV, K = axes["num_q_heads"], axes["num_v_heads"], axes["key_dim"]
    r = max(HV // HQ, 1)
    head = torch.clamp(torch.arange(HV, device=inputs["q"].device) // r, max=HQ - 1)  # q/k head of each value head
    scale = K ** -0.5
    x = inputs["a"].float() + inputs["dt_bias"].float()                 # [B, T, HV]
    sp = torch.where(x > 20.0, x, torch.log1p(torch.exp(x)))
    g = -torch.exp(inputs["A_log"].float()) * sp                         # [B, T, HV]
    beta = torch.sigmoid(inputs["b"].float())                            # [B, T, HV]
    q = inputs["q"].float()[:, :, head, :]                               # [B, T, HV, K]
    k = inputs["k"].float()[:, :, head, :]
    q = q / torch.clamp(torch.linalg.vector_norm(q, dim=-1, keepdim=True), min=1e-6)
    k = k / torch.clamp(torch.linalg.vector_norm(k, dim=-1, keepdim=True), min=1e-6)
    v = inputs["v"].float()                                              # [B, T, HV, V]
    pool = inputs["state"].float().clone()                               # [S, HV, K, V]
    idx = inputs["state_indices"].long()
    out = torch.empty_like(v)
    for b in range(B):
        H = pool[idx[b]].clone()                                         # [HV, K, V]
        for t in range(T):
            H = H * torch.exp(g[b, t])[:, None, None]
            p = torch.einsum("hkv,hk->hv", H, k[b, t])
            delta = (v[b, t] - p) * beta[b, t][:, None]
            H = H + k[b, t][:, :, None] * delta[:, None, :]
            out[b, t] = torch.einsum("hkv,hk->hv", H, q[b, t] * scale)
        pool[idx[b]] = H
    return {"out": out.to(torch.bfloat16), "state": pool}
