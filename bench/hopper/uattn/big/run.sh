#!/bin/bash
# uabig GPU pack: unified_attention d 192 / 256 on the warp-specialized wgmma kernel
# unified_attention_ws_big (UA_WS_BIG, attn_ws_big in configs/bench/unified_attention_baseline.cu)
# against the shipped default (d 192 / 256 on the mma.sync kernel unified_attention_fa2, BM 64).
# Built into .gpuwork/uabig by make_pack.sh, which copies this checkout's configs/ into the pack
# (the device's tree may not hold the new kernel). Run on the device from the repository root
# with OUT set and the kopt bundle at .gpuwork/suite/bundle. Every step is one kopt eval in its
# own session under a hard limit (killed as a whole: kopt-worker runs in a process group of its
# own); a step that would not fit in LIMIT (default 100 s) is skipped and logged.
#   b0    the shipped default on s4 (d 192), s8, s14, s24 (d 256), s21 (d 128, control), s15
#         (d 64, 7 tokens: unified_attention_fa2 today) and s5 (d 72, unified_attention_ws_small)
#   b3    cand_b3 (UA_WS_BIG 2: three launches, unified_attention_ws_big in place of
#         unified_attention_fa2; 32-key tiles, 4 stages, ping-pong, wholly masked tiles skipped;
#         unified_attention_ws_small takes every d <= 80 length, so s15 moves there) on the
#         same seven
#   n64   cand_b3n64 (cand_b3 with 64-key tiles, 2 stages) on s4, s8, s14, s24
#   n48   cand_b3n48 (cand_b3 with 48-key tiles, 3 stages) on the four
#   np    cand_b3np (cand_b3 without the consumers' ping-pong) on the four
#   b4    cand_b4 (UA_WS_BIG 1: the shipped three launches, unified_attention_fa2 one block for
#         d 192 / 256, plus unified_attention_ws_big as a fourth launch) on the seven: the
#         fallback if b3's plan is wrong somewhere
#   b0r   the shipped default on the four again, if time is left (noise)
# Decide (NOTES.md, "Install"): install cand_b3 (with the parameters of n64 / n48 / np instead
# if one of them is correct and faster on the four) if it is correct on all seven and faster on
# s4, s8, s24, with s21 / s5 within noise of b0 and s15 no worse than ~1.5 us.
R=$PWD; W=$(dirname "$(readlink -f "$0")"); NAME=$(basename "$W"); S=$R/.gpuwork/suite; T0=$(date +%s)
: "${OUT:?set OUT to the output folder}"
LIMIT=${LIMIT:-100}
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; CFG=$W/configs/bench/unified_attention.json
P="--peaks $W/configs/hardware/gpus.json --seeds 1 --no-store --json --min-time 0.01 --max-time 0.08 --launch-timeout-ms 5000"
el() { echo "$1 t=$(( $(date +%s) - T0 ))s" | tee -a $OUT/log.txt; }
{ timeout 10 nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
ev() {  # name candidate|- limit workloads
  local n=$1 c=$2 t=$3 w=$4
  local left=$(( LIMIT - ($(date +%s) - T0) ))
  [ $t -gt $(( left - 3 )) ] && t=$(( left - 3 ))
  if [ $t -lt 8 ]; then el "$n SKIPPED (left $left s)"; return; fi
  local C="--candidate $W/$c.json" role=candidate; [ "$c" = "-" ] && C="" && role=baseline
  setsid -w timeout -k 2 $t $K eval $CFG $C $P --workloads $w > $OUT/$n.json 2> $OUT/$n.err < /dev/null &
  local sid=$!; wait $sid; local rc=$?
  pkill -9 -s $sid 2>/dev/null
  timeout 5 python3 $W/summarize_eval.py $OUT/$n.json $role > $OUT/$n.txt 2>&1 < /dev/null
  el "$n rc=$rc (limit $t s): $(sed -n 2p $OUT/$n.txt | cut -c1-120)"
  gzip -9 -f $OUT/$n.json
  head -c 20000 $OUT/$n.err > $OUT/$n.err.tmp && mv $OUT/$n.err.tmp $OUT/$n.err
}
S4=s4_n1_l1688_hq16_hkv16_d192; S8=s8_n1_l875_hq16_hkv2_d256; S14=s14_n1_l72_hq16_hkv4_d256
S24=s24_n1_l5926_hq8_hkv1_d256; S21=s21_n1_l2018_hq32_hkv8_d128
S15=s15_n1_l7_hq20_hkv20_d64; S5=s5_n1_l11840_hq16_hkv16_d72
BIG=$S4,$S8,$S14,$S24
ALL=$BIG,$S21,$S15,$S5
ev b0 - 18 $ALL
ev b3 cand_b3 18 $ALL
ev n64 cand_b3n64 12 $BIG
ev n48 cand_b3n48 12 $BIG
ev np cand_b3np 12 $BIG
ev b4 cand_b4 18 $ALL
ev b0r - 10 $BIG
el done
cat $OUT/log.txt; for f in $OUT/*.txt; do echo "== $f"; head -c 1500 $f; done
cd $OUT && tar czf $NAME.tgz --exclude=$NAME.tgz * && find . -maxdepth 1 -type f ! -name $NAME.tgz -delete
