#!/bin/bash
# GPU pack for the mla_decode_attention baseline (configs/bench/mla_decode_attention_baseline.cu;
# built into .gpuwork/mla by bench/hopper/mla/make_pack.sh, which copies this checkout's configs
# into the pack so that it does not depend on what the device's tree holds). Run on the device
# from the repository root with OUT set and the kopt bundle at .gpuwork/suite/bundle.
#   base    kopt eval of the config: the baseline (MLA_SPLIT_MAX 8, pull combine in fp32, split
#           P) against the reference on all 3 workloads, 2 seeds: correctness, median, SOL
#   best    cand_best (MLA_SPEC 1 + MLA_PUSH 1 + MLA_XCHG 1): all three changes below together
#   spec    cand_spec (MLA_SPEC 1, plan passes ctx_len): the first KV tile is loaded for the
#           guess o = seq * ctx_len before seq_lens arrives (reloaded when the guess is wrong)
#   push16  cand_push16 (MLA_PUSH 1, MLA_XCHG 1): push with fp16 O / l partials (16 instead of
#           32 DSMEM bytes per 8 columns)
#   push    cand_push (MLA_PUSH 1): partials pushed into the owners' shared memory, one cluster
#           barrier instead of two, combine from local shared memory
#   xchg16  cand_xchg16 (MLA_XCHG 1): pull with fp16 partials
#   split4  cand_split4 (clusters of at most 4: s1 / s2 run 2 tiles per block): the multi-tile
#           path on the GPU, and whether 8 SMs per sequence beat 4
#   psplit0 cand_psplit0 (one bf16 P, one P V MMA instead of two): its error margin against
#           the tolerance and what the second MMA costs
#   split1  cand_split1 (no cluster: one block per (sequence, 16 heads), 32 / 1 / 7 blocks):
#           what the split-KV cluster gains
# Each step under a hard limit; a step that would not fit in 58 s is skipped and logged.
R=$PWD; W=$R/.gpuwork/mla; S=$R/.gpuwork/suite; T0=$(date +%s)
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
ev best 1 8 --candidate $W/cand_best.json
ev spec 1 8 --candidate $W/cand_spec.json
ev push16 1 8 --candidate $W/cand_push16.json
ev push 1 8 --candidate $W/cand_push.json
ev xchg16 1 8 --candidate $W/cand_xchg16.json
ev split4 1 8 --candidate $W/cand_split4.json
ev psplit0 1 8 --candidate $W/cand_psplit0.json
ev split1 1 8 --candidate $W/cand_split1.json
el done
for f in $OUT/*.txt; do echo "== $f"; head -c 2000 $f; done
