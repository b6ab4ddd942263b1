#!/usr/bin/env bash
# Evaluates every knowledge-base reference kernel on a GPU: for each
# knowledge_base/references/*/operator.json, `kopt eval --time-reference` checks
# the optimized kernel (the config's baseline) against the naive reference on
# every workload and times both. Writes OUT/<id>.json (kopt eval --json),
# OUT/<id>.err and OUT/<id>.rc, then prints the summary table of
# bench/summarize_kb_references.py.
#
# Usage (repository root, GPU machine, kopt built or bundled):
#   bench/run_kb_references.sh OUT_DIR [ID...]
#   KOPT=build/bin/kopt bench/run_kb_references.sh /tmp/kbref gemv-bf16-warp
# Environment: KOPT (default build/bin/kopt; kopt-worker must be beside it or
# in $KOPT_WORKER), SEEDS (default 3), EXTRA (more kopt eval options).
# Afterwards: bench/summarize_kb_references.py OUT_DIR --apply writes the
# measured fractions into the kernels' headers and the documents.
set -uo pipefail
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
OUT=$1
shift
: "${KOPT:=build/bin/kopt}"
: "${SEEDS:=3}"
: "${EXTRA:=}"
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1 || true
date -u +%Y-%m-%d > "$OUT/date.txt"

ids=("$@")
if [ ${#ids[@]} -eq 0 ]; then
  for cfg in "$root"/knowledge_base/references/*/operator.json; do
    ids+=("$(basename "$(dirname "$cfg")")")
  done
fi

failed=0
for id in "${ids[@]}"; do
  cfg="$root/knowledge_base/references/$id/operator.json"
  if [ ! -f "$cfg" ]; then
    echo "$id: no $cfg" >&2
    failed=1
    continue
  fi
  echo "== $id" >&2
  # shellcheck disable=SC2086
  "$KOPT" eval "$cfg" --time-reference --seeds "$SEEDS" --json --no-store $EXTRA \
    > "$OUT/$id.json" 2> "$OUT/$id.err"
  rc=$?
  echo "$rc" > "$OUT/$id.rc"
  [ "$rc" -eq 0 ] || { echo "$id: kopt eval exited $rc (see $OUT/$id.err)" >&2; failed=1; }
done
python3 "$root/bench/summarize_kb_references.py" "$OUT"
exit $failed
