"""Independent PyTorch implementation of unified_attention (ops.md section 1).
Query offsets are the prefix sum of seqused_k (the config has no
cu_seqlens_q input; query length = KV length)."""
import torch

NOTES = "query offsets = prefix sum of seqused_k (no cu_seqlens_q input)"


def torch_impl(inputs, axes, scalars):
    torch.backends.cuda.matmul.allow_tf32 = False  # full fp32 products
    HQ, HKV, D, BS = axes["num_query_heads"], axes["num_kv_heads"], axes["head_size"], axes["block_size"]
    G = HQ // HKV
    q = inputs["q"]                             # [N, HQ, D] bf16
    kc, vc = inputs["k_cache"], inputs["v_cache"]  # [NB, BS, HKV, D]
    lens = inputs["seqused_k"].tolist()
    table = inputs["block_table"].long()
    out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
    starts = [0]
    for n in lens:
        starts.append(starts[-1] + n)
    # sequences of equal length are batched (bounded by the score matrix size)
    i = 0
    while i < len(lens):
        L = lens[i]
        nb = (L + BS - 1) // BS
        per_seq = HQ * L * L * 4
        max_batch = max(1, (1 << 30) // max(per_seq, 1))
        j = i
        while j < len(lens) and lens[j] == L and j - i < max_batch:
            j += 1
        seqs = list(range(i, j))
        blocks = table[seqs, :nb]                                   # [b, nb]
        K = kc[blocks].reshape(len(seqs), nb * BS, HKV, D)[:, :L].float()
        V = vc[blocks].reshape(len(seqs), nb * BS, HKV, D)[:, :L].float()
        K = K.repeat_interleave(G, dim=2).permute(0, 2, 1, 3)      # [b, HQ, L, D]
        V = V.repeat_interleave(G, dim=2).permute(0, 2, 1, 3)
        Q = torch.stack([q[starts[s]:starts[s] + L] for s in seqs]).float().permute(0, 2, 1, 3)  # [b, HQ, L, D]
        chunk = max(1, min(L, (1 << 30) // max(len(seqs) * HQ * L * 4, 1)))
        for c0 in range(0, L, chunk):
            c1 = min(L, c0 + chunk)
            s = (Q[:, :, c0:c1] @ K.transpose(-1, -2)) / (D ** 0.5)  # [b, HQ, c, L]
            rows = torch.arange(c0, c1, device=q.device)[:, None]
            cols = torch.arange(L, device=q.device)[None, :]
            s = s.masked_fill(cols > rows, float("-inf"))            # causal (Lq == Lk)
            o = torch.softmax(s, dim=-1) @ V                         # [b, HQ, c, D]
            for bi, sidx in enumerate(seqs):
                out[starts[sidx] + c0:starts[sidx] + c1] = o[bi].permute(1, 0, 2).to(torch.bfloat16)
        i = j
    return {"out": out}
