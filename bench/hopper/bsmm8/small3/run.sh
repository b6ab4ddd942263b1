#!/bin/bash
# bsmms pack (built by bench/hopper/bsmm8/small3/build.sh into .gpuwork/bsmms): block_scaled_mm
# FP8_SMALL = 4 (one flag per split unit) and 5 (4 in one launch, bsmm_fp8_1l), both UNMEASURED
# before this pack. Run on the device from the repository root with $OUT set (carry .gpuwork/bsmms
# and .gpuwork/suite). Own budget 140 s of limits (each eval's limit is cut to what is left).
#  1) p5_small: baseline (shipped, FP8_SMALL 3) vs seed FP8_SMALL 5 in one eval, s12 s1 s0, 3 seeds
#  2) p4_small: baseline vs seed FP8_SMALL 4, s12 s1 s0, 1 seed
#  3) p5_mid:   baseline vs seed FP8_SMALL 5, s2 s3 s13 s14 s15 (unsplit control), 1 seed
#  4) c5_big:   FP8_SMALL 5 alone (--candidate, main's config) on s4-s9 and s16-s21, 1 seed
# Not in the pack (about 90 s more): s10 s11 s22 s23 with FP8_SMALL 5.
R=$PWD; W=$R/.gpuwork/bsmms; S=$R/.gpuwork/suite; T0=$(date +%s); BUDGET=140
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; P="--peaks $W/configs/hardware/gpus.json --no-store --json --max-time 0.1 --launch-timeout-ms 4000"
el() { echo "$1 t=$(( $(date +%s) - T0 ))s" | tee -a $OUT/log.txt; }
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
ev() {  # name limit config seeds workloads [extra kopt args]
  local L=$(left); local T=$2; [ $T -gt $(( L - 3 )) ] && T=$(( L - 3 ))
  if [ $T -lt 8 ]; then el "$1 SKIPPED (left $L s)"; return; fi
  # own session, killed as a whole afterwards (kopt-worker runs in a process group of its own)
  setsid -w timeout -k 3 $T $K eval $3 $P --seeds $4 --workloads $5 ${6:-} \
    > $OUT/$1.json 2> $OUT/$1.err < /dev/null &
  local sid=$!; wait $sid; local rc=$?; pkill -9 -s $sid 2>/dev/null
  el "$1 rc=$rc (limit $T s)"
  for role in baseline seed candidate; do
    timeout -k 1 5 python3 $R/bench/hopper/summarize_eval.py $OUT/$1.json $role > $OUT/$1_$role.txt 2>&1
  done
  timeout -k 1 5 python3 - $OUT/$1.json > $OUT/$1_cmp.txt 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
if "seed" in r:
    b = {w["workload"]: w for w in r["baseline"]["rows"]}
    for w in r["seed"]["rows"]:
        x = b.get(w["workload"], {})
        print(f'{w["workload"]:24s} base {x.get("status")} {x.get("median_ns", 0) / 1e3:8.1f} us | new {w["status"]} '
              f'{w["median_ns"] / 1e3:8.1f} us abs {w.get("max_abs_err", float("nan")):.2e} | ratio {w["median_ns"] / max(x.get("median_ns", 1), 1):.3f}')
PY
}
C=$W/configs/bench
ev p5_small 25 $C/block_scaled_mm_s5.json 3 s12_m237_n4096_k4096,s1_m1024_n2048_k2048,s0_m349_n2048_k2048
ev p4_small 15 $C/block_scaled_mm_s4.json 1 s12_m237_n4096_k4096,s1_m1024_n2048_k2048,s0_m349_n2048_k2048
ev p5_mid 25 $C/block_scaled_mm_s5.json 1 s2_m4533_n2048_k2048,s3_m6918_n2048_k2048,s13_m3072_n4096_k4096,s14_m4096_n4096_k4096,s15_m8192_n4096_k4096
ev c5_big 70 $R/configs/bench/block_scaled_mm.json 1 s4_m20480_n2048_k2048,s5_m51200_n2048_k2048,s6_m65536_n2048_k2048,s7_m98304_n2048_k2048,s8_m118784_n2048_k2048,s9_m250880_n2048_k2048,s16_m16384_n4096_k4096,s17_m24576_n4096_k4096,s18_m49152_n4096_k4096,s19_m65536_n4096_k4096,s20_m98304_n4096_k4096,s21_m131072_n4096_k4096 "--candidate $W/cand_small5.json"
el "done"
cat $OUT/log.txt; for f in $OUT/*_cmp.txt $OUT/*_seed.txt $OUT/c5_big_candidate.txt; do echo "== $f"; cut -c1-220 $f; done
cd $OUT && tar czf bsmms.tgz *.json *.txt *.err
