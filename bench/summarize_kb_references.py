#!/usr/bin/env python3
"""Summarizes bench/run_kb_references.sh: one row per reference kernel.

  summarize_kb_references.py OUT_DIR [--detail] [--json] [--apply]

Columns: id; weighted fraction of speed of light of the optimized kernel (the
config's baseline) and of the naive reference; the optimized kernel's fraction
on its largest workload (by roofline bytes, then flops); its weighted
geometric-mean speed-up over the reference; whether every workload of both was
correct. --detail adds a line per workload; --json prints the rows as JSON;
--apply writes the measured figures (with the date of the run) into the
'Measured on H200: PENDING' line of each kernel and the '## Measured' section
of each document. Needs only python3.
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFS = os.path.join(ROOT, "knowledge_base", "references")


def pct(v):
    return "-" if v is None else f"{100 * v:.1f}%"


def largest_row(rows):
    def size(r):
        sol = r.get("sol") or {}
        return (sol.get("bytes") or 0, sol.get("flops") or 0)
    return max(rows, key=size) if rows else None


def load(out_dir, path):
    ident = os.path.splitext(os.path.basename(path))[0]
    row = {"id": ident, "error": None}
    try:
        j = json.load(open(path))
    except Exception as e:  # report and go on
        row["error"] = f"unreadable: {e}"
        return row
    if not j.get("gpu"):
        row["error"] = j.get("needs_gpu", "no GPU results")
        return row
    res = j.get("results", {})
    base, ref = res.get("baseline"), res.get("reference")
    if base is None:
        row["error"] = "no baseline result"
        return row
    row["device"] = j.get("device", {}).get("name", "")
    row["sol"] = base.get("weighted_sol_fraction")
    row["ref_sol"] = ref.get("weighted_sol_fraction") if ref else None
    row["speedup"] = base.get("weighted_speedup_vs_reference")
    big = largest_row(base.get("rows", []))
    row["largest"] = big["workload"] if big else None
    row["largest_sol"] = big.get("sol_fraction") if big else None
    row["correct"] = base.get("status") == "ok" and (ref is None or ref.get("status") == "ok")
    row["status"] = base.get("status")
    row["rows"] = base.get("rows", [])
    rcf = os.path.join(out_dir, ident + ".rc")
    row["rc"] = open(rcf).read().strip() if os.path.exists(rcf) else None
    return row


def apply(row, date):
    """Writes the figures into the kernel header and the document."""
    ident = row["id"]
    text = (f"Measured on H200 ({date}): {pct(row['sol'])} of speed of light weighted over the "
            f"config's workloads, {pct(row['largest_sol'])} on {row['largest']}; "
            f"{row['speedup']:.1f}x the naive reference" if row.get("speedup") else
            f"Measured on H200 ({date}): {pct(row['sol'])} of speed of light weighted, "
            f"{pct(row['largest_sol'])} on {row['largest']}")
    changed = []
    for cu in glob.glob(os.path.join(REFS, ident, "*.cu")):
        if cu.endswith("_reference.cu"):
            continue
        s = open(cu).read()
        n = re.sub(r"// Measured on H200: PENDING \(lead measures\)", "// " + text + ".", s)
        if n != s:
            open(cu, "w").write(n)
            changed.append(cu)
    md = os.path.join(REFS, ident + ".md")
    if os.path.exists(md):
        s = open(md).read()
        body = (f"{text} (`bench/run_kb_references.sh`, `kopt eval --time-reference`).\n")
        # The section's PENDING paragraph (up to a blank line, a heading or the end).
        n = re.sub(r"(## Measured\n\s*)PENDING[^\n]*(?:\n(?!#)[^\n]+)*\n?", lambda m: m.group(1) + body, s)
        if n != s:
            open(md, "w").write(n)
            changed.append(md)
    return changed


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = args[0]
    files = sorted(glob.glob(os.path.join(out_dir, "*.json")))
    rows = [load(out_dir, f) for f in files]
    if "--json" in argv:
        print(json.dumps([{k: v for k, v in r.items() if k != "rows"} for r in rows], indent=2))
        return 0
    gpu = os.path.join(out_dir, "gpu.txt")
    if os.path.exists(gpu):
        print(open(gpu).read().strip())
    date = open(os.path.join(out_dir, "date.txt")).read().strip() if os.path.exists(
        os.path.join(out_dir, "date.txt")) else "unknown date"
    print(f"run of {date}\n")
    head = f"{'id':<30} {'SOL':>7} {'ref SOL':>8} {'SOL@largest':>12} {'speedup':>9}  correct"
    print(head)
    print("-" * len(head))
    for r in rows:
        if r["error"]:
            print(f"{r['id']:<30} {'':>7} {'':>8} {'':>12} {'':>9}  - ({r['error'][:60]})")
            continue
        sp = "-" if r["speedup"] is None else f"{r['speedup']:.1f}x"
        ok = "yes" if r["correct"] else f"NO ({r['status']})"
        print(f"{r['id']:<30} {pct(r['sol']):>7} {pct(r['ref_sol']):>8} {pct(r['largest_sol']):>12} {sp:>9}  {ok}")
        if "--detail" in argv:
            for w in r["rows"]:
                print(f"    {w['workload']:<26} {w['status']:<18} {pct(w.get('sol_fraction')):>7} "
                      f"{w.get('median_ns', 0) / 1e3:10.2f} us")
    if "--apply" in argv:
        for r in rows:
            if r["error"] or not r["correct"]:
                continue
            for f in apply(r, date):
                print(f"wrote {os.path.relpath(f, ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
