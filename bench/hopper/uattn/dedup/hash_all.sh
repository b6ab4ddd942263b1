#!/bin/bash
# Cubin hashes (bench/nvrtc_check.py --hash) of configs/bench/unified_attention_baseline.cu for the
# config's default, the attention_forward config's compile (no macros) and every variant that was
# measured on the H200 or is listed in a candidate / pack, one line per variant:
#   bash bench/hopper/uattn/dedup/hash_all.sh [FILE.cu] > LOG     (from the repository root)
# Used to show that a source refactor leaves every cubin byte-identical (diff two logs).
F=${1:-configs/bench/unified_attention_baseline.cu}
M="-DUA_WGMMA=3 -DUA_WG_SKIP=0 -DUA_LO_SKIP=0 -DUA_S_RS=1 -DUA_PERSIST=1 -DUA_HPAIR=1"
DEF="$M -DUA_WS_SMALL=2 -DUA_WS_BIG=2 -DUA_WB_SKIP=1 -DUA_WB_PP=1"
while IFS='|' read -r name flags; do
  [ -z "$name" ] && continue
  # shellcheck disable=SC2086
  h=$(nice -n 10 python3 bench/nvrtc_check.py "$F" --hash $flags 2>&1 | tail -1)
  printf '%-16s %s   [%s]\n' "$name" "$h" "$flags"
done <<LIST
default|$DEF
noflags|
prev_big0|$M -DUA_WS_SMALL=2
small0|$M
small1|$M -DUA_WS_SMALL=1
small2_big1|$M -DUA_WS_SMALL=2 -DUA_WS_BIG=1
big1_def|$DEF -DUA_WS_BIG=1
ws128bn128|$DEF -DUA_WS128_BN=128
lo_skip1|$DEF -DUA_LO_SKIP=1
lo_skip2|$DEF -DUA_LO_SKIP=2
lo1_prev|$M -DUA_WS_SMALL=2 -DUA_LO_SKIP=1
wb_pp0|$DEF -DUA_WB_PP=0
wb_skip0|$DEF -DUA_WB_SKIP=0
wb_n64|$DEF -DUA_WB_BN=64 -DUA_WB_NS=2
wb_n48|$DEF -DUA_WB_BN=48 -DUA_WB_NS=3
ws_pp0|$DEF -DUA_WS_PP=0
ws_bn64|$DEF -DUA_WS_BN=64
ws_bn64ns4|$DEF -DUA_WS_BN=64 -DUA_WS_NS=4
small1_pp0|$M -DUA_WS_SMALL=1 -DUA_WS_PP=0
small1_p0|-DUA_WGMMA=3 -DUA_S_RS=1 -DUA_WS_SMALL=1
small1_p0_srs0|-DUA_WGMMA=3 -DUA_WS_SMALL=1
small2_srs0|-DUA_WGMMA=3 -DUA_WS_SMALL=2 -DUA_WS_PP=0
hpair0|$DEF -DUA_HPAIR=0
persist0|-DUA_WGMMA=3 -DUA_S_RS=1 -DUA_WS_SMALL=2 -DUA_WS_BIG=2
persist2|-DUA_WGMMA=3 -DUA_S_RS=1 -DUA_PERSIST=2 -DUA_WS_SMALL=2 -DUA_WS_BIG=2
srs0|-DUA_WGMMA=3 -DUA_S_RS=0 -DUA_PERSIST=1 -DUA_HPAIR=1 -DUA_WS_SMALL=2 -DUA_WS_BIG=2
wg_skip1|$DEF -DUA_WG_SKIP=1
wgmma2|-DUA_WGMMA=2 -DUA_WS_SMALL=2 -DUA_WS_BIG=2
wgmma2_old|-DUA_WGMMA=2
wgmma1|-DUA_WGMMA=1
wgmma3_old|-DUA_WGMMA=3
wgmma3_lo1|-DUA_WGMMA=3 -DUA_LO_SKIP=1
psplit0|$DEF -DUA_P_SPLIT=0
LIST
