#!/bin/bash
# The unified_attention baseline on the H200 (issue 23), about 5 minutes of device time.
# 1) harness on the d = 128 workloads: fa2 (default, mma.sync), wg (UA_WGMMA=1), wgswap (V descriptor probe), wgnosplit (ablation)
# 2) kopt eval of the config's baseline (default UA_WGMMA=0) and of the wgmma candidate; 3) harness on the other head sizes;
# 4) kopt eval of attention_forward's baseline on 5 of its shapes; 5) kopt profile.
# From the repository root on the GPU machine, with kopt and kopt-worker bundled in .gpuwork/bundle
# (as .gpuwork/verify.sh does): bash bench/hopper/unified_attention_gpu.sh [CFG_DIR] [HARNESS_DIR]
# CFG_DIR holds unified_attention.json and its .cu files (default configs/bench), HARNESS_DIR this
# script's Python files and unified_attention_wgmma.json (default bench/hopper).
R=$PWD; G=$R/.gpuwork; C=${1:-$R/configs/bench}; A=${2:-$R/bench/hopper}
# kopt's compiled-in source directory (recorded by bench/gpu_bundle.sh) must name this checkout.
B=$(cat "$G/bundle/source_dir" 2>/dev/null); [ -n "$B" ] && [ "$R" != "$B" ] && [ ! -e "$B" ] && mkdir -p "$(dirname "$B")" && ln -sfn "$R" "$B"
export LD_LIBRARY_PATH=$G/bundle/lib KOPT_WORKER=$G/bundle/bin/kopt-worker KOPT_CACHE_DIR=/tmp/kopt-cache KOPT_REQUIRE_GPU=1
K=$G/bundle/bin/kopt; T0=$(date +%s); H="python3 $A/unified_attention.py --src $C/unified_attention_baseline.cu --config $C/unified_attention.json"
E="$K eval $C/unified_attention.json --peaks $R/configs/hardware/gpus.json --max-time 0.3 --no-store --json"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $OUT/gpu.txt 2>&1
nvcc -cubin -gencode=arch=compute_90a,code=sm_90a -DUA_WGMMA=1 -o /tmp/k.cubin $C/unified_attention_baseline.cu 2>/dev/null && cuobjdump --dump-sass /tmp/k.cubin | grep -oE '(HGMMA|HMMA|LDGSTS|LDSM)[.A-Z0-9x]*' | sort | uniq -c >> $OUT/gpu.txt; cat $OUT/gpu.txt
D128=s20_n1_l6294_hq32_hkv4_d128,s21_n1_l2018_hq32_hkv8_d128,s13_n3095_l256_hq16_hkv4_d128,s9_n324_l256_hq16_hkv4_d128,s0_n130_l256_hq10_hkv1_d128,s3_n1_l16_hq16_hkv1_d128,s7_n1_l1144_hq16_hkv2_d128,s16_n18_l256_hq28_hkv4_d128,s23_n1_l145_hq40_hkv8_d128
PYTHONUNBUFFERED=1 timeout 100 $H --only $D128 --variants "fa2=;wg=UA_WGMMA=1;wgswap=UA_WGMMA=1,UA_V_SWAP=1;wgnosplit=UA_WGMMA=1,UA_P_SPLIT=0" --no-check wgnosplit --out $OUT/h128.json > $OUT/h128.log 2>&1; echo "h128 rc=$? $(( $(date +%s) - T0 ))s"
cut -c1-250 $OUT/h128.log
timeout 100 $E --seeds 2 > $OUT/eval.json 2> $OUT/eval.err; echo "eval rc=$? $(( $(date +%s) - T0 ))s"
python3 $A/summarize_eval.py $OUT/eval.json 2>&1 | tee $OUT/eval.txt | cut -c1-150
timeout 60 $E --seeds 1 --candidate $A/unified_attention_wgmma.json --workloads $(echo $D128 | tr , ' ') > $OUT/eval_wg.json 2> $OUT/eval_wg.err; echo "eval_wg rc=$? $(( $(date +%s) - T0 ))s"
python3 $A/summarize_eval.py $OUT/eval_wg.json candidate 2>&1 | tee $OUT/eval_wg.txt | cut -c1-150
OTH=$(python3 -c "import json;print(','.join(w['id'] for w in json.load(open('$C/unified_attention.json'))['workloads'] if w['axes']['head_size']!=128))")
el=$(( $(date +%s) - T0 )); PYTHONUNBUFFERED=1 timeout $(( 265 - el )) $H --only $OTH --variants "fa2=" --out $OUT/hoth.json > $OUT/hoth.log 2>&1; echo "hoth rc=$? $(( $(date +%s) - T0 ))s"
cut -c1-250 $OUT/hoth.log
el=$(( $(date +%s) - T0 ))
AF="s11_l276_h4_d72 s14_l2024_h4_d72 s4_l8136_h16_d72 s9_l16742_h32_d128 s20_l1_h8_d128"
if [ $el -lt 250 ]; then timeout $((280 - el)) $K eval $C/attention_forward.json --peaks $R/configs/hardware/gpus.json --max-time 0.2 --seeds 1 --no-store --json --workloads $AF > $OUT/eval_af.json 2> $OUT/eval_af.err; echo "eval_af rc=$?"; python3 $A/summarize_eval.py $OUT/eval_af.json 2>&1 | tee $OUT/eval_af.txt | cut -c1-150; fi
el=$(( $(date +%s) - T0 ))
if [ $el -lt 265 ]; then timeout $((295 - el)) $K profile $C/unified_attention.json --peaks $R/configs/hardware/gpus.json --workloads s20_n1_l6294_hq32_hkv4_d128 --no-store > $OUT/profile.txt 2>&1; echo "profile rc=$?"; cut -c1-220 $OUT/profile.txt | tail -30; fi
cd $OUT && tar czf attn2.tgz *.txt *.json *.log *.err 2>/dev/null; ls
