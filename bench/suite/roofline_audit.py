#!/usr/bin/env python3
"""Recomputes the speed-of-light fields of a `kopt eval --json` output with a config's CURRENT
roofline, so that evals measured before a roofline change (ROOFLINE_AUDIT.md) can be read and
composed with the corrected counts without a new GPU run.

  roofline_audit.py EVAL.json[.gz] CONFIG.json [-o OUT.json] [--role ROLE ...] [--gpus GPUS.json]

For every row with a median_ns of every result block (or only the --role blocks), flops and bytes
are evaluated here from the config (kopt's expression language; the default bytes rule when
`roofline.bytes` is absent: numel * dtype size of every input and output, in-place inputs twice),
and sol, sol_fraction, attainable_sol_fraction (max(T_sol, launch floor) / median) and
sol_calibrated are rewritten; the weighted fields are recomputed as merge_evals.py does. The
datasheet peaks come from configs/hardware/gpus.json (the eval's device.name); the calibrated peaks
are those the row's own sol_calibrated implies (old counts / old times), so only the counts change.
A row whose new fraction exceeds 1.02 (kopt's "impossible" rule) is reported on stderr; its status
is left as measured. Prints old -> new per row and the weighted figures.
"""
import argparse
import gzip
import json
import os
import re
import sys

DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1,
               "float8_e5m2": 1, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1,
               "bool": 1}


