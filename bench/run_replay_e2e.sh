#!/usr/bin/env bash
# End-to-end proof of the campaign loop on a GPU with the replay corpus
# (tests/data/replay/<op>/): for each operator
#   run A: the campaign from a fresh store to completion;
#   run B: the same campaign in another fresh store, killed with SIGKILL
#          (kopt and its worker, like a machine failure) once about half of
#          run A's evaluations are stored, then resumed to completion;
# then bench/replay_e2e_report.py says for every answer what became of it
# and why it lost, checks the statuses against expected.json, checks that
# the winner is the expected answer and the fastest correct candidate, and
# that both runs reached the same winner (same source hash and plan) over
# the same candidates.
#
# Usage: bench/run_replay_e2e.sh OUT_DIR [options]
#   --bin DIR             where kopt and kopt-worker are (default: build/bin)
#   --ops "A B"           operators (default: "rmsnorm vector_add")
#   --kill-after N        kill run B after N stored evaluations (default: half of run A's)
#   --launch-timeout-ms N a launch running longer is a hang (default 3000; the corpus has hangs)
#   --allow-other-winner  a winner other than the manifest's is a warning, not a failure
#   --keep-going          run every operator even when one fails
#   --run-args "ARGS"     more `kopt run` options for every run (e.g. "--min-time 0.05 --max-time 0.5")
# Exit: 0 all checks passed; 1 a check failed; 2 usage or setup error.
# Needs: an NVIDIA GPU, prebuilt kopt + kopt-worker, python3 (standard library only).
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
out=""
bin="$here/build/bin"
ops="rmsnorm vector_add"
kill_after=""
launch_timeout=3000
allow=""
keep_going=0
run_args=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --kill-after) kill_after=$2; shift 2 ;;
    --launch-timeout-ms) launch_timeout=$2; shift 2 ;;
    --allow-other-winner) allow="--allow-other-winner"; shift ;;
    --keep-going) keep_going=1; shift ;;
    --run-args) run_args=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) [ -z "$out" ] && out=$1 || { echo "one OUT_DIR only" >&2; exit 2; }; shift ;;
  esac
done
[ -n "$out" ] || { echo "usage: $0 OUT_DIR [--bin DIR] [--ops \"rmsnorm vector_add\"] [--kill-after N]" >&2; exit 2; }
kopt="$bin/kopt"
[ -x "$kopt" ] && [ -x "$bin/kopt-worker" ] || { echo "no kopt and kopt-worker in $bin (use --bin)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Run B in its own process group, so that one signal reaches kopt and its compile children.
setsid=$(command -v setsid || true)
cd "$here"

count_evaluated() {  # stored evaluations ("evaluated" events) in a store, 0 if none yet
  python3 - "$1" <<'EOF'
import sqlite3, sys
try:
    db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True, timeout=5)
    print(db.execute("SELECT count(*) FROM events WHERE kind = 'evaluated'").fetchone()[0])
except Exception:
    print(0)
EOF
}

child_pids() {  # direct children of a process (no pgrep needed)
  python3 - "$1" <<'PY'
import os, sys
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            stat = open(f"/proc/{p}/stat").read()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2:].split()[1] == sys.argv[1]:
            print(p)
PY
}

run_campaign() {  # DB LOG JSON EXPORT: one `kopt run` in the foreground
  local db=$1 log=$2 js=$3 exp=$4
  KOPT_CACHE_DIR="$(dirname "$db")/cubin-cache-$(basename "$db" .db)" \
    "$kopt" --db "$db" run "$config" --llm-config "$llm" --launch-timeout-ms "$launch_timeout" \
    --export "$exp" $run_args --json >"$js" 2>>"$log"
}

status=0
for op in $ops; do
  manifest="tests/data/replay/$op/expected.json"
  config=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['operator_config'])" "$manifest") || exit 2
  llm=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['llm_config'])" "$manifest") || exit 2
  d="$out/$op"
  rm -rf "$d"
  mkdir -p "$d"
  echo "=== $op: $config with $llm"

  # Run A: uninterrupted.
  t0=$(date +%s)
  run_campaign "$d/a.db" "$d/a.log" "$d/a.json" "$d/a-export"
  rc=$?
  echo "run A: exit $rc in $(( $(date +%s) - t0 )) s; $(count_evaluated "$d/a.db") evaluations stored"
  if [ $rc -ne 0 ]; then
    echo "run A failed (exit $rc); last lines of $d/a.log:"; tail -20 "$d/a.log"; status=1
    [ $keep_going -eq 1 ] && continue || break
  fi
  total=$(count_evaluated "$d/a.db")
  n=${kill_after:-$(( total / 2 ))}
  [ "$n" -ge 1 ] || n=1

  # Run B: killed once N evaluations are stored, then resumed.
  t0=$(date +%s)
  KOPT_CACHE_DIR="$d/cubin-cache-b" $setsid "$kopt" --db "$d/b.db" run "$config" --llm-config "$llm" \
    --launch-timeout-ms "$launch_timeout" $run_args --json >"$d/b-killed.json" 2>"$d/b.log" &
  pid=$!
  killed=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$(count_evaluated "$d/b.db")" -ge "$n" ]; then
      # kopt and its worker (which runs in its own process group), as a machine failure would.
      children=$(child_pids "$pid")
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"
      for c in $children; do kill -KILL -- "-$c" 2>/dev/null || kill -KILL "$c" 2>/dev/null; done
      killed=1
      break
    fi
    sleep 0.2
  done
  wait "$pid" 2>/dev/null
  for c in ${children:-}; do while kill -0 "$c" 2>/dev/null; do sleep 0.1; done; done
  at=$(count_evaluated "$d/b.db")
  if [ $killed -ne 1 ]; then
    echo "run B ended before $n evaluations were stored ($at): nothing was killed; use --kill-after"; status=1
    [ $keep_going -eq 1 ] && continue || break
  fi
  echo "run B: killed with SIGKILL after $at stored evaluations ($(( $(date +%s) - t0 )) s); resuming"
  echo "--- killed here ---" >>"$d/b.log"
  run_campaign "$d/b.db" "$d/b.log" "$d/b.json" "$d/b-export"
  rc=$?
  echo "run B resumed: exit $rc; $(grep -h 'resuming\|skipped' "$d/b.log" | tr '\n' ' ')"
  if [ $rc -ne 0 ]; then
    echo "resumed run B failed (exit $rc); last lines of $d/b.log:"; tail -20 "$d/b.log"; status=1
  fi

  # What every answer became, and the checks.
  "$kopt" --db "$d/a.db" log 1 >"$d/a-kopt-log.txt" 2>&1
  "$kopt" --db "$d/a.db" show campaign 1 >"$d/a-kopt-show.txt" 2>&1
  python3 bench/replay_e2e_report.py "$manifest" "$d/a.db" --other-db "$d/b.db" --json "$d/report.json" $allow \
    | tee "$d/report.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  [ $status -ne 0 ] && [ $keep_going -eq 0 ] && break
done
echo "=== replay end-to-end: $([ $status -eq 0 ] && echo PASS || echo FAIL) (outputs in $out)"
exit $status
