#!/bin/bash
# Second GPU pack (mla2) for the mla_decode_attention baseline (configs/bench/mla_decode_attention_baseline.cu;
# built into .gpuwork/mla2 by bench/hopper/mla/make_pack.sh .gpuwork/mla2 run2.sh, which copies this checkout's configs
# into the pack so that it does not depend on what the device's tree holds). Run on the device
# from the repository root with OUT set and the kopt bundle at .gpuwork/suite/bundle.
#   base    kopt eval of the config (its default since the first pack: MLA_PUSH 1, MLA_XCHG 1,
#           MLA_SPEC 1; s0 / s1 / s2 7.9 / 6.2 / 6.4 us on 2026-12-04 01:47), 2 seeds: the same
#           run's reference point
#   ilp     cand_ilp: the default + MLA_ILP 1 (the MMA loops reordered: Q K^T fragments loaded
#           one k16 step ahead with two accumulator sets, P V's 8 V fragments of a k16 step
#           loaded first, then the hi and lo MMA passes; 186 registers, 0 spills)
#   ilp_bulk cand_ilp_bulk: ilp + MLA_BULK 1 (Q and KV rows by cp.async.bulk, one 1152-byte copy
#           per row from warp 0, completing on an mbarrier, instead of 27 16-byte cp.async per
#           thread; 180 registers)
#   bulk    cand_bulk: the default + MLA_BULK 1 (154 registers)
#   ilp_p0  cand_ilp_psplit0: ilp with one bf16 P (what the lo pass costs once the loop is
#           reordered; one bf16 P reached 0.70 of the tolerance on s0 in the emulator)
# Each step under a hard limit; a step that would not fit in 58 s is skipped and logged.
R=$PWD; W=$R/.gpuwork/mla2; S=$R/.gpuwork/suite; T0=$(date +%s)
: "${OUT:?set OUT to the output folder}"
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; CFG=$W/configs/bench/mla_decode_attention.json
P="--peaks $W/configs/hardware/gpus.json --no-store --json --max-time 0.2 --launch-timeout-ms 2000"
el() { echo "$1 t=$(( $(date +%s) - T0 ))s" | tee -a $OUT/log.txt; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
ev() {  # name seeds limit [--candidate FILE]
  local n=$1 seeds=$2 t=$3; shift 3
  local left=$(( 58 - ($(date +%s) - T0) ))
  [ $t -gt $left ] && t=$left
  if [ $t -lt 6 ]; then el "$n SKIPPED (left $left s)"; return; fi
  # its own session, killed as a whole afterwards: kopt starts kopt-worker in a process group
  # of its own, which a timeout of kopt alone would leave running on the GPU
  setsid -w timeout -k 2 $t $K eval $CFG "$@" $P --seeds $seeds > $OUT/$n.json 2> $OUT/$n.err < /dev/null &
  local sid=$!; wait $sid; local rc=$?
  pkill -9 -s $sid 2>/dev/null
  local role=baseline; [ $# -gt 0 ] && role=candidate
  timeout 5 python3 $W/summarize_eval.py $OUT/$n.json $role > $OUT/$n.txt 2>&1 < /dev/null
  el "$n rc=$rc (limit $t s): $(sed -n 2p $OUT/$n.txt | cut -c1-120)"
}
ev base 2 16
ev ilp 2 12 --candidate $W/cand_ilp.json
ev ilp_bulk 2 12 --candidate $W/cand_ilp_bulk.json
ev bulk 1 10 --candidate $W/cand_bulk.json
ev ilp_p0 1 8 --candidate $W/cand_ilp_psplit0.json
el done
for f in $OUT/*.txt; do echo "== $f"; head -c 2000 $f; done
