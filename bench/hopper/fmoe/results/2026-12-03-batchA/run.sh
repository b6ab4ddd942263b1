#!/bin/bash
# fmoe (issue 23): the spill-free TMA+skip+split draft (MAPS_SMEM=0, the plan measured 12:44),
# then the same with the tensor maps built in shared memory (MAPS_SMEM=1), then + red.v4 in gemm2's
# atomic epilogue (RED_V4=1), then main's baseline if time is left. All 23 workloads, --seeds 1
# --max-time 0.3. Hard cap 145 s.
R=$PWD; W=$R/.gpuwork/fmoe; S=$R/.gpuwork/suite; T0=$(date +%s)
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; P="--peaks $W/configs/hardware/gpus.json --seeds 1 --no-store --json --launch-timeout-ms 5000"
O=$OUT/fmoe; mkdir -p $O; C=$W/configs/bench/fused_moe.json
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } > $O/gpu.txt 2>&1; cat $O/gpu.txt
ev() { local n=$1 t=$2 mt=$3 role=$4; shift 4; timeout $t $K eval "$@" $P --max-time $mt > $O/$n.json 2> $O/$n.err; echo "$n rc=$? $(( $(date +%s) - T0 ))s" | tee -a $O/gpu.txt; timeout 10 python3 $W/summarize_eval.py $O/$n.json $role > $O/$n.txt 2>&1; cut -c1-150 $O/$n.txt | head -26; }
ev tss 50 0.3 candidate $C --candidate $W/cand/v_tma_skip_split.json
ev smem 45 0.3 candidate $C --candidate $W/cand/v_tss_smem.json
ev red4 40 0.3 candidate $C --candidate $W/cand/v_tss_smem_red4.json
L=$(( 140 - $(date +%s) + T0 ))
[ $L -gt 15 ] && ev base $L 0.2 baseline $C
date -u >> $O/gpu.txt; tail -n 3 $O/*.err | cut -c1-200
cd $OUT && tar czf fmoe.tgz fmoe
