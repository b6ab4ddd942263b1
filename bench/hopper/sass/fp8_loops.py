#!/usr/bin/env python3
"""SASS of the wgmma + FFMA inner loops of a kernel, for comparing builds of one kernel on a
machine without a CUDA 13 disassembler.
    python3 bench/hopper/sass/fp8_loops.py FILE.cu [-DNAME=V ...] [--ffma N] [--ref LOOP.txt]
        [--save PREFIX] [--nvdisasm PATH]
Compiles FILE.cu with NVRTC for sm_90a (bench/nvrtc_check.py --cubin), rewrites the cubin's ELF
header into the older CUDA ABI (OS/ABI 0x33, ABI version 7, e_flags SM90) so that an older
nvdisasm (11.8: Debian bookworm non-free `nvidia-cuda-toolkit`, `apt-get download` +
`dpkg-deb -x`) reads it, and reports every loop (backward-branch range) of the kernel that holds
exactly N FFMAs (default 256: one K group of the FP8_DB = 2 consumer) and fewer than 400
instruction slots: its size, undecoded slots (11.8 does not know every sm_90a opcode, e.g. the
e4m3 HGMMA; they are listed by their 12 opcode bits from the cubin), the highest register,
whether the enclosing unit loop holds the split chain (NANOSLEEP), and a static register-bank
model of its FFMAs: 2 banks (register % 2, as in the public Volta/Turing microbenchmark
papers), a source operand served by the reuse cache (same register, same slot, .reuse on the
previous instruction) reads no bank; each extra read of one bank in one FFMA counts one cycle.
--save PREFIX writes each loop as PREFIX.<start>.txt (one instruction per line); --ref compares
the opcode sequence with such a file. The model is a model: only GPU timings decide."""
import collections, difflib, glob, os, re, struct, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
def opt(name, default=None):
    if name in args:
        i = args.index(name); v = args[i + 1]; del args[i:i + 2]; return v
    return default
nff = int(opt("--ffma", "256")); ref = opt("--ref"); save = opt("--save")
nvd = opt("--nvdisasm") or os.environ.get("NVDISASM") or next(
    iter(glob.glob("/tmp/*/x/usr/bin/nvdisasm") + glob.glob("/usr/bin/nvdisasm")), None)
if not args or not nvd:
    sys.exit(__doc__ + ("\nnvdisasm not found (--nvdisasm PATH or NVDISASM=...)" if args else ""))
fn = "bsmm_f16_tma"
tmp = tempfile.mkdtemp()
cub = os.path.join(tmp, "k.cubin")
r = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "nvrtc_check.py"), args[0], "-v",
                    "--cubin", cub] + args[1:], capture_output=True, text=True)
log = r.stdout + r.stderr
if r.returncode: sys.exit(log)
for l in log.splitlines():
    if re.search(r"spill|warning|C75\d\d|Used \d+ registers", l): print("ptxas:", l.strip())
b = bytearray(open(cub, "rb").read())
b[7], b[8] = 0x33, 7
struct.pack_into("<I", b, 0x30, 0x5A055A)  # EF_CUDA_SM90 | VIRTUAL_SM(90) | 64-bit | texmode
open(cub, "wb").write(b)
sass = subprocess.run([nvd, "-c", cub], capture_output=True, text=True).stdout.split("\n")
data = bytes(b)
shoff, = struct.unpack_from("<Q", data, 0x28); shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
stro = secs[shstrndx][4]
nm = lambda o: data[stro + o: data.index(b"\0", stro + o)].decode()
text = next(data[s[4]:s[4] + s[5]] for s in secs if nm(s[0]) == ".text." + fn)
ins, labels, pend, cur = {}, {}, [], None
for line in sass:
    m = re.match(r"//-+ \.text\.(\S+)", line)
    if m: cur = m.group(1); continue
    if cur != fn: continue
    m = re.match(r"^(\.L_x_\d+):", line)
    if m: pend.append(m.group(1)); continue
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
    if m:
        a = int(m.group(1), 16)
        for l in pend: labels[l] = a
        pend = []; ins[a] = re.sub(r"\s+", " ", m.group(2).strip())
def slot(a):
    if a in ins: return ins[a]
    lo, = struct.unpack_from("<Q", text, a); return f"RAW:{lo & 0xfff:03x}"
def opcode(t): return re.sub(r"^@!?U?P[0-9T] ", "", t).split(" ")[0]
loops = sorted({(labels[m.group(1)], a) for a, t in ins.items()
                for m in [re.search(r"BRA\s+`?\(?(\.L_x_\d+)", t)] if m and labels.get(m.group(1), 1 << 40) <= a})
def bank_model(body):
    prev, hits, extra = {}, 0, 0
    for t in body:
        ops = re.findall(r"(R\d+|RZ|UR\d+|URZ|c\[[^\]]*\]\[[^\]]*\]|-?0x[0-9a-f]+|[-\w.|]+)(\.reuse)?",
                         " ".join(t.split(" ")[1:]))
        cur = {}
        if opcode(t) == "FFMA":
            reads = [0, 0]
            for s, (reg, ru) in enumerate(ops[1:4]):
                if not re.fullmatch(r"R\d+", reg): continue
                if prev.get(s) == reg: hits += 1
                else: reads[int(reg[1:]) % 2] += 1
                if ru: cur[s] = reg
            extra += sum(max(0, v - 1) for v in reads)
        prev = cur
    return hits, extra
refops = [opcode(l.rstrip("\n")) for l in open(ref)] if ref else None
for s, e in loops:
    body = [slot(a) for a in range(s, e + 16, 16)]
    h = collections.Counter(opcode(t) for t in body)
    if h["FFMA"] != nff or len(body) >= 400: continue
    # the unit loop: the smallest conditional back branch around it (the unconditional ones
    # are the out-of-line retry blocks of the mbarrier waits, placed after the code)
    outer = [x for x in loops if x[0] < s and x[1] > e and ins[x[1]].startswith("@")]
    o = min(outer, key=lambda x: x[1] - x[0]) if outer else None
    chain = o is not None and any("NANOSLEEP" in ins.get(a, "") for a in range(o[0], o[1] + 16, 16))
    regs = [int(x) for t in body for x in re.findall(r"\bR(\d+)\b", t)]
    hits, extra = bank_model(body)
    und = collections.Counter(t for t in body if t.startswith("RAW:"))
    print(f"loop {s:#x}..{e:#x}: {len(body)} slots, FFMA {h['FFMA']}, max reg R{max(regs)}, "
          f"split chain in its unit loop: {chain}; reuse hits {hits}, extra bank cycles (model) {extra}, "
          f"slots + extra {len(body) + extra}; undecoded {dict(und)}")
    if refops is not None:
        ops = [opcode(t) for t in body]
        print(f"    vs --ref: identical opcodes {ops == refops}, similarity "
              f"{difflib.SequenceMatcher(None, refops, ops).ratio():.3f}, ref {len(refops)} slots")
    if save:
        open(f"{save}.{s:#x}.txt", "w").write("\n".join(body) + "\n")
