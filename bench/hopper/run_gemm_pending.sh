#!/usr/bin/env bash
# GPU runs the gemm helper (issue 23) could not make in its device budget, ~3-4 minutes
# on an H200. From the repository root on the GPU machine, with kopt and kopt-worker built
# or bundled (KOPT, KOPT_WORKER as in .gpuwork/verify.sh):
#   OUT=/tmp/out bash bench/hopper/run_gemm_pending.sh
# 1. the grouped MoE mma.sync candidate (bench/hopper/fused_moe_grouped) on 6 workloads (run on
#    2026-12-02: correct, 18.6 % SOL; the wgmma version is now fused_moe's baseline);
# 2. the TMA GEMM under its knowledge-base config id (measured before only as a candidate);
# 3. block_scaled_mm with EPI_V4 = 1 (vector epilogue for the swapped orientation, never
#    run) against the baseline on the small-m shapes, where the split-K atomics dominate;
# 4. the knowledge-base GEMM references through `kopt kb lint --run` is NOT included: it
#    evaluates every reference (long); run it separately when there is time.
set -u
: "${KOPT:=build/bin/kopt}" "${OUT:=/tmp/gemm_pending}"
mkdir -p "$OUT"
P="--peaks configs/hardware/gpus.json --no-store --json"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$OUT/gpu.txt"
timeout 120 "$KOPT" eval configs/bench/fused_moe.json --candidate bench/hopper/fused_moe_grouped/candidate.json \
  --workloads s0_t135_h2048_i2048_e8_k2,s5_t4195_h2048_i2048_e8_k2,s8_t1_h2048_i768_e128_k8,s10_t4195_h2048_i768_e128_k8,s15_t520_h4096_i384_e128_k8,s20_t4098_h4096_i4096_e8_k2 \
  --seeds 1 --max-time 0.1 $P > "$OUT/moe.json" 2> "$OUT/moe.err"; echo "moe rc=$?"
python3 bench/hopper/summarize_eval.py "$OUT/moe.json" candidate
timeout 120 "$KOPT" eval knowledge_base/references/gemm-bf16-tma-ws/operator.json --seeds 3 $P \
  > "$OUT/gemm_tma.json" 2> "$OUT/gemm_tma.err"; echo "gemm-bf16-tma-ws rc=$?"
python3 bench/hopper/summarize_eval.py "$OUT/gemm_tma.json"
W=s0_m349_n2048_k2048,s1_m1024_n2048_k2048,s12_m237_n4096_k4096,s13_m3072_n4096_k4096
timeout 90 "$KOPT" eval configs/bench/block_scaled_mm.json --candidate bench/hopper/bsmm_epi_v4.json --workloads $W \
  --seeds 1 --max-time 0.1 $P > "$OUT/bsmm_epi.json" 2> "$OUT/bsmm_epi.err"; echo "bsmm EPI_V4 rc=$?"
python3 bench/hopper/summarize_eval.py "$OUT/bsmm_epi.json" baseline
python3 bench/hopper/summarize_eval.py "$OUT/bsmm_epi.json" candidate
