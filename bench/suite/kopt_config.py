"""A small reader of kopt operator configs for the suite's Python tools
(roofline check, validation driver): integer expressions with kopt's
semantics (docs/operator-config.md "Expressions"), tensor shapes, element
sizes and the default bytes rule. Standard library only.

The C++ loader (kopt::config) stays the authority: these tools read only
configs that `kopt validate` accepts.
"""
import json
import os
import re

DTYPE_SIZE = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
}

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(.))")


class ExprError(ValueError):
    pass


def _cdiv(a, b):
    if b == 0:
        raise ExprError("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _cmod(a, b):
    if b == 0:
        raise ExprError("modulo by zero")
    return a - _cdiv(a, b) * b


def evaluate(expr, names):
    """Evaluates an integer expression (an int or a string) over names."""
    if isinstance(expr, bool):
        raise ExprError("not an expression: %r" % expr)
    if isinstance(expr, int):
        return expr
    toks = []
    for m in _TOKEN.finditer(expr):
        if m.group(1):
            toks.append(("num", int(m.group(1))))
        elif m.group(2):
            toks.append(("name", m.group(2)))
        elif m.group(3) and not m.group(3).isspace():
            toks.append(("op", m.group(3)))
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else ("end", None)

    def take():
        t = peek()
        pos[0] += 1
        return t

    def expect(v):
        t = take()
        if t != ("op", v):
            raise ExprError("expected %r in %r" % (v, expr))

    def primary():
        kind, v = take()
        if kind == "num":
            return v
        if kind == "op" and v == "-":
            return -primary()
        if kind == "op" and v == "(":
            r = add()
            expect(")")
            return r
        if kind == "name":
            if v in ("ceil_div", "min", "max"):
                expect("(")
                args = [add()]
                while peek() == ("op", ","):
                    take()
                    args.append(add())
                expect(")")
                if v == "ceil_div":
                    if len(args) != 2 or args[1] <= 0:
                        raise ExprError("bad ceil_div in %r" % expr)
                    return -((-args[0]) // args[1]) if args[0] >= 0 else _cdiv(args[0], args[1])
                return min(args) if v == "min" else max(args)
            if v not in names:
                raise ExprError("unknown name %r in %r" % (v, expr))
            return names[v]
        raise ExprError("unexpected %r in %r" % (v, expr))

    def mul():
        r = primary()
        while peek()[0] == "op" and peek()[1] in "*/%":
            op = take()[1]
            b = primary()
            r = r * b if op == "*" else _cdiv(r, b) if op == "/" else _cmod(r, b)
        return r

    def add():
        r = mul()
        while peek()[0] == "op" and peek()[1] in "+-":
            op = take()[1]
            b = mul()
            r = r + b if op == "+" else r - b
        return r

    r = add()
    if peek()[0] != "end":
        raise ExprError("trailing input in %r" % expr)
    return r


def load(path):
    with open(path) as f:
        cfg = json.load(f)
    cfg["_path"] = os.path.abspath(path)
    return cfg


def workload_axes(cfg, wl):
    axes = {n: a["value"] for n, a in cfg["axes"].items() if a["type"] == "const"}
    axes.update(wl["axes"])
    return axes


def workload_scalars(cfg, wl):
    s = {n: v["value"] for n, v in cfg.get("scalars", {}).items()}
    s.update(wl.get("scalars", {}))
    return s


def shape(tensor, axes):
    return [evaluate(d, axes) for d in tensor["shape"]]


def numel(tensor, axes):
    n = 1
    for d in shape(tensor, axes):
        n *= d
    return n


def nbytes(tensor, axes):
    return numel(tensor, axes) * DTYPE_SIZE[tensor["dtype"]]


def roofline(cfg, axes):
    """(flops, bytes) per kopt's rules: bytes defaults to every input read
    once (in-place inputs twice) and every output written once."""
    r = cfg.get("roofline", {})
    flops = evaluate(r.get("flops", "0"), axes)
    if "bytes" in r:
        return flops, evaluate(r["bytes"], axes)
    total = 0
    for t in cfg["inputs"].values():
        total += nbytes(t, axes) * (2 if t.get("in_place") else 1)
    for t in cfg["outputs"].values():
        total += nbytes(t, axes)
    return flops, total


def candidate_source(cfg, cand):
    if "source" in cand:
        return cand["source"]
    p = cand["source_file"]
    if not os.path.isabs(p):
        p = os.path.join(os.path.dirname(cfg["_path"]), p)
    with open(p) as f:
        return f.read()
