#!/usr/bin/env python3
"""Markdown table of two kopt eval --json files (the main baseline and the candidate) per workload.
    python3 bench/hopper/fmoe/compare.py BASE.json CAND.json"""
import json, sys

def rows(path, role):
    try:
        r = json.load(open(path))["results"][role]
    except Exception as ex:
        return None, {}
    return r, {w["workload"]: w for w in r["rows"]}

b, B = rows(sys.argv[1], "baseline")
c, C = rows(sys.argv[2], "candidate")
print("| workload | before | SOL | after | SOL | status | max abs err |")
print("|---|---:|---:|---:|---:|---|---:|")
for k in (C or B):
    x, y = B.get(k), C.get(k)
    f = lambda w: (f"{w['median_ns'] / 1e3:.1f} us", f"{100 * (w.get('sol_fraction') or 0):.1f} %") if w else ("-", "-")
    print(f"| {k} | {f(x)[0]} | {f(x)[1]} | {f(y)[0]} | {f(y)[1]} | {y['status'] if y else '-'} | {y.get('max_abs_err', 0):.1e} |" if y else f"| {k} | {f(x)[0]} | {f(x)[1]} | - | - | - | - |")
for n, r in (("before", b), ("after", c)):
    if r:
        print(f"{n}: {r['workloads_ok']}/{r['workloads']} ok, weighted SOL {100 * r['weighted_sol_fraction']:.1f} %")
