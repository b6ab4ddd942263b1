#!/usr/bin/env python3
"""Validates the reference kernels of kopt's benchmark suite against
independent PyTorch implementations, on every workload, with the same inputs.

See bench/validate/README.md for the design and the per-operator module
interface (bench/validate/ops_<op>.py: torch_impl(inputs, axes, scalars)).

  validate_suite.py [--suite configs/bench] [--ops a,b] [--max-shapes N]
                    [--seed S] [--json FILE] [--dry-run] [--arch sm_90a]

--dry-run needs neither torch nor a GPU: it parses every config, evaluates
every shape and launch plan, reads the reference sources and imports no
module but checks that ops_<op>.py exists and defines torch_impl.

Exit codes: 0 all passed; 1 a comparison failed; 2 bad arguments or a
config/module problem; 3 an operator could not be run (compile or launch
error, or torch / a GPU missing without --dry-run).
"""
import argparse
import ctypes
import ctypes.util
import glob
import importlib.util
import json
import math
import os
import re
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench", "suite"))
import kopt_config as kc  # noqa: E402

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_RUN = 0, 1, 2, 3


# ----------------------------------------------------------------- modules
def module_path(stem):
    """ops_<stem>.py, else the operator's module for a per-dtype split
    config (fused_qkv_rope_fp16 -> ops_fused_qkv_rope.py)."""
    name = stem
    while True:
        p = os.path.join(HERE, "ops_%s.py" % name)
        if os.path.exists(p):
            return p
        if "_" not in name:
            return None
        name = name.rsplit("_", 1)[0]


