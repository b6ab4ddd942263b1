#!/bin/bash
# The heavy operators of the suite on the H200 (issue 23) in one bounded command, after the
# light ones (bench/gpu_verify_extra.sh): the unified_attention run (bench/hopper/
# unified_attention_gpu.sh: harness against SDPA, kopt eval of the baseline on all 25 workloads),
# then `kopt bench` of attention_forward, block_scaled_mm and fp8_blockscale_fused_moe (and
# fused_moe when KOPT_HEAVY_MOE=1), then a launch-bound probe (kopt profile of vector_add's
# smallest shape). Everything lands in $OUT/heavy.tgz plus summary.txt (the run tool returns
# at most 8 files). Budget: KOPT_HEAVY_BUDGET_S (default 520 s).
#   bash bench/hopper/heavy_suite_gpu.sh      (from the repository root, bundle in .gpuwork/bundle)
R=$PWD; G=$R/.gpuwork; T0=$(date +%s); budget=${KOPT_HEAVY_BUDGET_S:-520}
FINAL=$OUT; W=/tmp/heavy_out; rm -rf $W; mkdir -p $W/ua $W/suite
S=$FINAL/summary.txt
B=$(cat "$G/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$G/bundle/lib KOPT_WORKER=$G/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$G/bundle/bin/kopt
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; git rev-parse --short HEAD; } > $S 2>&1
echo "== unified_attention" >> $S
OUT=$W/ua timeout $(( budget - 200 )) bash bench/hopper/unified_attention_gpu.sh >> $S 2>&1
echo "ua rc=$? $(( $(date +%s) - T0 ))s" >> $S
ops="attention_forward fp8_blockscale_fused_moe block_scaled_mm"
[ "${KOPT_HEAVY_MOE:-0}" = 1 ] && ops="fused_moe $ops"
for op in $ops; do
  rem=$(( budget - 25 - ($(date +%s) - T0) ))
  if [ $rem -lt 20 ]; then echo "$op: not run: out of time" >> $S; continue; fi
  lim=$(( rem < 120 ? rem : 120 ))
  timeout $lim $K bench --ops $op --json --no-store --seeds 1 --max-time 0.2 --peaks configs/hardware/gpus.json > $W/suite/$op.json 2> $W/suite/$op.err
  echo "$op rc=$? $(( $(date +%s) - T0 ))s" >> $S
done
rem=$(( budget - ($(date +%s) - T0) ))
if [ $rem -gt 20 ]; then
  timeout 20 $K profile configs/examples/vector_add.json --peaks configs/hardware/gpus.json --workloads n1000 --no-store > $W/profile_vadd.txt 2>&1
  echo "profile vadd rc=$?" >> $S; grep -iE "launch|diagnosis|n1000" $W/profile_vadd.txt | head -8 >> $S
fi
python3 bench/summarize_bench.py $W/suite >> $S 2>&1
echo "total $(( $(date +%s) - T0 ))s" >> $S
tar czf $FINAL/heavy.tgz -C $W . 2>/dev/null
cat $S | cut -c1-220
