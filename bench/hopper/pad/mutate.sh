#!/bin/bash
# Mutation check of the CPU harness (pad_emu.cpp): each mutant of the split kernel must FAIL
# on cases e1 and e6 (builds in /tmp/mutN). Run from anywhere: bash bench/hopper/pad/mutate.sh
cd "$(dirname "$0")/../../.."
i=0
while IFS='|' read -r from to; do
  i=$((i+1)); M=/tmp/mut$i; rm -rf $M; mkdir -p $M/configs/bench $M/bench/hopper/pad
  cp bench/hopper/pad/pad_emu.cpp $M/bench/hopper/pad/
  python3 -c "
import sys; s=open('configs/bench/paged_attention_decode_baseline.cu').read(); a,b=sys.argv[1],sys.argv[2]
assert a in s, a; open('$M/configs/bench/paged_attention_decode_baseline.cu','w').write(s.replace(a,b))" "$from" "$to" || { echo "mutant $i: pattern missing"; continue; }
  nice -n 10 g++ -std=c++20 -O1 -pthread -I bench/hopper/emu -I bench/hopper/pad/stub -DKOPT_EMU $M/bench/hopper/pad/pad_emu.cpp -o $M/emu 2>&1 | grep error | head -3
  nice -n 10 python3 bench/hopper/pad/pad_emu.py bench/hopper/pad/cand_split_bf16.json $M/emu --only e1_ctx37_G1,e6_splits_tiles > $M/log.txt 2>&1
  echo "mutant $i ($from -> $to): rc=$? $(grep -c FAIL $M/log.txt) FAIL lines"
done <<'M'
if (cnt < BS) {|if (false) {
- M) / L;|- M);
accs[(g0 + g) * D + d] * st_a[g0 + g]|accs[(g0 + g) * D + d]
if (tid == 0) counters[pair] = 0;|
s = pos0 + p < n ? s / rsq|s = pos0 + p <= n ? s / rsq
if (valid && pos0 + p < n) {|if (valid && pos0 + p <= n) {
for (int o = P / 2; o > 0; o >>= 1) sum +=|for (int o = P / 4; o > 0; o >>= 1) sum +=
M
