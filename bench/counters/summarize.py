#!/usr/bin/env python3
"""Prints the counters cross-check table (kopt vs Nsight Compute) from the
outputs of bench/run_counters_xcheck.sh. Usage: summarize.py OUT_DIR"""
import csv
import io
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
kernels = {"copy": "copy4", "fma": "fma_loop", "oneblock": "one_block"}

def ncu_values():
    text = (out / "ncu.csv").read_text()
    start = text.find('"ID"')
    vals = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        name = row["Kernel Name"].split("(")[0]
        v = row["Metric Value"].replace(",", "")
        try:
            val = float(v)
        except ValueError:
            continue
        unit = row.get("Metric Unit", "")
        scale = {"Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9,
                 "usecond": 1e3, "msecond": 1e6, "second": 1e9, "nsecond": 1.0,
                 "Kcycle": 1e3, "Mcycle": 1e6}.get(unit, 1.0)
        vals.setdefault(name, {})[row["Metric Name"]] = val * scale
    return vals

ncu = ncu_values()
print("| kernel | metric | kopt | Nsight Compute | difference |")
print("|---|---|---|---|---|")
costs = []
worst = 0.0
for cand, kname in kernels.items():
    d = json.loads((out / f"kopt_{cand}.json").read_text())
    row = d["results"]["candidate"]["rows"][0]
    c = row["counters"]
    costs.append((cand, "default", c["passes"], c["wall_ms"]))
    try:
        f = json.loads((out / f"kopt_full_{cand}.json").read_text())["results"]["candidate"]["rows"][0]["counters"]
        costs.append((cand, "full", f["passes"], f["wall_ms"]))
    except Exception as e:  # noqa: BLE001
        costs.append((cand, f"full failed: {e}", 0, 0))
    for m, v in sorted(c["metrics"].items()):
        n = ncu.get(kname, {}).get(m)
        if n is None:
            continue
        if abs(n) < 1e-9 and abs(v) < 1e-9:
            diff = "0"
        elif abs(n) < 1e-9:
            diff = "n/a (ncu 0)"
        else:
            rel = (v - n) / n
            if m.endswith(".sum") and ("bytes" in m or "inst" in m) and abs(n) > 1e6:
                worst = max(worst, abs(rel))
            diff = f"{100 * rel:+.2f} %"
        print(f"| {kname} | {m} | {v:.6g} | {n:.6g} | {diff} |")
    print(f"| {kname} | diagnosis | {row['diagnosis']['primary']} | | |")
print()
print(f"largest difference on byte and instruction counts above 1e6: {100 * worst:.2f} %")
print()
print("| kernel | tier | passes | counters pass wall time (ms) |")
print("|---|---|---|---|")
for cand, tier, passes, ms in costs:
    print(f"| {kernels[cand]} | {tier} | {passes} | {ms:.1f} |")
