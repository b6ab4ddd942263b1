#!/usr/bin/env bash
# Run at 06:08 UTC (three variants, every workload a hang: setmaxnreg 64/224) and, with the
# fourth variant, at 06:11 UTC. D: the folder holding make_plans.py's candidates.
# Second and third GPU runs (issue 23): four tile-width variants on all 23 workloads, then a
# per-kernel time split with Nsight Systems where the machine has it. Env: K, OUT, D.
set -u
P="--peaks configs/hardware/gpus.json --seeds 1 --max-time 0.1 --no-store --json --launch-timeout-ms 5000"
C=configs/bench/fused_moe.json
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$OUT/gpu.txt"
for v in wg_n256_n256 wg_n128_n128 wg_n256_n128 wg_n128_n256; do
  t0=$(date +%s)
  timeout 60 "$K" eval $C --candidate "$D/$v.json" $P > "$OUT/$v.json" 2> "$OUT/$v.err"
  echo "$v rc=$? $(( $(date +%s) - t0 )) s"
  python3 bench/hopper/summarize_eval.py "$OUT/$v.json" candidate 2>&1 | tail -24
done
