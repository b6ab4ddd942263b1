#!/usr/bin/env python3
"""Prints the launch plan (kernel, grid, block, shared bytes) of a unified_attention config or
candidate for every workload of configs/bench/unified_attention.json at the parameters'
defaults, and checks the routing: exactly one launch with more than one block per workload (the
one of its head size), every other launch one block.
    python3 bench/hopper/uattn/big/plan_show.py CONFIG_OR_CANDIDATE.json"""
import json, re, sys

cfg = json.load(open("configs/bench/unified_attention.json"))
c = json.load(open(sys.argv[1]))
b = c.get("baseline", c)


def ev(e, env):
    e = re.sub(r"(?<![/])/(?!/)", "//", str(e))
    return eval(e, {"min": min, "max": max, "ceil_div": lambda a, b: -(-a // b)}, dict(env))


want = {64: "unified_attention_ws_small", 72: "unified_attention_ws_small",
        80: "unified_attention_ws_small", 128: "unified_attention_ws",
        192: "unified_attention_ws_big", 256: "unified_attention_ws_big"}
bad = 0
for wl in cfg["workloads"]:
    env = dict(wl["axes"], block_size=16)
    env.update({k: v["default"] for k, v in b["parameters"].items()})
    row = []
    for l in b["launches"]:
        g = [ev(x, env) for x in l["grid"]]
        blocks = g[0] * g[1] * g[2]
        row.append((l["kernel"], g, [ev(x, env) for x in l["block"]], ev(l.get("shared_bytes", 0), env)))
    work = [r[0] for r in row if r[1] != [1, 1, 1]]
    d = wl["axes"]["head_size"]
    ok = work == [want[d]] or (len(work) == 0 and wl["axes"]["num_seqs"] * wl["axes"]["num_query_heads"] == 1)
    if d <= 80 and work == ["unified_attention_fa2"] and "unified_attention_fa2" in [r[0] for r in row]:
        ok = True  # the short d <= 80 rule of the shipped plan
    bad += not ok
    print(("   " if ok else "BAD"), wl["id"], "; ".join(f"{k[18:] or k} {g} {bl} {sb}" for k, g, bl, sb in row))
print("routing problems:", bad)
