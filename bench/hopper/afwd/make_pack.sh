#!/bin/bash
# Rebuilds the GPU pack .gpuwork/afwd of this checkout (or DIR: make_pack.sh [DIR]) from this
# directory; run from anywhere.
set -e
H=$(cd "$(dirname "$0")" && pwd); R=$(cd "$H/../../.." && pwd); W=${1:-$R/.gpuwork/afwd}
rm -rf $W && mkdir -p $W
cp -r $R/configs $W/configs
# The kernel's one copy is configs/bench/attention_forward_ws.cu (the installed baseline since
# 2026-12-04); the pack's candidates point at the pack's own copy of it.
cp $H/run.sh $W/
cp $R/configs/bench/attention_forward_ws.cu $W/
for c in $H/cand_*.json; do
  sed 's#"\.\./\.\./\.\./configs/bench/attention_forward_ws\.cu"#"attention_forward_ws.cu"#' $c > $W/$(basename $c)
done
cp $H/../summarize_eval.py $W/
python3 - $W <<'PY'
import json, sys
W = sys.argv[1]
d = json.load(open(W + '/configs/bench/attention_forward.json'))
for seed, name in (('cand_Y', 'attention_forward_afwd'), ('cand_W3P', 'attention_forward_w3')):
    d['seed'] = json.load(open(W + '/' + seed + '.json'))
    json.dump(d, open(W + '/configs/bench/' + name + '.json', 'w'), indent=1)
PY
du -sh $W
