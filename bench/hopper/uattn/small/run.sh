#!/bin/bash
# uasmall GPU pack: unified_attention d 64 / 72 / 80 on the warp-specialized kernel
# (UA_WS_SMALL = 1, attn_ws_small in configs/bench/unified_attention_baseline.cu) against the
# shipped default (UA_WS_SMALL = 0: d <= 80 on the mma.sync kernel unified_attention_fa2).
# Built into .gpuwork/uasmall by make_pack.sh, which copies this checkout's configs/ into the
# pack (the device's tree may not hold the new kernel). Run on the device from the repository
# root with OUT set and the kopt bundle at .gpuwork/suite/bundle. Every step is one kopt eval
# in its own session under a hard limit (killed as a whole: kopt-worker runs in a process group
# of its own); a step that would not fit in LIMIT (default 120 s) is skipped and logged.
#   b0    the shipped default on s5, s6, s15, s22 (d 72 / 80 / 64), s20, s21, s3 (d = 128) and
#         s4 (d = 192, mma.sync)
#   k3    cand_k3pp (UA_WS_SMALL 2: d 64 / 72 / 80 from 113 tokens on in the kernel
#         unified_attention_ws_small, which also replaces unified_attention_cu as the plan's first
#         launch (it writes the prefix sums): three launches as shipped; 128-key tiles, 3 stages,
#         ping-pong; unified_attention_ws byte-identical to the shipped one) on the same eight
#   k3o   cand_k3pp on ten other workloads (s0, s2, s7, s8, s9, s11, s14, s16, s23, s24: d = 128
#         batches of 130-1032 sequences, whose prefix sums the new first launch writes, and the
#         d = 256 ones): correct there too?
#   k4    cand_k4pp (the same kernel as a fourth launch after unified_attention_cu, its no-op
#         block at 0 bytes of shared memory) on the eight: the fallback if k3 fails
#   b0o   the shipped default on the ten (same run), if time is left
# Measured before (H200 2026-12-04 01:45 UTC, results_2026-12-04/run3_*, cand_k4pp with its
# no-op block at 145408 bytes): correct on all eight; s5 1066 against 1538 us, s6 4947 / 6773,
# s22 4641 / 6377; the fourth launch cost 2.0-3.2 us on the others (s3 14.2 / 11.7, s20 864.4 /
# 861.2, s21 116.4 / 114.0, s4 124.9 / 122.1, s15 13.5 / 11.5), which cand_k3pp avoids.
# Decide: install (bench/hopper/uattn/small/NOTES.md, "Install") cand_k3pp if k3 and k3o are
# correct everywhere and k3 is faster on s5 / s6 / s22 with the rest within noise of b0 / b0o;
# else cand_k4pp if k4 is (it costs the others ~2-3 us).
R=$PWD; W=$(dirname "$(readlink -f "$0")"); NAME=$(basename "$W"); S=$R/.gpuwork/suite; T0=$(date +%s)
: "${OUT:?set OUT to the output folder}"
LIMIT=${LIMIT:-120}
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
S5=s5_n1_l11840_hq16_hkv16_d72; S6=s6_n1_l24752_hq16_hkv16_d80; S15=s15_n1_l7_hq20_hkv20_d64
S22=s22_n1_l49152_hq4_hkv4_d72; S21=s21_n1_l2018_hq32_hkv8_d128
S20=s20_n1_l6294_hq32_hkv4_d128
S3=s3_n1_l16_hq16_hkv1_d128; S4=s4_n1_l1688_hq16_hkv16_d192
ALL=$S5,$S6,$S15,$S22,$S21,$S20,$S3,$S4
O=s0_n130_l256_hq10_hkv1_d128,s2_n484_l256_hq10_hkv1_d128,s7_n1_l1144_hq16_hkv2_d128,s8_n1_l875_hq16_hkv2_d256,s9_n324_l256_hq16_hkv4_d128,s11_n1032_l256_hq16_hkv4_d128,s14_n1_l72_hq16_hkv4_d256,s16_n18_l256_hq28_hkv4_d128,s23_n1_l145_hq40_hkv8_d128,s24_n1_l5926_hq8_hkv1_d256
ev b0 - 25 $ALL
ev k3 cand_k3pp 25 $ALL
ev k3o cand_k3pp 35 $O
ev k4 cand_k4pp 20 $ALL
ev b0o - 30 $O
el done
cat $OUT/log.txt; for f in $OUT/*.txt; do echo "== $f"; head -c 1500 $f; done
cd $OUT && tar czf $NAME.tgz --exclude=$NAME.tgz * && find . -maxdepth 1 -type f ! -name $NAME.tgz -delete
