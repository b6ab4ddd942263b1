#!/bin/bash
# GPU pack (install as .gpuwork/sdpa/run.sh): does PyTorch SDPA meet unified_attention's tolerance,
# and how fast is the PyTorch path that does? bench/hopper/unified_attention.py --variants none
# --sdpa-check on the weighted d = 128 workloads and two other head sizes (needs torch, cupy and
# triton on the GPU machine). Run from the repository root; writes $OUT/sdpa.jsonl.
W=s20_n1_l6294_hq32_hkv4_d128,s21_n1_l2018_hq32_hkv8_d128,s9_n324_l256_hq16_hkv4_d128,s0_n130_l256_hq10_hkv1_d128,s16_n18_l256_hq28_hkv4_d128,s7_n1_l1144_hq16_hkv2_d128,s23_n1_l145_hq40_hkv8_d128,s3_n1_l16_hq16_hkv1_d128,s24_n1_l5926_hq8_hkv1_d256,s5_n1_l11840_hq16_hkv16_d72
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; python3 -c "import torch; print('torch', torch.__version__)"; } > $OUT/gpu.txt 2>&1
timeout -k 3 ${SDPA_LIMIT:-140} python3 bench/hopper/unified_attention.py --variants none --sdpa-check --only $W > $OUT/sdpa.jsonl 2> $OUT/sdpa.err
echo "rc=$?" >> $OUT/gpu.txt; date -u >> $OUT/gpu.txt
