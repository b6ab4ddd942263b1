#!/usr/bin/env python3
"""Suite table (docs/benchmarks.md) from `kopt bench --ops OP --json` outputs,
one JSON file per operator in DIR. Usage: summarize_bench.py DIR [CONFIG_DIR]"""
import json
import os
import sys
from pathlib import Path

out = Path(sys.argv[1])
suite = Path(sys.argv[2] if len(sys.argv) > 2 else "configs/bench")
rows = []
for cfg in sorted(suite.glob("*.json")):
    name = cfg.stem
    c = json.loads(cfg.read_text())
    f = out / f"{name}.json"
    entry = {"name": name, "shapes": len(c["workloads"]), "weight": sum(w["weight"] for w in c["workloads"]),
             "has_baseline": "baseline" in c}
    try:
        d = json.loads(f.read_text())
        op = d["operators"][0]
        base = op.get("baseline") or {}
        entry.update(ok=True, ref=op["reference"].get("weighted_sol_fraction"),
                     base=base.get("weighted_sol_fraction") if base else None,
                     ref_att=op["reference"].get("weighted_attainable_sol_fraction"),
                     base_att=base.get("weighted_attainable_sol_fraction") if base else None,
                     speedup=op.get("speedup_baseline_vs_reference"), launch=len(op.get("launch_bound", [])),
                     worst=op.get("worst"), status=op.get("status"),
                     failed=[(w["workload"], w["status"]) for role in ("reference", "baseline") if op.get(role)
                             for w in op[role].get("workloads", []) if w["status"] != "ok"])
    except Exception as e:  # noqa: BLE001 - a missing or partial file is a row without numbers
        entry.update(ok=False, why=f"not measured ({type(e).__name__})")
    rows.append(entry)

def pct(v):
    return "-" if v is None else f"{100 * v:.1f} %"

print("| config | shapes | weight | reference SOL | baseline SOL | baseline attainable | speed-up | launch-bound | worst shape (baseline) | status |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
tw = tb = twb = 0.0
for r in rows:
    if not r["ok"]:
        print(f"| {r['name']} | {r['shapes']} | {r['weight']:.6f} | | | | | | | {r['why']} |")
        continue
    worst = r["worst"] or {}
    w = f"{worst.get('workload', '')} ({pct(worst.get('sol_fraction'))})" if worst else ""
    st = r["status"] + ("" if not r["failed"] else "; " + ", ".join(f"{a}: {b}" for a, b in r["failed"][:3]))
    sp = "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"
    print(f"| {r['name']} | {r['shapes']} | {r['weight']:.6f} | {pct(r['ref'])} | {pct(r['base'])} | {pct(r.get('base_att'))} | {sp} | {r['launch']} | {w} | {st} |")
    if r["base"] is not None:
        tb += r["weight"] * r["base"]
        twb += r["weight"]
print()
print(f"baseline SOL, weighted over the {sum(1 for r in rows if r['ok'] and r['base'] is not None)} measured configs "
      f"with a baseline: {pct(tb / twb if twb else None)} (their weight {twb:.4f})")

# Suite-wide figure (issue 23's rule): every operator counts with its best
# measured kernel, the baseline where it has one, else its naive reference;
# an operator not measured counts zero. Physical and attainable.
sp = sa = wt = 0.0
for r in rows:
    wt += r["weight"]
    if not r["ok"]:
        continue
    phys = r["base"] if r["base"] is not None else r["ref"]
    att = r.get("base_att") if r["base"] is not None else r.get("ref_att")
    sp += r["weight"] * (phys or 0.0)
    sa += r["weight"] * (att or 0.0)
print(f"suite SOL over all {len(rows)} configs (baseline, else reference; unmeasured = 0), weight {wt:.4f}: "
      f"physical {pct(sp / wt if wt else None)}, attainable {pct(sa / wt if wt else None)}")
