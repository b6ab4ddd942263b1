#!/bin/bash
# fmoe (issue 23): the new default (TMA + skip + split) first, then the current main baseline if
# time is left. Every file is written straight into $OUT (at most 8 come back).
R=$PWD; W=$R/.gpuwork/fmoe; C=$W/configs/bench; M=$W/configs_main/bench
B=$(cat "$W/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$W/bundle/lib KOPT_WORKER=$W/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$W/bundle/bin/kopt; T0=$(date +%s); P="--peaks $W/configs/hardware/gpus.json --seeds 1 --no-store --json --launch-timeout-ms 5000"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
ev() { local n=$1 t=$2 mt=$3; shift 3; timeout $t $K eval "$@" $P --max-time $mt > $OUT/$n.json 2> $OUT/$n.err; echo "$n rc=$? $(( $(date +%s) - T0 ))s"; }
ev tss ${T1:-38} 0.3 $C/fused_moe.json --candidate $C/v_tma_skip_split.json
python3 $W/summarize_eval.py $OUT/tss.json candidate > $OUT/tss.txt 2>&1; cut -c1-150 $OUT/tss.txt
L=$(( ${LIMIT:-44} - $(date +%s) + T0 ))
[ $L -gt 8 ] && ev base $L 0.2 $M/fused_moe.json && { python3 $W/summarize_eval.py $OUT/base.json baseline > $OUT/base.txt 2>&1; cut -c1-150 $OUT/base.txt; }
tail -n 2 $OUT/*.err | cut -c1-200
