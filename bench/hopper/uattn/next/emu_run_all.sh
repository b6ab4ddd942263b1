#!/bin/bash
# CPU-emulator checks of UA_PERSIST (bench/hopper/emu), run from the worktree root.
# The emulator runs blocks one after another, so with a grid of G < items blocks, block 0 takes
# every item from the counter (the multi-item path: Q double buffer, ring across items) and the
# others find the counter exhausted; with the plan's grid min(132, items) = items (every case
# here but the UA_EMU_GRID ones) each block takes its own item without the counter.
cd "$(git rev-parse --show-toplevel)" && mkdir -p /tmp/emu
for combo in "1 0 0" "1 0 1" "1 1 0" "1 2 0" "1 1 1" "2 0 0"; do
  set -- $combo
  g++ -std=c++20 -O2 -pthread -fsanitize=alignment -fno-sanitize-recover=alignment -I bench/hopper/emu -I bench/hopper/emu/stub -DKOPT_EMU -DUA_WGMMA=3 -DUA_PERSIST=$1 -DUA_LO_SKIP=$2 -DUA_S_RS=$3 bench/hopper/emu/ua_emu.cpp -o /tmp/emu/ua_p$1_l$2_r$3 || exit 1
done
run() { echo "== UA_EMU_JITTER=${UA_EMU_JITTER:-0} UA_EMU_GRID=${UA_EMU_GRID:-plan} $*"; timeout 900 "$@"; echo "rc=$?"; }
for combo in "1 0 0" "1 0 1" "1 1 0" "1 2 0" "1 1 1" "2 0 0"; do
  set -- $combo; B=/tmp/emu/ua_p$1_l$2_r$3
  echo "#### UA_PERSIST=$1 UA_LO_SKIP=$2 UA_S_RS=$3"
  UA_EMU_GRID=3 run $B --quick
  UA_EMU_GRID=3 UA_EMU_JITTER=200 run $B --lens 256,256,256,256,256,256 4 1
  UA_EMU_GRID=2 UA_EMU_JITTER=100 run $B --lens 1,7,16,64,65,129,145,256,300 4 2
done
B=/tmp/emu/ua_p1_l0_r0
echo "#### UA_PERSIST=1 defaults: every case (other head sizes: the workspace offset), long ones"
run $B
run $B --lens 256,256,256,256,130 4 1
UA_EMU_GRID=1 UA_EMU_JITTER=50 run $B --lens 256,256,256,256 8 2
UA_EMU_GRID=5 run $B --len 2018 2 1
UA_EMU_GRID=4 UA_EMU_JITTER=100 run $B --len 1000 2 1
UA_EMU_GRID=7 run $B --len 6294 1 1
B=/tmp/emu/ua_p2_l0_r0
echo "#### UA_PERSIST=2: above 1024 tokens the one-item grid (each block its own item)"
UA_EMU_JITTER=100 run $B --len 2018 2 1
run $B --lens 1500,700,3 2 1
