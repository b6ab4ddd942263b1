#!/usr/bin/env python3
"""Suite table (docs/benchmarks.md) from `kopt bench --ops OP --json` outputs,
one JSON file per operator in DIR.

    summarize_bench.py DIR [CONFIG_DIR] [--eval DIR2] [--fallback OPS_JSON] [--ops-json OUT]

--eval DIR2: `kopt eval --json` outputs named OP.json (a config measured with eval, not
  bench: its baseline row counts, the reference SOL comes from the fallback if any).
--eval-file OP=PATH[:ROLE]: like --eval for one config, from any `kopt eval --json` file; ROLE
  (default baseline) names its result block, e.g. `candidate` for a candidate that was then
  installed as the config's baseline unchanged. Repeatable; wins over --eval and over DIR/OP.json;
  an unknown OP, a missing file or a malformed spec is an error.
--fallback OPS_JSON: an earlier run's per-config figures (the --ops-json of that run) for the
  configs that DIR does not have; such rows say "earlier run" in their status.
--ops-json OUT: write this table's per-config figures as JSON (the next run's fallback)."""
import argparse
import json
import os
import sys
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("suite", nargs="?", default="configs/bench")
ap.add_argument("--eval", dest="eval_dir")
ap.add_argument("--eval-file", action="append", default=[])
ap.add_argument("--fallback")
ap.add_argument("--ops-json")
args = ap.parse_args()
out = Path(args.out)
suite = Path(args.suite)
fallback = json.loads(Path(args.fallback).read_text()) if args.fallback else {}


eval_files = {}
for spec in args.eval_file:
    # A typo here would silently change the composed suite figure: refuse it.
    op_, eq, rest = spec.partition("=")
    path_, role_ = rest, "baseline"
    if ":" in rest and rest.rsplit(":", 1)[1] in ("baseline", "candidate", "seed"):
        path_, role_ = rest.rsplit(":", 1)  # a path may itself contain ':'; only a known role splits
    if not eq or not op_ or not path_:
        sys.exit(f"--eval-file {spec!r}: expected OP=PATH[:ROLE]")
    if not (suite / f"{op_}.json").exists():
        sys.exit(f"--eval-file {spec!r}: no config {op_}.json in {suite}")
    if not Path(path_).is_file():
        sys.exit(f"--eval-file {spec!r}: {path_} is not a file")
    eval_files[op_] = (Path(path_), role_)


def from_eval(path, entry, role="baseline"):
    """A `kopt eval --json` file: the role's weighted figures; None when unusable."""
    d = json.loads(path.read_text())
    b = d["results"][role]
    rows_ = b["rows"]
    att = [r.get("attainable_sol_fraction") for r in rows_]
    weights = {w["id"]: w["weight"] for w in entry["_workloads"]}
    wsum = sum(weights.values())
    att_w = (sum(weights.get(r["workload"], 0) * (r.get("attainable_sol_fraction") or 0) for r in rows_) / wsum
             if all(a is not None for a in att) and len(rows_) == len(weights) else None)
    return {"base": b.get("weighted_sol_fraction"), "base_att": att_w,
            "failed": [(r["workload"], r["status"]) for r in rows_ if r["status"] != "ok"],
            "complete": len(rows_) == len(weights), "status": b.get("status")}


rows = []
for cfg in sorted(suite.glob("*.json")):
    name = cfg.stem
    c = json.loads(cfg.read_text())
    f = out / f"{name}.json"
    entry = {"name": name, "shapes": len(c["workloads"]), "weight": sum(w["weight"] for w in c["workloads"]),
             "has_baseline": "baseline" in c, "_workloads": c["workloads"]}
    ev = Path(args.eval_dir) / f"{name}.json" if args.eval_dir else None
    role = "baseline"
    if name in eval_files:
        ev, role = eval_files[name]
    if (name in eval_files or not f.exists()) and ev is not None and ev.exists():
        try:
            e = from_eval(ev, entry, role)
            fb = fallback.get(name, {})
            if not e["complete"]:
                raise ValueError("eval covers only some workloads")
            entry.update(ok=True, ref=fb.get("reference_sol"), ref_att=fb.get("reference_attainable"),
                         base=e["base"], base_att=e["base_att"], speedup=None, launch=0, worst=None,
                         status=(e["status"] or "?") + f" (kopt eval {ev.name}" + ("" if role == "baseline" else f", {role}") + "; reference SOL from the earlier run)",
                         failed=e["failed"])
        except Exception as ex:  # noqa: BLE001
            entry.update(ok=False, why=f"eval file unusable ({type(ex).__name__}: {ex})")
        rows.append(entry)
        continue
    if not f.exists() and name in fallback and fallback[name].get("status") == "ok":
        fb = fallback[name]
        entry.update(ok=True, ref=fb.get("reference_sol"), ref_att=fb.get("reference_attainable"),
                     base=fb.get("baseline_sol"), base_att=fb.get("baseline_attainable"),
                     speedup=fb.get("speedup"), launch=fb.get("launch", 0), worst=None,
                     status="ok (earlier run)", failed=fb.get("failed", []))
        rows.append(entry)
        continue
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
if args.ops_json:
    Path(args.ops_json).write_text(json.dumps({
        r["name"]: ({"status": "ok" if not r["failed"] else "failed", "reference_sol": r["ref"],
                     "reference_attainable": r.get("ref_att"), "baseline_sol": r["base"],
                     "baseline_attainable": r.get("base_att"), "speedup": r["speedup"], "launch": r["launch"],
                     "failed": r["failed"], "source": r["status"]} if r["ok"] else {"status": r["why"]})
        for r in rows}, indent=1))
print(f"suite SOL over all {len(rows)} configs (baseline, else reference; unmeasured = 0), weight {wt:.4f}: "
      f"physical {pct(sp / wt if wt else None)}, attainable {pct(sa / wt if wt else None)}")
