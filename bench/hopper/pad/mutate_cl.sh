#!/bin/bash
# Mutation check of the cluster harness (pad_emu.cpp -DPAD_EMU_CL, stub_cl/emu.h) on the
# PAD_CLUSTER = 1 merge: each mutant must FAIL (or abort) on cases e4 (a cluster of 7 with
# random lengths: empty splits), e6 (clusters of 3 with 2-tile splits) and s5 (a cluster of 8).
# Builds in /tmp/mutclN. Run from anywhere: bash bench/hopper/pad/mutate_cl.sh
cd "$(dirname "$0")/../../.."
i=0
while IFS='|' read -r from to; do
  i=$((i+1)); M=/tmp/mutcl$i; rm -rf $M; mkdir -p $M/configs/bench $M/bench/hopper/pad
  cp bench/hopper/pad/pad_emu.cpp $M/bench/hopper/pad/
  python3 -c "
import sys; s=open('configs/bench/paged_attention_decode_baseline.cu').read(); a,b=sys.argv[1].replace('\\\\n','\n'),sys.argv[2].replace('\\\\n','\n')
assert s.count(a)==1, a; open('$M/configs/bench/paged_attention_decode_baseline.cu','w').write(s.replace(a,b))" "$from" "$to" || { echo "mutant $i: pattern missing"; continue; }
  nice -n 10 g++ -std=c++20 -O1 -pthread -I bench/hopper/pad/stub_cl -I bench/hopper/pad/stub -DKOPT_EMU -DPAD_EMU_CL \
    -DPAD_CLUSTER=1 -DPAD_NT=128 -DPAD_TB=4 $M/bench/hopper/pad/pad_emu.cpp -o $M/emu 2>&1 | grep error | head -3
  nice -n 10 timeout 300 python3 bench/hopper/pad/pad_emu.py bench/hopper/pad/cand_cl128_bf16.json $M/emu \
    --only e4_d72_G3,e6_splits_tiles,s5_s1_l128_h4_kv1_d128 > $M/log.txt 2>&1
  echo "mutant $i ($from -> $to): rc=$? $(grep -c PASS $M/log.txt) PASS lines $(grep -c '^emu:' $M/log.txt) emu aborts"
done <<'M'
const float w = expf(ml[s].x - M) / L;|const float w = expf(ml[s].x - M);
u_end = min(units, (z + 1) * per);|u_end = min(units, (z + 1) * per - 1);
if (s < na) M = fmaxf(M, ml[s].x);|if (s + 1 < na) M = fmaxf(M, ml[s].x);
  pad_cluster_sync();\n#else|#else
      pad_cluster_sync();\n      pad_cluster_sync();\n    }|    }
            accs[(g0 + g) * D + d] = acc[g];  // read by the cluster's merge|            part[((pair * nz + z) * G + g0 + g) * D + d] = acc[g];
a[s] = pad_peer_ld4(acc_a + u * 16, s);|a[s] = pad_peer_ld4(acc_a + u * 16, z);
M
