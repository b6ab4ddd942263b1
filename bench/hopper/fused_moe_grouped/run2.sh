#!/usr/bin/env bash
# Second GPU run (issue 23): three tile-width variants on all 23 workloads, then a
# per-kernel time split with Nsight Systems where the machine has it. Env: K, OUT, D.
set -u
P="--peaks configs/hardware/gpus.json --seeds 1 --max-time 0.1 --no-store --json --launch-timeout-ms 5000"
C=configs/bench/fused_moe.json
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$OUT/gpu.txt"
for v in wg_n256_n256 wg_n128_n128 wg_n256_n128; do
  t0=$(date +%s)
  timeout 60 "$K" eval $C --candidate "$D/$v.json" $P > "$OUT/$v.json" 2> "$OUT/$v.err"
  echo "$v rc=$? $(( $(date +%s) - t0 )) s"
  python3 bench/hopper/summarize_eval.py "$OUT/$v.json" candidate 2>&1 | awk '{print $1, $2, $9, $10, $14}' | tail -24
done
NS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NS:-none}"
if [ -n "$NS" ]; then
  for w in s8_t1_h2048_i768_e128_k8 s3_t1023_h2048_i2048_e8_k2 s19_t8192_h4096_i384_e128_k8 s14_t45936_h2048_i768_e128_k8; do
    timeout 40 "$NS" profile -t cuda -o "$OUT/ns_$w" -f true "$K" eval $C --candidate "$D/wg_n256_n256.json" --workloads $w \
      --peaks configs/hardware/gpus.json --seeds 1 --max-time 0.02 --no-store > /dev/null 2>&1
    timeout 20 "$NS" stats -q --report cuda_gpu_kern_sum --format csv -o "$OUT/ks_$w" "$OUT/ns_$w.nsys-rep" > /dev/null 2>&1
    echo "== $w"; cut -d, -f1-4,9 "$OUT"/ks_${w}*.csv 2>/dev/null | head -12
    rm -f "$OUT/ns_$w.nsys-rep" "$OUT/ns_$w.sqlite"
  done
fi
