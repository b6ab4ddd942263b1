#!/usr/bin/env python3
"""Writes the PTX that NVRTC makes of a .cu for sm_90a (as bench/nvrtc_check.py compiles it), to
see WHERE two sources' cubins differ (ptxas is deterministic: the same PTX gives the same cubin;
different PTX may still give the same cubin).
    python3 bench/hopper/uattn/dedup/ptx_dump.py FILE.cu OUT.ptx [-DNAME=VALUE ...]"""
import ctypes, glob, sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
src, dst, defines = sys.argv[1], sys.argv[2], sys.argv[3:]
lib = ctypes.CDLL(sorted(glob.glob("/usr/local/cuda/lib64/libnvrtc.so*"))[0])
prog = ctypes.c_void_p()
assert lib.nvrtcCreateProgram(ctypes.byref(prog), open(src, "rb").read(), src.encode(), 0, None, None) == 0
opts = ["--gpu-architecture=sm_90a", "-std=c++17", "-I/usr/local/cuda/include"] + defines
arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
if lib.nvrtcCompileProgram(prog, len(opts), arr):
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    sys.exit("NVRTC failed\n" + log.value.decode())
n = ctypes.c_size_t()
lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
buf = ctypes.create_string_buffer(n.value)
lib.nvrtcGetPTX(prog, buf)
open(dst, "w").write(buf.value.decode())
