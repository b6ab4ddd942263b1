"""paged_attention_decode in PyTorch (ops.md section 5): gathers each
sequence's K and V through the block table from the x-packed key layout and
the token-fastest value layout, then plain softmax attention in fp32.
Serves paged_attention_decode and paged_attention_decode_fp16."""
import math

import torch


def torch_impl(inputs, axes, scalars):
    q = inputs["query"]
    S, HQ, HKV, D = axes["num_seqs"], axes["num_heads"], axes["num_kv_heads"], axes["head_size"]
    BS = axes["block_size"]
    kc = inputs["k_cache"]  # [NB, HKV, D/8, BS, 8]
    vc = inputs["v_cache"]  # [NB, HKV, D, BS]
    NB = kc.shape[0]
    k_tok = kc.permute(0, 3, 1, 2, 4).reshape(NB, BS, HKV, D).float()  # [NB, BS, HKV, D]
    v_tok = vc.permute(0, 3, 1, 2).reshape(NB, BS, HKV, D).float()
    out = torch.zeros(S, HQ, D, dtype=torch.float32, device=q.device)
    group = HQ // HKV
    kv_of_head = torch.arange(HQ, device=q.device) // group
    for i in range(S):
        n = int(inputs["seq_lens"][i])
        if n <= 0:
            continue
        nblk = (n + BS - 1) // BS
        blocks = inputs["block_tables"][i, :nblk].long()
        K = k_tok[blocks].reshape(-1, HKV, D)[:n][:, kv_of_head]  # [n, HQ, D]
        V = v_tok[blocks].reshape(-1, HKV, D)[:n][:, kv_of_head]
        s = torch.einsum("hd,phd->hp", q[i].float(), K) / math.sqrt(D)
        p = torch.softmax(s, dim=-1)
        out[i] = torch.einsum("hp,phd->hd", p, V)
    return {"out": out.to(q.dtype)}
