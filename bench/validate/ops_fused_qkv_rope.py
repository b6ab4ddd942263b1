"""fused_qkv_rope in PyTorch (ops.md section 9): NeoX rotary embedding on
the q and k heads of a fused QKV row, v copied. Serves fused_qkv_rope and
fused_qkv_rope_fp16."""
import torch


def torch_impl(inputs, axes, scalars):
    qkv = inputs["qkv"]
    T, H, KV, D, R = axes["tokens"], axes["num_heads"], axes["num_kv_heads"], axes["head_dim"], axes["rope_dim"]
    x = qkv.float().view(T, H + 2 * KV, D)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, R, 2, dtype=torch.float32, device=qkv.device) / R))
    theta = inputs["positions"].float()[:, None] * inv_freq[None, :]  # [T, R/2]
    c, s = torch.cos(theta)[:, None, :], torch.sin(theta)[:, None, :]
    qk = x[:, :H + KV]
    x1, x2 = qk[..., :R // 2], qk[..., R // 2:R]
    rot = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, qk[..., R:]], dim=-1).to(qkv.dtype)
    v = qkv.view(T, H + 2 * KV, D)[:, H + KV:]
    return {"q": rot[:, :H], "k": rot[:, H:], "v": v.clone()}
