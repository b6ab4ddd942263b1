"""block_scaled_mm in PyTorch (ops.md section 3): per 128-wide K group, an
fp32 product of the dequantized fp8 blocks, scaled by the row's A scale and
the tile's B scale before it is added. fp32 matmuls without TF32."""
import torch

CHUNK_ROWS = 32768


def torch_impl(inputs, axes, scalars):
    torch.backends.cuda.matmul.allow_tf32 = False
    m, n, k, G = axes["m"], axes["n"], axes["k"], axes["group"]
    a, b = inputs["a"], inputs["b"]
    sa, sb = inputs["a_scales"], inputs["b_scales"]
    groups = k // G
    bf = b.float()
    sb_cols = sb.repeat_interleave(G, dim=0)[:n]  # [n, groups]: scale of column j is sb[j / 128]
    out = torch.empty(m, n, dtype=torch.float32, device=a.device)
    for r0 in range(0, m, CHUNK_ROWS):
        r1 = min(m, r0 + CHUNK_ROWS)
        af = a[r0:r1].float()
        acc = torch.zeros(r1 - r0, n, dtype=torch.float32, device=a.device)
        for kb in range(groups):
            part = af[:, kb * G:(kb + 1) * G] @ bf[:, kb * G:(kb + 1) * G].T
            acc += (part * sa[r0:r1, kb:kb + 1]) * sb_cols[:, kb][None, :]
        out[r0:r1] = acc
    return {"out": out}
