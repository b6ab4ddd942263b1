#!/bin/bash
# The suite figure of the tenth session, composed from measured rows (run from the repository root).
R=bench/suite/results/2026-12-04; R2=bench/suite/results/2026-12-04-b; C5=$R2/call5
python3 bench/summarize_bench.py /tmp/empty configs/bench --fallback $R/fallback_20261204.json \
  --eval-file topk_filter=bench/hopper/topk/results/2026-12-03-b/topk.json \
  --eval-file fused_moe=bench/hopper/fmoe/results/2026-12-03-batchA/smem.json:candidate \
  --eval-file fp8_blockscale_fused_moe=bench/suite/results/2026-12-03-c/fp8_wwall_gv8.json:candidate \
  --eval-file chunk_delta_rule_output=bench/hopper/delta/results/2026-12-03-lead/chunk_delta_rule_output.json \
  --eval-file chunk_gated_delta_rule_state=bench/hopper/delta/results/2026-12-03-lead/chunk_gated_delta_rule_state.json \
  --eval-file mla_decode_attention=$R/mla_best.json:baseline \
  --eval-file unified_attention=$C5/ua_dis.json:baseline \
  --eval-file block_scaled_mm=$R2/bsmm3/bsmm3.json:candidate \
  --eval-file attention_forward=$R2/afwd_X_all.json:candidate \
  --eval-file paged_attention_decode=$C5/pad3.json:baseline \
  --eval-file paged_attention_decode_fp16=$C5/pad16_3.json:baseline \
  --eval-file moe_topk_gating_softmax=$C5/moe3.json:baseline \
  --eval-file gated_delta_rule_update=$C5/gdru.json:baseline
