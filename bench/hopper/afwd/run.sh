#!/bin/bash
# afwd pack: attention_forward_ws (warp-specialized wgmma, non-causal, one bf16 P) against the
# config's baseline (attention_forward_fa2), all 21 workloads of configs/bench/attention_forward.json.
#   A/B/C: kopt eval of configs/bench/attention_forward_afwd.json (= the config with seed =
#          cand_ws.json: the same run evaluates baseline and seed against one reference output),
#          workloads in three groups (small, medium, large: the naive reference dominates C)
#   D: cand_ws_rows.json (split mode off) on the workloads where the plan picks split mode
#   E: cand_ws_bn128.json (AF_BN72 = 128: 128-key tiles at d = 72) on five d = 72 workloads
#   F: cand_ws_split.json (split mode forced) on four workloads of 96 .. 272 row tiles
#   H: cand_ws_t128.json (AF_TAIL128 = 1: d = 72's tail in a SW128 panel, the fallback if the
#      SW32 tail panels fail) on three d = 72 workloads; runs right after C
#   I: cand_ws_ns6.json (AF_NS = 6 ring stages) on three workloads (last, skipped if no time)
#   G: cand_ws_pp.json (AF_PINGPONG = 1: the consumer warpgroups take turns issuing wgmma)
# Budgeted: a step that would not fit in the 140 s is skipped and logged.
R=$PWD; W=$R/.gpuwork/afwd; S=$R/.gpuwork/suite; T0=$(date +%s)
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; P="--peaks $W/configs/hardware/gpus.json --seeds 1 --no-store --json --max-time 0.2 --launch-timeout-ms 5000"
CFG=$W/configs/bench/attention_forward_afwd.json
el() { echo "$1 t=$(( $(date +%s) - T0 ))s" | tee -a $OUT/log.txt; }
left() { echo $(( 140 - ($(date +%s) - T0) )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
ev() {  # name candidate-json|- timeout workloads
  local L=$(left); local T=$3; [ $T -gt $(( L - 3 )) ] && T=$(( L - 3 ))
  if [ $T -lt 8 ]; then el "$1 SKIPPED (left $L s)"; return; fi
  local C="--candidate $W/$2.json" G=$CFG; [ "$2" = "-" ] && C=""; [ "$2" != "-" ] && G=$W/configs/bench/attention_forward.json
  timeout $T $K eval $G $C $P --workloads $4 2>&1 > $OUT/$1.json | head -c 20000 > $OUT/$1.err
  el "$1 rc=${PIPESTATUS[0]} (limit $T s) json $(stat -c %s $OUT/$1.json) bytes"
  for role in baseline seed candidate; do
    timeout 5 python3 $W/summarize_eval.py $OUT/$1.json $role > $OUT/$1.$role.txt 2>&1
  done
  gzip -9 -f $OUT/$1.json
}
A=s11_l276_h4_d72,s12_l600_h4_d72,s13_l1012_h4_d72,s14_l2024_h4_d72,s20_l1_h8_d128,s0_l720_h16_d72,s1_l1200_h16_d72,s2_l2116_h16_d72,s3_l3844_h16_d72,s15_l4100_h4_d72,s16_l8184_h4_d72,s4_l8136_h16_d72,s17_l15476_h4_d72
Bw=s18_l24952_h4_d72,s5_l17296_h16_d72,s6_l24368_h16_d72,s19_l40560_h4_d72,s9_l16742_h32_d128
Cw=s10_l30793_h32_d128,s7_l49596_h16_d72,s8_l65556_h16_d72
SP=s11_l276_h4_d72,s12_l600_h4_d72,s13_l1012_h4_d72,s14_l2024_h4_d72,s20_l1_h8_d128
ev A - 30 $A
ev B - 30 $Bw
ev C - 45 $Cw
ev H cand_ws_t128 12 s14_l2024_h4_d72,s4_l8136_h16_d72,s18_l24952_h4_d72
ev D cand_ws_rows 12 $SP
ev E cand_ws_bn128 15 s14_l2024_h4_d72,s1_l1200_h16_d72,s4_l8136_h16_d72,s17_l15476_h4_d72,s18_l24952_h4_d72
ev F cand_ws_split 10 s0_l720_h16_d72,s15_l4100_h4_d72,s1_l1200_h16_d72,s2_l2116_h16_d72
ev G cand_ws_pp 12 s4_l8136_h16_d72,s9_l16742_h32_d128,s18_l24952_h4_d72,s1_l1200_h16_d72
ev I cand_ws_ns6 12 s4_l8136_h16_d72,s9_l16742_h32_d128,s18_l24952_h4_d72
el "done"
cat $OUT/log.txt; for f in $OUT/*.txt; do echo "== $f"; head -c 2500 $f; done
cd $OUT && tar czf afwd.tgz --exclude=afwd.tgz * && find . -maxdepth 1 -type f ! -name afwd.tgz -delete
