#!/bin/bash
# The warp-specialized d = 128 path (UA_WGMMA = 3) against the default (UA_WGMMA = 2) and SDPA in
# the harness, on the 8 d = 128 workloads of unified_attention_gpu.sh; two processes, each under its
# own time limit (a hang of a variant loses only its process). From the pack directory on the GPU:
#   bash unified_attention_ws_gpu.sh SRC_DIR   (SRC_DIR holds the .cu, the .json and the harness)
S=${1:-.}; T0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
H="python3 $S/unified_attention.py --src $S/unified_attention_baseline.cu --config $S/unified_attention.json"
D128=s20_n1_l6294_hq32_hkv4_d128,s21_n1_l2018_hq32_hkv8_d128,s9_n324_l256_hq16_hkv4_d128,s0_n130_l256_hq10_hkv1_d128,s3_n1_l16_hq16_hkv1_d128,s7_n1_l1144_hq16_hkv2_d128,s16_n18_l256_hq28_hkv4_d128,s23_n1_l145_hq40_hkv8_d128
PYTHONUNBUFFERED=1 timeout 75 $H --only $D128 --variants "wg2=UA_WGMMA=2;ws3=UA_WGMMA=3" --out $OUT/hA.json > $OUT/hA.log 2>&1; echo "A rc=$? $(( $(date +%s) - T0 ))s"
PYTHONUNBUFFERED=1 timeout 75 $H --only $D128 --no-sdpa --variants "ws3np=UA_WGMMA=3,UA_PINGPONG=0;ws3n2=UA_WGMMA=3,UA_NS=2;ws3n4=UA_WGMMA=3,UA_NS=4" --out $OUT/hB.json > $OUT/hB.log 2>&1; echo "B rc=$? $(( $(date +%s) - T0 ))s"
grep -h '"variant"' $OUT/hA.log $OUT/hB.log | python3 -c "
import json,sys
for l in sys.stdin:
    try: r=json.loads(l)
    except Exception: continue
    print(r.get('variant'), r.get('workload','')[:22], r.get('worst_over_tol'), r.get('fails'), r.get('ms'), r.get('sol'), r.get('sdpa_ms',''), r.get('error','')[:300])
" | tee $OUT/summary.txt
grep -h summary $OUT/hA.log $OUT/hB.log | tee -a $OUT/summary.txt
tail -n 5 $OUT/hA.log $OUT/hB.log | cut -c1-300
cd $OUT && tar czf results.tgz gpu.txt hA.log hB.log hA.json hB.json summary.txt 2>/dev/null; ls $OUT
