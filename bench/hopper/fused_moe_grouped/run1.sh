#!/usr/bin/env bash
# Used for the run of 2026-12-02 05:58 UTC; wgmma_atomic.json / wgmma_reduce.json are in commit
# 380d508 (since replaced by make_plans.py's plans). D: the folder holding the candidates.
# First GPU run of the grouped MoE candidates (issue 23). Env: K (kopt), OUT, D (candidate dir).
set -u
P="--peaks configs/hardware/gpus.json --seeds 1 --max-time 0.1 --no-store --json --launch-timeout-ms 5000"
C=configs/bench/fused_moe.json
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$OUT/gpu.txt"
W6=s0_t135_h2048_i2048_e8_k2,s5_t4195_h2048_i2048_e8_k2,s8_t1_h2048_i768_e128_k8,s10_t4195_h2048_i768_e128_k8,s15_t520_h4096_i384_e128_k8,s20_t4098_h4096_i4096_e8_k2
ev() {  # name candidate timeout [workloads]
  local t0=$(date +%s)
  timeout "$3" "$K" eval $C --candidate "$2" ${4:+--workloads $4} $P > "$OUT/$1.json" 2> "$OUT/$1.err"
  echo "$1 rc=$? $(( $(date +%s) - t0 )) s"
  python3 bench/hopper/summarize_eval.py "$OUT/$1.json" candidate 2>&1 | tail -30
}
ev wgmma_atomic "$D/wgmma_atomic.json" 100
ev wgmma_reduce "$D/wgmma_reduce.json" 100
ev mmasync "$D/candidate.json" 40 $W6
t0=$(date +%s)
timeout 40 "$K" profile $C --candidate "$D/wgmma_atomic.json" --workloads s12_t15809_h2048_i768_e128_k8 \
  --peaks configs/hardware/gpus.json --no-store > "$OUT/profile.txt" 2> "$OUT/profile.err"
echo "profile rc=$? $(( $(date +%s) - t0 )) s"; head -c 6000 "$OUT/profile.txt"
