"""reshape_and_cache in PyTorch (ops.md section 6): copies of the caches
with the rows named by slot_mapping replaced by the new key / value rows."""
import torch


def torch_impl(inputs, axes, scalars):
    h, d = axes["heads"], axes["head_dim"]
    slots = inputs["slot_mapping"].long()
    keep = slots >= 0
    out = {}
    for src, cache, name in (("key", "key_cache", "key_cache_out"), ("value", "value_cache", "value_cache_out")):
        c = inputs[cache].clone()
        flat = c.view(-1, h, d)
        flat[slots[keep]] = inputs[src][keep]
        out[name] = c
    return out