# ---- kopt's integer expression language (docs/operator-config.md, "Expressions") ----
_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z_0-9]*)|(//|[-+*/%(),]))")


def _tokens(s):
    pos, out = 0, []
    s = s.rstrip()
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if not m:
            raise ValueError(f"bad expression {s!r} at column {pos + 1}")
        out.append(m.group(1) and ("num", int(m.group(1))) or m.group(2) and ("name", m.group(2))
                   or ("op", m.group(3)))
        pos = m.end()
    return out


def _cdiv(a, b):  # C++ truncation toward zero
    if b == 0:
        raise ZeroDivisionError("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _cmod(a, b):
    return a - _cdiv(a, b) * b


def evaluate(expr, names):
    """64-bit integer evaluation as kopt does (an overflow is an error, never a wrapped value)."""
    toks = _tokens(str(expr))
    i = 0

    def peek():
        return toks[i] if i < len(toks) else (None, None)

    def take(kind=None, val=None):
        nonlocal i
        t = peek()
        if (kind and t[0] != kind) or (val and t[1] != val):
            raise ValueError(f"{expr!r}: expected {val or kind}, got {t[1]!r}")
        i += 1
        return t

    def check(v):
        if not -(1 << 63) <= v < (1 << 63):
            raise OverflowError(f"{expr!r}: int64 overflow")
        return v

    def primary():
        t = peek()
        if t == ("op", "("):
            take()
            v = add()
            take("op", ")")
            return v
        if t == ("op", "-"):
            take()
            return check(-primary())
        if t[0] == "num":
            take()
            return t[1]
        if t[0] == "name":
            take()
            if peek() == ("op", "("):
                take()
                args = [add()]
                while peek() == ("op", ","):
                    take()
                    args.append(add())
                take("op", ")")
                if t[1] == "ceil_div":
                    a, b = args
                    if b <= 0:
                        raise ValueError("ceil_div by a non-positive divisor")
                    return -((-a) // b)
                if t[1] == "min" and len(args) >= 2:
                    return min(args)
                if t[1] == "max" and len(args) >= 2:
                    return max(args)
                raise ValueError(f"unknown function {t[1]}")
            if t[1] not in names:
                raise KeyError(f"{expr!r}: unknown name {t[1]}")
            return names[t[1]]
        raise ValueError(f"{expr!r}: unexpected {t[1]!r}")

    def mul():
        v = primary()
        while peek()[0] == "op" and peek()[1] in ("*", "/", "//", "%"):
            op = take()[1]
            r = primary()
            if op == "*":
                v = check(v * r)
            elif op == "/":
                v = _cdiv(v, r)
            elif op == "//":
                if r == 0:
                    raise ZeroDivisionError("division by zero")
                v = v // r
            else:
                v = _cmod(v, r)
        return v

    def add():
        v = mul()
        while peek()[0] == "op" and peek()[1] in ("+", "-"):
            op = take()[1]
            r = mul()
            v = check(v + r if op == "+" else v - r)
        return v

    v = add()
    if i != len(toks):
        raise ValueError(f"{expr!r}: trailing {toks[i][1]!r}")
    return v


# ---- the config's roofline for one workload ----
def workload_names(cfg, wl_axes):
    names = {}
    for name, ax in cfg.get("axes", {}).items():
        if ax.get("type") == "const":
            names[name] = int(ax["value"])
    names.update({k: int(v) for k, v in wl_axes.items()})
    # expr axes may depend on each other: resolve until stable
    pending = {n: a["expression"] for n, a in cfg.get("axes", {}).items() if a.get("type") == "expr"}
    while pending:
        done = [n for n, e in pending.items() if _try(e, names) is not None]
        if not done:
            raise ValueError(f"cannot resolve expr axes {sorted(pending)}")
        for n in done:
            names[n] = evaluate(pending.pop(n), names)
    return names


def _try(e, names):
    try:
        return evaluate(e, names)
    except KeyError:
        return None


def _tensors(section):
    if isinstance(section, dict):
        return list(section.items())
    return [(t.get("name"), t) for t in section or []]


def default_bytes(cfg, names):
    total = 0
    for _, t in _tensors(cfg.get("inputs")):
        numel = 1
        for d in t["shape"]:
            numel *= d if isinstance(d, int) else evaluate(d, names)
        b = numel * DTYPE_BYTES[t["dtype"]]
        total += 2 * b if t.get("in_place") else b
    for _, t in _tensors(cfg.get("outputs")):
        numel = 1
        for d in t["shape"]:
            numel *= d if isinstance(d, int) else evaluate(d, names)
        total += numel * DTYPE_BYTES[t["dtype"]]
    return total


def roofline(cfg, wl_axes):
    names = workload_names(cfg, wl_axes)
    roof = cfg.get("roofline", {})
    flops = evaluate(roof.get("flops", "0"), names)
    b = roof.get("bytes")
    nbytes = evaluate(b, names) if b is not None else default_bytes(cfg, names)
    return float(flops), float(nbytes), roof.get("flop_unit", "fp32")


def sol(flops, nbytes, unit, bw, peaks, median_ns):
    t_mem = nbytes / bw * 1e9 if bw > 0 else 0.0
    p = peaks.get(unit, 0.0)
    t_cmp = flops / p * 1e9 if p > 0 else 0.0
    t = max(t_mem, t_cmp)
    frac = t / median_ns if median_ns > 0 else 0.0
    return {"t_sol_ns": t, "t_compute_ns": t_cmp, "t_memory_ns": t_mem,
            "bound": "compute" if t_cmp > t_mem else "memory", "fraction": frac,
            "impossible": frac > 1.02}


def weighted(rows, key):  # as merge_evals.py / kopt eval
    total = sum(r["weight"] for r in rows)
    if total <= 0:
        return None
    return sum(r["weight"] * (r.get(key) or 0.0) for r in rows if r.get("status") == "ok") / total


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def datasheet_peaks(gpus_path, device_name):
    g = load(gpus_path)["gpus"]
    for key, e in g.items():
        if any(m in device_name for m in e.get("match", [])):
            return e["dram_bytes_per_s"], e["flops_per_s"]
    sys.exit(f"{gpus_path}: no entry matches {device_name!r}")


def audit(ev, cfg, roles, bw, peaks, log=print):
    wls = {w["id"]: w for w in cfg["workloads"]}
    out = {}
    for role, block in ev.get("results", {}).items():
        if roles and role not in roles:
            continue
        old_w = block.get("weighted_sol_fraction")
        for r in block.get("rows", []):
            w = wls.get(r["workload"])
            med = r.get("median_ns") or 0.0
            if w is None:
                log(f"  {role} {r['workload']}: not a workload of {cfg.get('name')}; left as is")
                continue
            if med <= 0 or r.get("sol") is None:
                continue
            flops, nbytes, unit = roofline(cfg, w["axes"])
            old_sol = r["sol"]
            s = sol(flops, nbytes, unit, bw, peaks, med)
            s["flops"], s["bytes"] = flops, nbytes
            floor = r.get("launch_floor_ns") or 0.0
            if floor > 0:
                s["launch_floor_ns"] = floor
                s["attainable_fraction"] = max(floor, s["t_sol_ns"]) / med
                r["attainable_sol_fraction"] = s["attainable_fraction"]
            cal = r.get("sol_calibrated")
            if cal and old_sol.get("bytes") and cal.get("t_memory_ns"):
                # the calibrated peaks this row was computed with: old counts over old times
                cbw = old_sol["bytes"] / cal["t_memory_ns"] * 1e9
                cpk = dict(peaks)
                if old_sol.get("flops") and cal.get("t_compute_ns"):
                    cpk[unit] = old_sol["flops"] / cal["t_compute_ns"] * 1e9
                r["sol_calibrated"] = sol(flops, nbytes, unit, cbw, cpk, med)
            old = r.get("sol_fraction")
            r["sol"] = s
            r["sol_fraction"] = s["fraction"]
            if isinstance(r.get("diagnosis"), dict) and isinstance(r["diagnosis"].get("derived"), dict):
                r["diagnosis"]["derived"]["sol_fraction"] = s["fraction"]
                r["diagnosis"]["derived"]["roofline_bytes_per_s"] = nbytes / med * 1e9
                if nbytes > 0:
                    r["diagnosis"]["derived"]["arithmetic_intensity"] = flops / nbytes
            if s["impossible"]:
                print(f"warning: {role} {r['workload']}: {100 * s['fraction']:.1f} % of the new "
                      "speed of light (> 102 %)", file=sys.stderr)
            log(f"  {role} {r['workload']}: bytes {old_sol.get('bytes', 0):.0f} -> {nbytes:.0f}, "
                f"T_sol {old_sol.get('t_sol_ns', 0) / 1e3:.3f} -> {s['t_sol_ns'] / 1e3:.3f} us, "
                f"SOL {100 * (old or 0):.2f} -> {100 * s['fraction']:.2f} %")
        rows = block.get("rows", [])
        block["weighted_sol_fraction"] = weighted(rows, "sol_fraction")
        block["weighted_attainable_sol_fraction"] = weighted(
            [dict(x, attainable_sol_fraction=x.get("attainable_sol_fraction", x.get("sol_fraction")))
             for x in rows], "attainable_sol_fraction")
        out[role] = (old_w, block["weighted_sol_fraction"])
        log(f"{role}: weighted SOL {100 * (old_w or 0):.3f} -> "
            f"{100 * (block['weighted_sol_fraction'] or 0):.3f} %")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("eval")
    ap.add_argument("config")
    ap.add_argument("-o", "--out")
    ap.add_argument("--role", action="append", default=[])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--gpus", default=os.path.join(here, "..", "..", "configs", "hardware", "gpus.json"))
    a = ap.parse_args()
    ev, cfg = load(a.eval), load(a.config)
    dev = ev.get("device") if isinstance(ev.get("device"), dict) else {}
    name = dev.get("name") or (ev["gpu"].get("name", "") if isinstance(ev.get("gpu"), dict) else "")
    bw, peaks = datasheet_peaks(a.gpus, name)
    audit(ev, cfg, a.role, bw, peaks)
    ev["roofline_audit"] = {"config": a.config, "from": a.eval}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(ev, f, indent=1)


if __name__ == "__main__":
    main()
