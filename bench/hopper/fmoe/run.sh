#!/bin/bash
# fmoe (issue 23): the current fused_moe baseline and the TMA / skip / split-K variants, all 23 workloads.
R=$PWD; W=$R/.gpuwork/fmoe; C=$W/configs/bench; M=$W/configs_main/bench
B=$(cat "$W/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$W/bundle/lib KOPT_WORKER=$W/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$W/bundle/bin/kopt; T0=$(date +%s); P="--peaks $W/configs/hardware/gpus.json --seeds 1 --no-store --json --launch-timeout-ms 5000"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
ev() { local n=$1 t=$2 mt=$3; shift 3; timeout $t $K eval "$@" $P --max-time $mt > $OUT/$n.json 2> $OUT/$n.err; echo "$n rc=$? $(( $(date +%s) - T0 ))s"; }
ev base 45 0.3 $M/fused_moe.json
python3 $W/summarize_eval.py $OUT/base.json baseline > $OUT/base.txt 2>&1; cut -c1-130 $OUT/base.txt
ev tss 45 0.3 $C/fused_moe.json --candidate $C/v_tma_skip_split.json
python3 $W/summarize_eval.py $OUT/tss.json candidate > $OUT/tss.txt 2>&1; cut -c1-130 $OUT/tss.txt
for v in v_tma_skip v_tma; do
  [ $(( $(date +%s) - T0 )) -gt ${BUDGET:-95} ] && { echo "skip $v (time)"; continue; }
  ev $v 35 0.15 $C/fused_moe.json --candidate $C/$v.json
  python3 $W/summarize_eval.py $OUT/$v.json candidate > $OUT/$v.txt 2>&1
  awk 'NR>2{split($1,a,"_"); print a[1], $2, $8, $15}' $OUT/$v.txt | tr '\n' ';' ; head -2 $OUT/$v.txt | tail -1; echo
done
tail -n 2 $OUT/*.err | cut -c1-300
cd $OUT && tar czf results.tgz gpu.txt *.json *.txt *.err && ls -la results.tgz
