"""Independent PyTorch implementation of chunk_delta_rule_output (ops.md section 19)."""
import torch


def torch_impl(inputs, axes, scalars):
    B, T, C = axes["batch"], axes["tokens"], axes["chunk_size"]
    HQ, HV, K = axes["num_q_heads"], axes["num_v_heads"], axes["key_dim"]
    r = max(HV // HQ, 1)
    dev = inputs["q"].device
    head = torch.clamp(torch.arange(HV, device=dev) // r, max=HQ - 1)
    scale = K ** -0.5
    q = inputs["q"].float()[:, :, head, :]     # [B, T, HV, K]
    k = inputs["k"].float()[:, :, head, :]
    v = inputs["v"].float()                    # [B, T, HV, V]
    h = inputs["h"].float()                    # [B, NC, HV, K, V]
    g = inputs["g"].float()                    # [B, T, HV]
    out = torch.empty_like(v)
    NC = (T + C - 1) // C
    for b in range(B):
        for c in range(NC):
            t0, t1 = c * C, min(c * C + C, T)
            qc = q[b, t0:t1].transpose(0, 1)   # [HV, n, K]
            kc = k[b, t0:t1].transpose(0, 1)
            vc = v[b, t0:t1].transpose(0, 1)   # [HV, n, V]
            gc = g[b, t0:t1].transpose(0, 1)   # [HV, n]
            inter = torch.exp(gc)[:, :, None] * (qc @ h[b, c])            # [HV, n, V]
            diff = gc[:, :, None] - gc[:, None, :]                          # g_i - g_m
            n = t1 - t0
            lower = torch.tril(torch.ones(n, n, dtype=torch.bool, device=dev))
            gate = torch.where((diff <= 0) & lower, torch.exp(diff), torch.zeros_like(diff))
            A = ((qc @ kc.transpose(1, 2)) * gate).to(torch.bfloat16).float()
            out[b, t0:t1] = ((inter + A @ vc) * scale).transpose(0, 1)
    return {"out": out.to(torch.bfloat16)}
