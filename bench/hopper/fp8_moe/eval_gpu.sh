#!/bin/bash
# kopt eval of fp8_blockscale_fused_moe (pack .gpuwork/fp8moe: configs/ with the baseline and seed
# variants, cand_*.json, bundle/, summarize_eval.py), from the repository root on the GPU machine.
# Arguments: none. Results in $OUT/results.tgz.
R=$PWD; W=$R/.gpuwork/fp8moe; C=$W/configs/bench
B=$(cat "$W/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$W/bundle/lib KOPT_WORKER=$W/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$W/bundle/bin/kopt; T0=$(date +%s); P="--peaks $W/configs/hardware/gpus.json"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
CFG=$C/fp8_blockscale_fused_moe.json
E="$K eval $CFG $P --seeds 1 --max-time 0.2 --no-store --json"
SMALL=s2_t1_d7168_i2048_e256,s4_t1_d4096_i1536_e128,s3_t32_d7168_i2048_e256
BIG=s1_t3804_d7168_i2048_e256,s5_t2560_d4096_i1536_e128,s0_t30821_d2048_i768_e128
run() {  # name timeout args...
  local n=$1 t=$2; shift 2
  timeout $t "$@" > $OUT/$n.json 2> $OUT/$n.err; echo "$n rc=$? $(( $(date +%s) - T0 ))s"
  for role in baseline seed candidate; do python3 $W/summarize_eval.py $OUT/$n.json $role 2>/dev/null; done | grep -v "^no " | tee $OUT/$n.txt | cut -c1-200
}
run small 60 $E --workloads $SMALL
for c in $(cd $C && ls cand_*.json 2>/dev/null); do
  run ${c%.json} 30 $K eval $CFG $P --seeds 1 --max-time 0.2 --no-store --json --candidate $C/$c --workloads s2_t1_d7168_i2048_e256,s4_t1_d4096_i1536_e128
done
run big 110 $E --workloads $BIG
tail -n 4 $OUT/*.err | cut -c1-300
cd $OUT && tar czf results.tgz gpu.txt *.json *.txt *.err
