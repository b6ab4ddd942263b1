#!/bin/bash
# Builds the GPU pack .gpuwork/moetopk of the main checkout (or DIR: make_pack.sh [DIR]) from this
# directory: run.sh, README.txt, the spec, the kernel and its candidates (source_file is relative
# to the candidate, so the copies beside each other resolve in the pack). Run from anywhere.
set -e
H=$(cd "$(dirname "$0")" && pwd); R=$(cd "$H/../../.." && pwd); W=${1:-$R/.gpuwork/moetopk}
rm -rf "$W" && mkdir -p "$W"
cp "$H/run.sh" "$H/README.txt" "$H/moetopk.spec" "$H/moe_topk_seg.cu" "$H"/cand_*.json "$W/"
chmod +x "$W/run.sh"
touch "$W/READY"
ls "$W"
