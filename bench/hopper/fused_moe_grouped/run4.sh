#!/usr/bin/env bash
# The run of 2026-12-02 06:14 UTC (docs/benchmarks.md): the config's baseline, two comparisons
# and kopt bench. D/bench_cfg: copies of configs/bench/fused_moe.json, fused_moe_baseline.cu and
# fused_moe_reference.cu; D/run1code: fused_moe_wgmma.cu and wgmma_atomic.json of commit 380d508.
set -u
P="--peaks configs/hardware/gpus.json --seeds 1 --max-time 0.1 --no-store --json --launch-timeout-ms 5000"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$OUT/gpu.txt"
ev() { t0=$(date +%s); timeout 60 "$K" eval "$@" $P > "$OUT/$N.json" 2> "$OUT/$N.err"; echo "$N rc=$? $(( $(date +%s) - t0 )) s"; }
N=baseline ev $D/bench_cfg/fused_moe.json
python3 bench/hopper/summarize_eval.py "$OUT/baseline.json" baseline 2>&1 | tail -24
N=route_agg ev configs/bench/fused_moe.json --candidate $D/wg_rule_agg.json
N=run1_atomic ev configs/bench/fused_moe.json --candidate $D/run1code/wgmma_atomic.json
for n in route_agg run1_atomic; do python3 bench/hopper/summarize_eval.py "$OUT/$n.json" candidate 2>&1 | tail -24 | awk '{print $1, $8}' | tr '\n' ' '; echo; done
t0=$(date +%s)
timeout 150 "$K" bench --suite $D/bench_cfg --ops fused_moe --peaks configs/hardware/gpus.json --no-store > "$OUT/bench.txt" 2> "$OUT/bench.err"
echo "bench rc=$? $(( $(date +%s) - t0 )) s"; tail -15 "$OUT/bench.txt"
