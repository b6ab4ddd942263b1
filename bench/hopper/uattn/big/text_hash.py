#!/usr/bin/env python3
"""Per-kernel machine-code hashes of a .cu compiled with NVRTC for sm_90a (as bench/nvrtc_check.py
compiles it): the sha256 of every .text.KERNEL section of the cubin, to show that a new macro
value leaves a kernel's code byte-identical while the whole cubin changes (a kernel added).
    python3 bench/hopper/uattn/big/text_hash.py FILE.cu [-DNAME=VALUE ...]"""
import ctypes, glob, hashlib, struct, sys

src, defines = sys.argv[1], sys.argv[2:]
lib = ctypes.CDLL(sorted(glob.glob("/usr/local/cuda/lib64/libnvrtc.so*"))[0])
prog = ctypes.c_void_p()
assert lib.nvrtcCreateProgram(ctypes.byref(prog), open(src, "rb").read(), src.encode(), 0, None, None) == 0
opts = ["--gpu-architecture=sm_90a", "-std=c++17", "-I/usr/local/cuda/include"] + defines
arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
if lib.nvrtcCompileProgram(prog, len(opts), arr):
    sys.exit("NVRTC failed")
n = ctypes.c_size_t()
lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
buf = ctypes.create_string_buffer(n.value)
lib.nvrtcGetCUBIN(prog, buf)
elf = buf.raw
# ELF64: section headers at e_shoff, e_shentsize, e_shnum, e_shstrndx
shoff, = struct.unpack_from("<Q", elf, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
def sh(i):
    name, typ, flags, addr, off, size = struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)
    return name, off, size
_, stroff, _ = sh(shstrndx)
for i in range(shnum):
    name, off, size = sh(i)
    nm = elf[stroff + name: elf.index(b"\0", stroff + name)].decode()
    if nm.startswith(".text."):
        print(hashlib.sha256(elf[off:off + size]).hexdigest()[:16], size, nm)
