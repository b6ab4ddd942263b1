#!/bin/bash
# Builds the GPU pack .gpuwork/moetopk of the main checkout (or DIR: make_pack.sh [DIR]) from this
# directory: run.sh, README.txt, the spec, the kernel and its candidates (source_file is relative
# to the candidate, so the copies beside each other resolve in the pack). Run from anywhere.
set -e
H=$(cd "$(dirname "$0")" && pwd); R=$(cd "$H/../../.." && pwd); W=${1:-$R/.gpuwork/moetopk}
rm -rf "$W" && mkdir -p "$W"
# The kernel's one copy is configs/bench/moe_topk_gating_softmax_seg.cu (the installed baseline
# since 2026-12-04); the pack's candidates point at the pack's own copy of it.
cp "$H/run.sh" "$H/README.txt" "$H/moetopk.spec" "$R/configs/bench/moe_topk_gating_softmax_seg.cu" "$W/"
for c in "$H"/cand_*.json; do
  sed 's#"\.\./\.\./\.\./configs/bench/moe_topk_gating_softmax_seg\.cu"#"moe_topk_gating_softmax_seg.cu"#' "$c" > "$W/$(basename "$c")"
done
chmod +x "$W/run.sh"
touch "$W/READY"
ls "$W"
