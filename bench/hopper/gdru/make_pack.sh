#!/bin/bash
# Builds the GPU pack .gpuwork/gdru of the main checkout (or DIR: make_pack.sh [DIR]) from this
# directory; the candidates point at the pack's own copy of the kernel. Run from anywhere.
set -e
H=$(cd "$(dirname "$0")" && pwd); R=$(cd "$H/../../.." && pwd); W=${1:-$R/.gpuwork/gdru}
rm -rf "$W" && mkdir -p "$W"
cp "$H/run.sh" "$H/README.txt" "$H/gdru.spec" "$R/configs/bench/gated_delta_rule_update_baseline.cu" "$W/"
for c in "$H"/cand_*.json; do
  sed 's#"\.\./\.\./\.\./configs/bench/gated_delta_rule_update_baseline\.cu"#"gated_delta_rule_update_baseline.cu"#' "$c" > "$W/$(basename "$c")"
done
chmod +x "$W/run.sh"
touch "$W/READY"
ls "$W"
