#!/bin/bash
# Install as a pack: mkdir -p .gpuwork/lint && cp bench/suite/kb_lint_pack.sh .gpuwork/lint/run.sh
# kopt kb lint --run: group 1 = every reference except the two whose configs take minutes
# (unified-attention-paged-prefill, block-scaled-mm-f16-tma; group 2, LINT2=1).
R=$PWD; S=$R/.gpuwork/suite
B=$(cat "$S/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$S/bundle/lib KOPT_WORKER=$S/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$S/bundle/bin/kopt; L="kb lint --run --json --no-builtin --kb-dir knowledge_base/techniques --kb-dir knowledge_base/references --peaks configs/hardware/gpus.json"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
if [ -z "${LINT2:-}" ]; then
  timeout -k 3 ${LT:-200} $K $L --seeds 2 --max-time 0.1 --only argmax-row-warp --only bias-residual-gelu-epilogue --only causal-conv1d --only decode-attention-split-kv --only flash-decoding-split-k --only fp8-blockscale-moe-gemv-mma --only fp8-dynamic-per-token-quant --only fp8-per-group-quant --only fused-add-rms-norm --only fused-qkv-rope --only fused-rmsnorm-quant --only gated-delta-rule-update --only gelu-bf16-vectorized --only gemm-bf16-mma-sync --only gemm-bf16-tma-ws --only gemm-bf16-wgmma-ws --only gemv-bf16-warp --only histogram-smem-atomics --only inclusive-scan-3phase --only layer-norm --only linear-sigmoid-mul --only moe-align-block-size --only moe-count-and-sort --only moe-grouped-gemm-wgmma --only moe-topk-gating-softmax --only paged-attention-decode --only reshape-and-cache --only rms-norm --only silu-and-mul --only softmax-online-row --only topk-filter --only transpose-smem-padded  > $OUT/kblint1.json 2> $OUT/kblint1.err; echo "lint1 rc=$?" >> $OUT/gpu.txt
else
  timeout -k 3 ${LT:-240} $K $L --seeds 1 --max-time 0.1 --only unified-attention-paged-prefill --only block-scaled-mm-f16-tma > $OUT/kblint2.json 2> $OUT/kblint2.err; echo "lint2 rc=$?" >> $OUT/gpu.txt
fi
date -u >> $OUT/gpu.txt
