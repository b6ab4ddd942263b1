"""Independent PyTorch implementation of mla_decode_attention (ops.md section 11)."""
import torch


def torch_impl(inputs, axes, scalars):
    dv = axes["kv_lora_rank"]
    q = inputs["q"].float()                    # [B, H, 576]
    kv = inputs["kv_cache"].float()[:, 0, :]   # [sum(len), 576]
    lens = inputs["seq_lens"].tolist()
    dqk = q.shape[-1]
    outs = []
    o = 0
    for i, n in enumerate(lens):
        K = kv[o:o + n]                        # [n, 576]
        s = (q[i] @ K.t()) / (dqk ** 0.5)      # [H, n]
        p = torch.softmax(s, dim=-1)
        outs.append(p @ K[:, :dv])             # [H, 512]
        o += n
    return {"out": torch.stack(outs).to(torch.bfloat16)}
