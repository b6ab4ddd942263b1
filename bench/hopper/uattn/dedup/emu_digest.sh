#!/bin/bash
# The emulator (bench/hopper/emu/ua_emu.cpp) on every case, in the builds whose cubins
# hash_all.sh compares, with UA_EMU_DIGEST=1: each line ends with the hash of the output bits.
# Run it on two source trees and diff the logs (the output bits must be identical):
#   bash bench/hopper/uattn/dedup/emu_digest.sh ROOT TAG > LOG 2>&1    (ROOT: a repository root)
# About 15 minutes on 2 cores.
set -u
R=${1:-.}; T=${2:-cur}
M="-DUA_WGMMA=3 -DUA_S_RS=1 -DUA_PERSIST=1 -DUA_HPAIR=1"
E=/tmp/uadedup_emu_$T; mkdir -p "$E"
export UA_EMU_DIGEST=1
build() {  # out defines...
  local o=$1; shift
  echo "## build $o: $*"
  (cd "$R" && nice -n 10 g++ -std=c++20 -O2 -pthread -I bench/hopper/emu -I bench/hopper/emu/stub \
    -DKOPT_EMU "$@" bench/hopper/emu/ua_emu.cpp -o "$E/$o") || echo "BUILD FAILED"
}
run() { echo "## run: $*"; nice -n 10 "$@"; echo "## rc=$?"; }
build def $M -DUA_WS_SMALL=2 -DUA_WS_BIG=2        # the config's default
run "$E/def"
UA_EMU_K3=1 run "$E/def" --big
UA_EMU_K3=1 run "$E/def" --small
UA_EMU_K3=1 run "$E/def" --dlens 256 1100,40 1 1
build b0 $M -DUA_WS_SMALL=2                       # the previous default (d 192 / 256 on fa2)
run "$E/b0"
build s0 $M                                       # UA_WS_SMALL 0
run "$E/s0"
build s1 $M -DUA_WS_SMALL=1                       # attn_ws_small inside unified_attention_ws
run "$E/s1" --small
build b1 $M -DUA_WS_SMALL=2 -DUA_WS_BIG=1
run "$E/b1" --big
build wbpp0 $M -DUA_WS_SMALL=2 -DUA_WS_BIG=2 -DUA_WB_PP=0 -DUA_WB_SKIP=0 -DUA_WS_PP=0
UA_EMU_K3=1 run "$E/wbpp0" --big
run "$E/wbpp0" --small
build n64 $M -DUA_WS_SMALL=2 -DUA_WS_BIG=2 -DUA_WB_BN=64 -DUA_WB_NS=2 -DUA_WS_BN=64
UA_EMU_K3=1 run "$E/n64" --big
run "$E/n64" --small
build n48 $M -DUA_WS_SMALL=2 -DUA_WS_BIG=2 -DUA_WB_BN=48 -DUA_WB_NS=3
UA_EMU_K3=1 run "$E/n48" --big
build lo1 $M -DUA_WS_SMALL=2 -DUA_WS_BIG=2 -DUA_LO_SKIP=1
run "$E/lo1" --quick
run "$E/lo1" --lens 700,129,1 4 2
build bn128 $M -DUA_WS_SMALL=2 -DUA_WS_BIG=2 -DUA_WS128_BN=128
run "$E/bn128" --quick
run "$E/bn128" --lens 700,129,1 4 2
build none                                        # no macros (attention_forward's compile)
run "$E/none"
echo "## done"
