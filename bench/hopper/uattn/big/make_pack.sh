#!/bin/bash
# Builds the uabig GPU pack into ROOT/.gpuwork/uabig (ROOT: the checkout the device copies,
# default the current directory) from this checkout: run.sh, README.txt, the candidates
# (source_file rewritten to the pack's own copy of configs/), configs/, summarize_eval.py.
#   bash bench/hopper/uattn/big/make_pack.sh [ROOT]
set -eu
H=$(cd "$(dirname "$0")" && pwd); T=$(git -C "$H" rev-parse --show-toplevel); ROOT=${1:-$PWD}
P=$ROOT/.gpuwork/uabig
rm -rf "$P"; mkdir -p "$P"
cp "$H/run.sh" "$H/README.txt" "$T/bench/hopper/summarize_eval.py" "$P/"
cp -r "$T/configs" "$P/configs"
for c in "$H"/cand_*.json; do
  sed 's#"\.\./\.\./\.\./\.\./configs/bench/#"configs/bench/#' "$c" > "$P/$(basename "$c")"
done
grep -h '"source_file"' "$P"/cand_*.json | sort | uniq -c
ls "$P"
