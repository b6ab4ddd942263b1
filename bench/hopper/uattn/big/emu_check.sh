#!/bin/bash
# The CPU checks of unified_attention_ws_big (bench/hopper/emu/ua_emu.cpp), from the repository
# root: bash bench/hopper/uattn/big/emu_check.sh > LOG 2>&1 (about 5 minutes on 2 cores).
# Every build has main's defaults (UA_WGMMA 3, UA_S_RS 1, UA_PERSIST 1, UA_HPAIR 1, UA_WS_SMALL
# 2); the probes at the end break the kernel on purpose and must FAIL.
set -u
M="-DUA_WGMMA=3 -DUA_S_RS=1 -DUA_PERSIST=1 -DUA_HPAIR=1 -DUA_WS_SMALL=2"
E=/tmp/uabig_emu; mkdir -p $E
build() {  # out src-root defines...
  local o=$1 r=$2; shift 2
  echo "## build $o: $M $*"
  (cd $r && nice -n 10 g++ -std=c++20 -O2 -pthread -I bench/hopper/emu -I bench/hopper/emu/stub \
    -DKOPT_EMU $M "$@" bench/hopper/emu/ua_emu.cpp -o $E/$o) || echo "BUILD FAILED"
}
run() { echo "## run: $*"; nice -n 10 "$@"; echo "## rc=$?"; }
build b0 . -DUA_WS_BIG=0
run $E/b0                                   # every existing case, default plan (d 192 / 256 fa2)
build b2 . -DUA_WS_BIG=2 -fsanitize=alignment -fno-sanitize-recover=alignment
UA_EMU_K3=1 run $E/b2 --big                 # cand_b3's plan: ws_small writes the prefix sums
UA_EMU_K3=1 run $E/b2 --dlens 64 7 20 20    # s15's shape on ws_small (UA_WS_BIG 2 routing)
UA_EMU_K3=1 run $E/b2 --dlens 256 1100,40 1 1  # 35 tiles: the 4-stage ring wraps 8 times
UA_EMU_JITTER=50 run $E/b2 --dlens 256 300,129,1 4 2  # random delays at every sync point
UA_EMU_JITTER=50 run $E/b2 --dlens 192 257,17 2 1
run $E/b2                                   # every case of run_cases(2) in this build
build b2ns . -DUA_WS_BIG=2 -DUA_WB_SKIP=0
UA_EMU_K3=1 run $E/b2ns --big                # without the skip of wholly masked tiles
build b1 . -DUA_WS_BIG=1
run $E/b1 --big                             # cand_b4's build (fa2 still takes short d <= 80)
build b2np . -DUA_WS_BIG=2 -DUA_WB_PP=0
UA_EMU_K3=1 run $E/b2np --big
build b2n64 . -DUA_WS_BIG=2 -DUA_WB_BN=64 -DUA_WB_NS=2
UA_EMU_K3=1 run $E/b2n64 --big
UA_EMU_JITTER=50 run $E/b2n64 --dlens 256 300,129,1 4 2
build b2n48 . -DUA_WS_BIG=2 -DUA_WB_BN=48 -DUA_WB_NS=3
UA_EMU_K3=1 run $E/b2n48 --big
UA_EMU_JITTER=50 run $E/b2n48 --dlens 192 257,17 2 1
# probes: each must FAIL (or abort in emu.h's bounds check)
P=$E/probe; rm -rf $P
probe() {  # name old new [from]: replaced once after `from` (default: inside attn_ws_big)
  mkdir -p $P/$1/configs/bench $P/$1/bench/hopper && cp -r bench/hopper/emu $P/$1/bench/hopper/
  python3 - "$1" "$2" "$3" "$P/$1" "${4:-__device__ __forceinline__ void attn_ws_big(}" <<'PY'
import sys
n, old, new, d, start = sys.argv[1:]
s = open("configs/bench/unified_attention_baseline.cu").read()
i = s.index(start)
assert old in s[i:], old
open(d + "/configs/bench/unified_attention_baseline.cu", "w").write(s[:i] + s[i:].replace(old, new, 1))
PY
  build p_$1 $P/$1 -DUA_WS_BIG=2
  run $E/p_$1 --dlens 256 300,129 2 1
  run $E/p_$1 --dlens 192 130,17 2 2
}
# (the mask is ws_mask, shared with attn_ws_small since bench/hopper/uattn/DEDUP.md)
probe mask 'if (j > r || j >= len)' 'if (j > r + 1 || j >= len)' 'void ws_mask('
probe swz 'const unsigned dst_off = rr * 128 + ((cc ^ (rr & 7)) << 4);' 'const unsigned dst_off = rr * 128 + (cc << 4);'
probe skip 'const bool live = !UA_WB_SKIP || t * BN <= wg_last;' 'const bool live = !UA_WB_SKIP || t * BN <= wg_last - BN;'
probe qpanel 'dq0 + (kk >> 2) * ((64 * 128) >> 4)' 'dq0 + (kk >> 3) * ((64 * 128) >> 4)'
build p_nosplit . -DUA_WS_BIG=2 -DUA_P_SPLIT=0
run $E/p_nosplit --dlens 256 300,129 2 1
run $E/p_nosplit --dlens 192 130,17 2 2
echo "## done"
