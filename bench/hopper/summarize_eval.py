#!/usr/bin/env python3
"""Prints the baseline rows of a `kopt eval --json` file: workload, status,
max relative error, median time, TFLOP/s-free fraction of speed of light
(datasheet and, where the worker calibrated, attainable), weighted total.
    python3 bench/hopper/summarize_eval.py EVAL.json [ROLE]"""
import json, sys

d = json.load(open(sys.argv[1]))
role = sys.argv[2] if len(sys.argv) > 2 else "baseline"
print("device:", d.get("device", {}).get("name"), d.get("device", {}).get("driver", ""))
r = d.get("results", {}).get(role)
if not r:
    print("no", role, "results; keys:", list(d.get("results", {}).keys()), str(d)[:400]); sys.exit(1)
print(f"{role}: status {r['status']}, {r['workloads_ok']}/{r['workloads']} ok, weighted SOL {r['weighted_sol_fraction']:.4f}")
for w in r["rows"]:
    sol = w.get("sol_fraction")
    cal = w.get("sol_calibrated")
    cal_s = ""
    if isinstance(cal, dict) and cal.get("fraction") is not None:
        cal_s = f" attainable {cal['fraction']:.3f}"
    print(f"  {w['workload']:24s} {w['status']:6s} abs {w.get('max_abs_err', float('nan')):.2e} rel {w['max_rel_err']:.2e} median {w['median_ns'] / 1e3:10.1f} us "
          f"rsd {w['rsd']:.3f} n {w['samples']:3d} SOL {sol if sol is None else round(sol, 4)}{cal_s} {w.get('stop_reason', '')}")
