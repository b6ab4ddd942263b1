#!/usr/bin/env python3
"""Compile a .cu with NVRTC for sm_90a, the way kopt does, without building kopt; prints
ptxas's registers / stack / spills per kernel (-v) or the cubin's hash (--hash, to show that
a change leaves the default parameters' binary byte-identical). nvcc's figures can differ.
    python3 bench/nvrtc_check.py FILE.cu [-v|--hash] [--cubin OUT.cubin] [-DNAME=VALUE ...]
--cubin also writes the cubin (for cuobjdump -sass / nvdisasm)."""
import ctypes, glob, hashlib, sys

args = sys.argv[1:]
if not args or args[0].startswith("-"):
    sys.exit(__doc__)
cubin_out = None
if "--cubin" in args:
    i = args.index("--cubin")
    if i + 1 >= len(args):
        sys.exit(__doc__)
    cubin_out = args[i + 1]
    del args[i:i + 2]
mode = "--hash" if "--hash" in args else "-v"
defines = [a for a in args[1:] if a not in ("-v", "--hash")]
libs = sorted(glob.glob("/usr/local/cuda/lib64/libnvrtc.so*"))
if not libs:
    sys.exit("libnvrtc not found under /usr/local/cuda/lib64")
lib = ctypes.CDLL(libs[0])
prog = ctypes.c_void_p()
if lib.nvrtcCreateProgram(ctypes.byref(prog), open(args[0], "rb").read(), args[0].encode(), 0, None, None):
    sys.exit("nvrtcCreateProgram failed")
opts = ["--gpu-architecture=sm_90a", "-std=c++17", "-I/usr/local/cuda/include"] + defines
if mode == "-v":
    opts.append("--ptxas-options=-v")
arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
n = ctypes.c_size_t()
lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
log = ctypes.create_string_buffer(n.value)
lib.nvrtcGetProgramLog(prog, log)
if rc or mode == "-v":
    print(log.value.decode())
if rc:
    sys.exit(f"NVRTC failed (code {rc})")
if mode == "--hash" or cubin_out:
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetCUBIN(prog, buf)
    if cubin_out:
        open(cubin_out, "wb").write(buf.raw)
    if mode == "--hash":
        print(hashlib.sha256(buf.raw).hexdigest()[:16], n.value, "bytes")
