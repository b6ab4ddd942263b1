#!/bin/bash
# fp8moe pack A (2026-12-03): kopt eval of candidates of fp8_blockscale_fused_moe
# (configs/bench/cand_*.json, made by bench/hopper/fp8_moe/make_cands.py on branch h/fp8moe).
#  w8   : GV_WARPS 8 (GEMV CTAs of 8 warps), all 6 workloads
#  ww   : TC_FP8 1 + TC2_V 2 + TC2_STAGES 4 (both GEMMs of the t >= 64 path on wgmma), all 6
#  ww8  : ww + GV_WARPS 8, all 6
#  wwp2 : ww + WG_PROMO 2 (fresh fp8 temp every 64 k instead of 128: precision fallback), s1
#  wwo  : ww + WG_OVL 1 (two fp8 temporaries in fmoe_tc1: MMAs of the next stage overlap the scaling), s1 s5 s0
#  wwt  : ww with TC2_TM 128 (fmoe_tc2 tiles of 128 slot rows), TC2_STAGES 3, s1 s5 s0
#  wwall: ww + WG_OVL 1 + TC2_TM 128 (TC2_STAGES 3) + Y16 1 (per-slot y as f16), s1 s5 s0
#  base : the shipped baseline, s1 s5 s0 (same-session reference)
# Expected about 50 s (an eval of 3 big workloads took 3.7 s on 2026-12-03); timeouts sum to 120 s.
R=$PWD; W=$R/.gpuwork/fp8moe; S=$R/.gpuwork/suite; C=$W/configs/bench
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; P="--peaks $W/configs/hardware/gpus.json --seeds 1 --no-store --json --max-time 0.2 --launch-timeout-ms 4000"
CFG=$C/fp8_blockscale_fused_moe.json
BIG=s1_t3804_d7168_i2048_e256,s5_t2560_d4096_i1536_e128,s0_t30821_d2048_i768_e128
S1=s1_t3804_d7168_i2048_e256
T0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
run() {  # name timeout [workloads]
  timeout $2 $K eval $CFG --candidate $C/cand_$1.json $P ${3:+--workloads $3} > $OUT/$1.json 2> $OUT/$1.err
  echo "$1 rc=$? t=$(( $(date +%s) - T0 ))s" | tee -a $OUT/log.txt
  timeout 5 python3 $R/bench/hopper/summarize_eval.py $OUT/$1.json candidate > $OUT/$1.txt 2>&1; cut -c1-160 $OUT/$1.txt
}
run w8 18
run ww 22
run ww8 18
run wwp2 10 $S1
run wwo 12 $BIG
run wwt 12 $BIG
run wwall 15 $BIG
timeout 13 $K eval $CFG $P --workloads $BIG > $OUT/base.json 2> $OUT/base.err; echo "base rc=$? t=$(( $(date +%s) - T0 ))s" | tee -a $OUT/log.txt
timeout 5 python3 $R/bench/hopper/summarize_eval.py $OUT/base.json baseline > $OUT/base.txt 2>&1; cut -c1-160 $OUT/base.txt
cd $OUT && tar czf fp8moe.tgz *