def load_module(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def defines_torch_impl(path):
    with open(path) as f:
        return re.search(r"^def torch_impl\(", f.read(), re.M) is not None


# ------------------------------------------------------- NVRTC and driver
class Cuda:
    """NVRTC + CUDA driver API through ctypes: compile a reference source,
    launch its kernels on torch's current stream with torch's tensors."""

    def __init__(self, torch, arch):
        self.torch = torch
        self.arch = arch
        self.nvrtc = self._load_nvrtc()
        self.cu = ctypes.CDLL("libcuda.so.1")
        torch.cuda.init()
        torch.empty(1, device="cuda")  # makes torch's primary context current on this thread
        ctx = ctypes.c_void_p()
        self._check(self.cu.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            dev = ctypes.c_int()
            self._check(self.cu.cuDeviceGet(ctypes.byref(dev), torch.cuda.current_device()), "cuDeviceGet")
            self._check(self.cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
            self._check(self.cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        self.include = self._include_dirs()
        self.modules = {}

    @staticmethod
    def _load_nvrtc():
        cands = []
        try:
            import torch
            cands += glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libnvrtc*.so*"))
            site = os.path.dirname(os.path.dirname(torch.__file__))
            cands += glob.glob(os.path.join(site, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*"))
            cands += glob.glob(os.path.join(site, "nvidia", "cu*", "lib", "libnvrtc.so*"))
        except ImportError:
            pass
        for root in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
            if root:
                cands += glob.glob(os.path.join(root, "lib64", "libnvrtc.so*"))
        lib = ctypes.util.find_library("nvrtc")
        if lib:
            cands.append(lib)
        cands = [c for c in cands if "builtins" not in os.path.basename(c)]
        for c in cands:
            try:
                return ctypes.CDLL(c)
            except OSError:
                continue
        raise RuntimeError("libnvrtc not found (looked in torch's lib, nvidia wheels, $CUDA_HOME, /usr/local/cuda)")

    def _include_dirs(self):
        # NVRTC needs the CUDA headers the references include (cuda_bf16.h,
        # cuda_fp8.h, ...): $KOPT_CUDA_INCLUDE, $CUDA_HOME, /usr/local/cuda, or
        # the include folders of the nvidia-* wheels torch depends on.
        dirs = [d for d in os.environ.get("KOPT_CUDA_INCLUDE", "").split(":") if d]
        dirs += [os.path.join(d, "cccl") for d in dirs]
        for root in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
            if root and os.path.exists(os.path.join(root, "include", "cuda_fp16.h")):
                dirs += [os.path.join(root, "include"), os.path.join(root, "include", "cccl")]
        site = os.path.dirname(os.path.dirname(self.torch.__file__))
        for inc in glob.glob(os.path.join(site, "nvidia", "*", "include")):
            dirs.append(inc)
        return [d for d in dirs if os.path.isdir(d)]

    def _check(self, rc, what):
        if rc != 0:
            s = ctypes.c_char_p()
            self.cu.cuGetErrorString(rc, ctypes.byref(s))
            raise RuntimeError("%s failed: %s (%d)" % (what, s.value.decode() if s.value else "?", rc))

    def compile(self, source, defines, options):
        key = (source, tuple(sorted(defines.items())), tuple(options))
        if key in self.modules:
            return self.modules[key]
        prog = ctypes.c_void_p()
        rc = self.nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"reference.cu", 0, None, None)
        if rc:
            raise RuntimeError("nvrtcCreateProgram failed (%d)" % rc)
        opts = ["--gpu-architecture=" + self.arch, "-default-device"]
        opts += ["-I" + d for d in self.include]
        opts += ["-D%s=%d" % kv for kv in defines.items()]
        opts += list(options)
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = self.nvrtc.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        self.nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        self.nvrtc.nvrtcGetProgramLog(prog, log)
        if rc:
            raise RuntimeError("NVRTC compile failed:\n" + log.value.decode(errors="replace"))
        self.nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        self.nvrtc.nvrtcGetCUBIN(prog, cubin)
        self.nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
        mod = ctypes.c_void_p()
        self._check(self.cu.cuModuleLoadData(ctypes.byref(mod), cubin), "cuModuleLoadData")
        self.modules[key] = mod
        return mod

    def function(self, mod, name):
        f = ctypes.c_void_p()
        self._check(self.cu.cuModuleGetFunction(ctypes.byref(f), mod, name.encode()), "cuModuleGetFunction(%s)" % name)
        return f

    def launch(self, f, grid, block, shared, args):
        if shared > 48 * 1024:
            # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
            self._check(self.cu.cuFuncSetAttribute(f, 8, int(shared)), "cuFuncSetAttribute")
        holders = []
        for kind, v in args:
            if kind == "ptr":
                holders.append(ctypes.c_void_p(v))
            elif kind == "int32":
                holders.append(ctypes.c_int32(v))
            elif kind == "int64":
                holders.append(ctypes.c_int64(v))
            elif kind == "uint64":
                holders.append(ctypes.c_uint64(v))
            elif kind == "float32":
                holders.append(ctypes.c_float(v))
            elif kind == "float64":
                holders.append(ctypes.c_double(v))
            else:
                raise ValueError(kind)
        params = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
        g = list(grid) + [1] * (3 - len(grid))
        b = list(block) + [1] * (3 - len(block))
        stream = ctypes.c_void_p(self.torch.cuda.current_stream().cuda_stream)
        self._check(self.cu.cuLaunchKernel(f, g[0], g[1], g[2], b[0], b[1], b[2], int(shared), stream, params, None),
                    "cuLaunchKernel")


# ------------------------------------------------------------- generators
def torch_dtype(torch, name):
    return {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
            "bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
            "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8,
            "uint8": torch.uint8, "bool": torch.bool}[name]


FLOAT_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0, "float16": 65504.0, "bfloat16": 3.3895e38,
             "float32": 3.4028e38, "float64": 1.7976e308}


def generate(torch, cuda, cfg, name, t, axes, gen_seed):
    shp = kc.shape(t, axes)
    dt = torch_dtype(torch, t["dtype"])
    g = t.get("generator", {"kind": "normal"})
    kind = g["kind"]
    dev = "cuda"
    gen = torch.Generator(device=dev)
    gen.manual_seed(gen_seed)
    n = 1
    for d in shp:
        n *= d
    if kind in ("normal", "uniform"):
        if kind == "normal":
            x = torch.randn(shp, generator=gen, device=dev, dtype=torch.float32) * g.get("stddev", 1) + g.get("mean", 0)
        else:
            lo, hi = g.get("low", -1), g.get("high", 1)
            x = torch.rand(shp, generator=gen, device=dev, dtype=torch.float32) * (hi - lo) + lo
        x = x * g.get("scale", 1)
        m = FLOAT_MAX[t["dtype"]]
        return x.clamp_(-m, m).to(dt)
    if kind == "int_range":
        lo = kc.evaluate(g.get("low", 0), axes)
        hi = kc.evaluate(g["high"], axes)
        return torch.randint(lo, hi, shp, generator=gen, device=dev, dtype=torch.int64).to(dt)
    if kind == "permutation":
        L = shp[-1] if shp else 1
        pn = kc.evaluate(g["n"], axes) if "n" in g else L
        rows = n // L
        out = torch.empty((rows, L), dtype=torch.int64, device=dev)
        step = max(1, (1 << 26) // max(pn, 1))
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            out[r0:r1] = torch.rand((r1 - r0, pn), generator=gen, device=dev).argsort(dim=1)[:, :L]
        return out.reshape(shp).to(dt)
    if kind == "constant":
        return torch.full(shp, g["value"], dtype=dt, device=dev)
    if kind == "kernel":
        x = torch.empty(shp, dtype=dt, device=dev)
        src = g["source"] if "source" in g else kc.candidate_source(cfg, {"source_file": g["source_file"]})
        # As the worker does: axis values as -DKOPT_AXIS_<name>=<value> when the
        # source mentions KOPT_AXIS_; one thread per element, blocks of 256.
        defines = {"KOPT_AXIS_" + k: v for k, v in axes.items()} if "KOPT_AXIS_" in src else {}
        f = cuda.function(cuda.compile(src, defines, []), g["kernel"])
        cuda.launch(f, [max(1, (n + 255) // 256)], [256], 0,
                    [("ptr", x.data_ptr()), ("int64", n), ("uint64", gen_seed)])
        return x
    raise ValueError("input %s: unknown generator kind %s" % (name, kind))


def poison(torch, t, axes):
    shp = kc.shape(t, axes)
    dt = torch_dtype(torch, t["dtype"])
    if dt.is_floating_point:
        return torch.full(shp, float("nan"), dtype=torch.float32, device="cuda").to(dt)
    if dt == torch.bool:
        return torch.zeros(shp, dtype=dt, device="cuda")
    return torch.full(shp, -0x5A5A5A5A if dt in (torch.int32, torch.int64) else 0x5A, dtype=dt, device="cuda")


# -------------------------------------------------------------- comparison
def compare(torch, actual, expected, tol, dtype):
    """kopt's rule: an element fails if |a - e| > atol and > rtol * |e|;
    NaN where the other is not NaN, or Inf mismatches, fail; integers exact."""
    a = actual.reshape(-1)
    e = expected.reshape(-1)
    if a.numel() != e.numel():
        return False, "element count %d != %d" % (a.numel(), e.numel()), 0.0
    if not torch_dtype(torch, dtype).is_floating_point:
        bad = (a.to(torch.int64) != e.to(torch.int64))
        nbad = int(bad.sum())
        need = a.numel() - math.floor(tol.get("matched_ratio", 1.0) * a.numel() + 1e-9)
        first = ""
        if nbad:
            i = int(bad.nonzero()[0])
            first = "first mismatch at %d: %d vs expected %d" % (i, int(a[i]), int(e[i]))
        return nbad <= need, "%d of %d differ%s" % (nbad, a.numel(), "; " + first if first else ""), float(nbad)
    atol, rtol, ratio = tol.get("atol", 1e-5), tol.get("rtol", 1e-5), tol.get("matched_ratio", 1.0)
    nbad, maxerr = 0, 0.0
    first = ""
    chunk = 1 << 26
    for s in range(0, a.numel(), chunk):
        # via float32: conversions from fp8 go through it anyway
        x = a[s:s + chunk].to(torch.float32).to(torch.float64)
        y = e[s:s + chunk].to(torch.float32).to(torch.float64)
        xn, yn = torch.isnan(x), torch.isnan(y)
        xi, yi = torch.isinf(x), torch.isinf(y)
        diff = (x - y).abs()
        fin = ~(xn | yn | xi | yi)
        fail = fin & (diff > atol) & (diff > rtol * y.abs())
        fail |= xn != yn
        fail |= (xi | yi) & ~(xn | yn) & (x != y)
        nb = int(fail.sum())
        if nb and not first:
            i = int(fail.nonzero()[0])
            first = "first mismatch at %d: %r vs expected %r" % (s + i, float(x[i]), float(y[i]))
        nbad += nb
        if bool(fin.any()):
            maxerr = max(maxerr, float(diff[fin].max()))
    ok = (a.numel() - nbad) >= ratio * a.numel() - 1e-9
    return ok, "%d of %d outside tolerance, max abs err %.3g%s" % (nbad, a.numel(), maxerr,
                                                                  "; " + first if first else ""), maxerr


# ------------------------------------------------------------------ running
def run_reference(torch, cuda, cfg, axes, scalars, inputs, seed):
    ref = cfg["reference"]
    src = kc.candidate_source(cfg, ref)
    params = {k: v.get("default", v["values"][0]) for k, v in ref.get("parameters", {}).items()}
    mod = cuda.compile(src, params, ref.get("compile_options", []))
    names = dict(axes)
    names.update(params)
    outs = {n: poison(torch, t, axes) for n, t in cfg["outputs"].items()}
    tensors = dict(inputs)
    tensors.update(outs)
    workspaces = {}
    g = torch.Generator(device="cuda")
    g.manual_seed(seed ^ 0x5EED)
    for wn, w in ref.get("workspaces", {}).items():
        nbytes = max(1, kc.evaluate(w["bytes"], names))
        if w.get("zero_init"):
            workspaces[wn] = torch.zeros(nbytes, dtype=torch.uint8, device="cuda")
        else:
            workspaces[wn] = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device="cuda", generator=g)
    for ln in ref["launches"]:
        f = cuda.function(mod, ln["kernel"])
        args = []
        for a in ln["args"]:
            if "tensor" in a:
                args.append(("ptr", tensors[a["tensor"]].data_ptr()))
            elif "workspace" in a:
                args.append(("ptr", workspaces[a["workspace"]].data_ptr()))
            elif "int" in a:
                args.append((a.get("type", "int32"), kc.evaluate(a["int"], names)))
            elif "scalar" in a:
                sd = cfg["scalars"][a["scalar"]]["dtype"]
                t = a.get("type", sd)
                v = scalars[a["scalar"]]
                args.append((t, float(v) if t.startswith("float") else int(v)))
        grid = [kc.evaluate(e, names) for e in ln["grid"]]
        block = [kc.evaluate(e, names) for e in ln["block"]]
        shared = kc.evaluate(ln.get("shared_bytes", 0), names)
        cuda.launch(f, grid, block, shared, args)
    torch.cuda.synchronize()
    return outs


def validate_op(torch, cuda, stem, cfg, mod, max_shapes, seed, rows):
    failures = 0
    wls = cfg["workloads"][:max_shapes] if max_shapes else cfg["workloads"]
    for wi, wl in enumerate(wls):
        axes = kc.workload_axes(cfg, wl)
        scalars = kc.workload_scalars(cfg, wl)
        t0 = time.time()
        row = {"op": stem, "workload": wl["id"], "status": "PASS", "detail": []}
        try:
            inputs = {}
            for i, (n, t) in enumerate(cfg["inputs"].items()):
                inputs[n] = generate(torch, cuda, cfg, n, t, axes, seed * 1000003 + wi * 101 + i)
            pristine = {n: x.clone() for n, x in inputs.items()}
            ref_in = {n: x.clone() for n, x in inputs.items()}
            ref_out = run_reference(torch, cuda, cfg, axes, scalars, ref_in, seed)
            expected = mod.torch_impl({n: x.clone() for n, x in inputs.items()}, dict(axes), dict(scalars))
            torch.cuda.synchronize()
            checks = [(n, ref_out[n], t) for n, t in cfg["outputs"].items()]
            checks += [(n, ref_in[n], t) for n, t in cfg["inputs"].items() if t.get("in_place")]
            for n, t in cfg["inputs"].items():
                if not t.get("in_place") and not torch.equal(ref_in[n], pristine[n]):
                    row["status"] = "FAIL"
                    row["detail"].append("%s: the reference modified this read-only input" % n)
            for n, actual, t in checks:
                if n not in expected:
                    raise KeyError("torch_impl did not return %r" % n)
                exp = expected[n]
                want = torch_dtype(torch, t["dtype"])
                if exp.dtype != want:
                    exp = exp.to(want)
                tol = dict(cfg.get("tolerance", {}))
                tol.update(t.get("tolerance", {}))
                if hasattr(mod, "tolerance"):
                    tol.update(mod.tolerance(n, axes) or {})
                ok, msg, _ = compare(torch, actual, exp, tol, t["dtype"])
                row["detail"].append("%s: %s" % (n, msg))
                if not ok:
                    row["status"] = "FAIL"
            del inputs, pristine, ref_in, ref_out, expected
        except Exception as e:  # noqa: BLE001 - reported per shape
            row["status"] = "ERROR"
            row["detail"].append("%s: %s" % (type(e).__name__, e))
            if os.environ.get("KOPT_VALIDATE_TRACE"):
                traceback.print_exc()
        torch.cuda.empty_cache()
        row["seconds"] = round(time.time() - t0, 3)
        rows.append(row)
        print("%-5s %-30s %-40s %6.2fs  %s" % (row["status"], stem, wl["id"], row["seconds"],
                                                " | ".join(row["detail"])[:400]), flush=True)
        if row["status"] != "PASS":
            failures += 1
    return failures


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default=os.path.join(REPO, "configs", "bench"))
    ap.add_argument("--ops", default="", help="comma-separated config names (default: all)")
    ap.add_argument("--max-shapes", type=int, default=0, help="validate at most N workloads per operator")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default="", help="also write the results to this file")
    ap.add_argument("--dry-run", action="store_true", help="CPU only: parse and check, run nothing")
    ap.add_argument("--arch", default="", help="NVRTC target (default: from the GPU, e.g. sm_90a)")
    a = ap.parse_args(argv)
    if a.max_shapes < 0:
        print("error: --max-shapes must be >= 0", file=sys.stderr)
        return EXIT_USAGE
    paths = sorted(glob.glob(os.path.join(a.suite, "*.json")))
    if a.ops:
        want = [x for x in a.ops.split(",") if x]
        have = {os.path.basename(p)[:-5] for p in paths}
        missing = [w for w in want if w not in have]
        if missing:
            print("error: no config for: %s (have: %s)" % (", ".join(missing), ", ".join(sorted(have))), file=sys.stderr)
            return EXIT_USAGE
        paths = [p for p in paths if os.path.basename(p)[:-5] in want]
    if not paths:
        print("error: no configs in %s" % a.suite, file=sys.stderr)
        return EXIT_USAGE

    problems = 0
    plan = []
    for p in paths:
        stem = os.path.basename(p)[:-5]
        try:
            cfg = kc.load(p)
            kc.candidate_source(cfg, cfg["reference"])
            for wl in cfg["workloads"]:
                axes = kc.workload_axes(cfg, wl)
                names = dict(axes)
                names.update({k: v.get("default", v["values"][0])
                              for k, v in cfg["reference"].get("parameters", {}).items()})
                for t in list(cfg["inputs"].values()) + list(cfg["outputs"].values()):
                    kc.shape(t, axes)
                for ln in cfg["reference"]["launches"]:
                    for e in ln["grid"] + ln["block"]:
                        kc.evaluate(e, names)
                    kc.evaluate(ln.get("shared_bytes", 0), names)
        except Exception as e:  # noqa: BLE001
            print("%s: error: %s" % (p, e), file=sys.stderr)
            problems += 1
            continue
        mp = module_path(stem)
        if mp is None or not defines_torch_impl(mp):
            print("%s: error: no bench/validate/ops_%s.py defining torch_impl" % (stem, stem), file=sys.stderr)
            problems += 1
            continue
        plan.append((stem, cfg, mp))
        if a.dry_run:
            n = min(len(cfg["workloads"]), a.max_shapes) if a.max_shapes else len(cfg["workloads"])
            print("%-30s %3d workloads  %s" % (stem, n, os.path.relpath(mp, REPO)))
    if a.dry_run:
        print("dry run: %d configs ready, %d problems" % (len(plan), problems))
        return EXIT_USAGE if problems else EXIT_OK

    try:
        import torch
    except ImportError:
        print("error: torch is not installed (use --dry-run to check configs without it)", file=sys.stderr)
        return EXIT_RUN
    if not torch.cuda.is_available():
        print("error: no CUDA device visible to torch", file=sys.stderr)
        return EXIT_RUN
    major, minor = torch.cuda.get_device_capability()
    arch = a.arch or ("sm_%d%d%s" % (major, minor, "a" if major >= 9 else ""))
    try:
        cuda = Cuda(torch, arch)
    except Exception as e:  # noqa: BLE001
        print("error: cannot set up NVRTC / the CUDA driver: %s" % e, file=sys.stderr)
        return EXIT_RUN
    print("device %s, %s, torch %s" % (torch.cuda.get_device_name(), arch, torch.__version__))
    rows = []
    failed_ops = []
    for stem, cfg, mp in plan:
        try:
            mod = load_module(mp)
        except Exception as e:  # noqa: BLE001
            print("ERROR %-30s cannot import %s: %s" % (stem, mp, e))
            failed_ops.append(stem)
            problems += 1
            continue
        if getattr(mod, "NOTES", ""):
            print("note  %-30s %s" % (stem, mod.NOTES))
        if validate_op(torch, cuda, stem, cfg, mod, a.max_shapes, a.seed, rows):
            failed_ops.append(stem)
    npass = sum(1 for r in rows if r["status"] == "PASS")
    print("\n%d of %d shapes passed; operators with failures: %s" % (npass, len(rows), ", ".join(failed_ops) or "none"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "arch": arch, "rows": rows}, f, indent=1)
    if problems:
        return EXIT_USAGE
    if any(r["status"] == "ERROR" for r in rows):
        return EXIT_RUN
    return EXIT_FAIL if npass != len(rows) else EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
