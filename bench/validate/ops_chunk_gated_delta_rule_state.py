"""Independent PyTorch implementation of chunk_gated_delta_rule_state (ops.md section 16).
The config writes the final state into the pool in place (input "state");
the expected final pool is returned under that name."""
import torch

NOTES = "final_state is the in-place input 'state'"


def torch_impl(inputs, axes, scalars):
    B, T, C = axes["batch"], axes["tokens"], axes["chunk_size"]
    HK, HV = axes["num_k_heads"], axes["num_v_heads"]
    r = max(HV // HK, 1)
    dev = inputs["k"].device
    head = torch.clamp(torch.arange(HV, device=dev) // r, max=HK - 1)
    k = inputs["k"].float()[:, :, head, :]     # [B, T, HV, K]
    w = inputs["w"].float()                    # [B, T, HV, K]
    u = inputs["u"].float()                    # [B, T, HV, V]
    g = inputs["g"].float()                    # [B, T, HV]
    pool = inputs["state"]                     # fp32 [S, HV, K, V]; a clone: updated here
    idx = inputs["state_indices"].long()
    NC = (T + C - 1) // C
    Kd, Vd = w.shape[-1], u.shape[-1]
    h_out = torch.empty(B, NC, HV, Kd, Vd, dtype=torch.bfloat16, device=dev)
    v_new = torch.empty(B, T, HV, Vd, dtype=torch.bfloat16, device=dev)
    for b in range(B):
        H = pool[idx[b]].float().clone()       # [HV, K, V]
        for c in range(NC):
            t0, t1 = c * C, min(c * C + C, T)
            Hb16 = H.to(torch.bfloat16)
            h_out[b, c] = Hb16
            Hb = Hb16.float()
            wc = w[b, t0:t1].transpose(0, 1)   # [HV, n, K]
            vn = u[b, t0:t1].transpose(0, 1) - wc @ Hb                      # [HV, n, V]
            v_new[b, t0:t1] = vn.transpose(0, 1).to(torch.bfloat16)
            gc = g[b, t0:t1].transpose(0, 1)   # [HV, n]
            gl = gc[:, -1:]                    # [HV, 1]
            d = gl - gc
            f = torch.where(d <= 0, torch.exp(d), torch.zeros_like(d))
            vs = (vn * f[:, :, None]).to(torch.bfloat16).float()
            kc = k[b, t0:t1].transpose(0, 1)   # [HV, n, K]
            H = H * torch.exp(gl)[:, :, None] + kc.transpose(1, 2) @ vs
        pool[idx[b]] = H
    return {"h": h_out, "v_new": v_new, "state": pool}
