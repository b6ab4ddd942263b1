#!/usr/bin/env bash
# GPU verification run (issue 24) in one bounded command on the GPU machine.
#
#   bench/gpu_verify.sh BUNDLE_DIR [FRESH_PKG]
#
# BUNDLE_DIR: bin/ (kopt, kopt-worker, test_worker_* of a Debug build, from
# bench/gpu_bundle.sh) and lib/ (the Debian libraries the GPU machine lacks).
# FRESH_PKG: what `bench/fresh_clone_main_job.sh prepare` packed (optional).
# Results go to $OUT (the device tool's folder; default /tmp/gpu_verify_out):
# summary.txt, and results.tgz (every step's log and JSON, the soak's stores
# and the main job's store); at most 8 files come back.
#
# Steps, in order of priority, each under its own timeout and all under one
# budget (KOPT_VERIFY_BUDGET_S, default 530 s; a step that no longer fits is
# reported "not run: out of time"):
#   env          GPU, driver, commit
#   clock_lost   test_worker_clock_lost: the restart path, forced by the
#                worker's test hook (KOPT_WORKER_TEST_DROP_ACTIVITY_RECORDS)
#   eval         kopt eval configs/examples/rmsnorm.json --json: SOL,
#                attainable SOL and the measured launch floor
#   soak         bench/daemon_gpu_soak.sh: four campaigns, run A and run B with kills
#   main_job     bench/fresh_clone_main_job.sh run: the README's main job
#   sanitize     the soak's autotune winner with and without --sanitize on one
#                workload: the time compute-sanitizer costs
#   clock_cli    the hook through kopt eval (the events kopt prints)
#   gpu_tests    the other bundled test_worker_* binaries, while time is left
# Exit 0 when every step that ran passed.
set -u
bundle=$(cd "${1:?usage: $0 BUNDLE_DIR [FRESH_PKG]}" && pwd) || exit 2
fresh=${2:-}
[[ -n $fresh ]] && fresh=$(cd "$fresh" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
final=${OUT:-/tmp/gpu_verify_out}
mkdir -p "$final"
final=$(cd "$final" && pwd)
R=/tmp/gpu_verify_work
rm -rf "$R"
mkdir -p "$R"
T0=$(date +%s)
budget=${KOPT_VERIFY_BUDGET_S:-530}
deadline=$((T0 + budget))
summary=$R/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

# kopt's compiled-in paths name the checkout it was built in (recorded by
# bench/gpu_bundle.sh in BUNDLE/source_dir): make that path this checkout
# when it is elsewhere and free.
built_in=$(cat "$bundle/source_dir" 2>/dev/null || true)
if [[ -n $built_in && $root != "$built_in" && ! -e $built_in ]]; then
  mkdir -p "$(dirname "$built_in")" && ln -sfn "$root" "$built_in"
fi
# Data beside no build tree: the installed layout, pointing into this checkout.
data=$R/share-kopt
mkdir -p "$data/knowledge_base"
ln -sfn "$root/prompts/templates" "$data/prompts"
ln -sfn "$root/knowledge_base/techniques" "$data/knowledge_base/techniques"
ln -sfn "$root/knowledge_base/references" "$data/knowledge_base/references"
ln -sfn "$root/configs/hardware" "$data/hardware"
ln -sfn "$root/configs/bench" "$data/bench"
ln -sfn "$root/configs/examples" "$data/examples"
B=$bundle/bin
export KOPT_DATA_DIR=$data
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KOPT_WORKER=$B/kopt-worker
# KOPT_VERIFY_DRY=1: test this script on a machine without a GPU (the soak
# with a fake worker; GPU steps fail or skip there, as they must).
dry=${KOPT_VERIFY_DRY:-0}
soak_dry=()
if [[ $dry == 1 ]]; then soak_dry=(--dry --fake-worker); else export KOPT_REQUIRE_GPU=1; fi
export KOPT_CACHE_DIR=/tmp/kopt-cache
export PATH=$B:/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
[[ -z ${KOPT_COMPUTE_SANITIZER:-} && -x /usr/local/cuda/bin/compute-sanitizer ]] &&
  export KOPT_COMPUTE_SANITIZER=/usr/local/cuda/bin/compute-sanitizer
cd "$root" || exit 2

failed=0
declare -A wall
# step NAME MAX_S CMD...: runs CMD with a timeout of min(MAX_S, what the
# budget leaves less 25 s for packing); stdout to $R/NAME.out, stderr to
# $R/NAME.err.
step() {
  local name=$1 max=$2
  shift 2
  local left=$((deadline - $(date +%s) - 25))
  local t=$((max < left ? max : left))
  if [[ $t -lt 15 ]]; then
    say "$(printf '%-11s %-8s %s' "$name" "SKIPPED" "not run: out of time (${left} s left in the budget)")"
    return 99
  fi
  local s=$(date +%s.%N)
  timeout -k 5 "$t" "$@" >"$R/$name.out" 2>"$R/$name.err"
  local rc=$?
  local w=$(python3 -c "print('%.0f' % ($(date +%s.%N) - $s))")
  wall[$name]=$w
  local verdict=ok
  if [[ $rc == 77 ]]; then
    verdict=SKIPPED  # a GPU test without a device (never with KOPT_REQUIRE_GPU=1)
  elif [[ $rc != 0 ]]; then
    verdict="FAIL($rc)"
    [[ $rc == 124 || $rc == 137 ]] && verdict="TIMEOUT"
    failed=$((failed + 1))
  fi
  say "$(printf '%-11s %-8s %5s s (limit %d s)' "$name" "$verdict" "$w" "$t")"
  return $rc
}

# env
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
  date -u
  echo "checkout $(git -C "$root" log -1 --format='%H %s' 2>/dev/null || echo '(no git here)')"
  ls -la "$B"
  command -v compute-sanitizer || echo "no compute-sanitizer on PATH"
} >"$R/env.txt" 2>&1
say "== gpu_verify $(date -u +%FT%TZ): $(head -1 "$R/env.txt")"

# clock_lost, forced
if [[ -x $B/test_worker_clock_lost ]]; then
  step clock_lost 90 env -C /tmp "$B/test_worker_clock_lost"
  grep -E "first request|restarted|median|OK \]|FAILED|SKIPPED" "$R/clock_lost.out" | head -8 | sed 's/^/    /' | tee -a "$summary"
else
  say "clock_lost  SKIPPED  test_worker_clock_lost not in the bundle"
fi

# eval --json: SOL, attainable SOL, launch floor
step eval 120 "$B/kopt" --db "$R/eval.db" eval configs/examples/rmsnorm.json --json --max-time 0.5
python3 - "$R/eval.out" <<'PY' | tee -a "$summary"
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except (ValueError, OSError):
    print("    eval: no JSON in the output"); sys.exit()
print("    launch floor: %s" % json.dumps(j.get("launch_floor"))[:200])
for role, s in j.get("results", {}).items():
    print("    %-9s %s, %d/%d workloads ok, SOL %.1f %%, attainable SOL %.1f %%" % (
        role, s["status"], s["workloads_ok"], s["workloads"], 100 * s["weighted_sol_fraction"],
        100 * s["weighted_attainable_sol_fraction"]))
    lb = [r["workload"] for r in s["rows"] if r.get("launch_bound")]
    print("              launch-bound (against the floor): %s" % (", ".join(lb) or "none"))
for e in j.get("events", []):
    print("    event: %s" % e)
PY

# the daemon soak
left=$((deadline - $(date +%s) - 25 - 180))   # keep ~180 s for the main job and the sanitizer
rt=$(( (left - 30) / 2 )); [[ $rt -gt 150 ]] && rt=150
if [[ $rt -ge 40 ]]; then
  step soak $((2 * rt + 40)) bash bench/daemon_gpu_soak.sh "$R/soak" "$B" --run-timeout "$rt" --kills 4 \
    --replay-iterations 5 "${soak_dry[@]}"
  sed 's/^/    /' "$R/soak/summary.txt" 2>/dev/null | tee -a "$summary"
else
  say "soak        SKIPPED  not run: out of time"
fi

# the README's main job from a fresh clone
if [[ -n $fresh && -f $fresh/clone.tgz ]]; then
  step main_job 240 bash bench/fresh_clone_main_job.sh run "$fresh" "$R/main_job"
  sed 's/^/    /' "$R/main_job/main_job.txt" 2>/dev/null | tee -a "$summary"
else
  say "main_job    SKIPPED  no fresh-clone package given"
fi

# compute-sanitizer on a finalist: the soak's autotune winner (else the seed)
fin=$R/finalist.json
python3 - "$R/soak/a/state/kopt.db" "$fin" <<'PY' >"$R/finalist.txt" 2>&1
import json, sqlite3, sys
try:
    db = sqlite3.connect(sys.argv[1])
    r = db.execute("SELECT cd.id, cd.source, cd.launch_plan_json, cd.parameters_json FROM campaigns c "
                   "JOIN operators o ON o.id = c.operator_id JOIN candidates cd ON cd.id = c.best_candidate_id "
                   "WHERE o.name = 'rmsnorm_autotune'").fetchone()
    plan = json.loads(r[2])
    cand = {"source": r[1], "launches": plan["launches"]}
    for k in ("compile_options", "workspaces"):
        if plan.get(k):
            cand[k] = plan[k]
    p = json.loads(r[3]) or plan.get("parameters")
    if p:
        cand["parameters"] = p
    json.dump(cand, open(sys.argv[2], "w"), indent=1)
    print("finalist: candidate %d of the soak's autotune campaign, parameters %s" % (r[0], json.dumps(p)))
except Exception as e:
    print("no finalist from the soak (%s): the seed" % e)
    sys.exit(1)
PY
[[ -s $fin ]] || cp bench/rmsnorm_seed_candidate.json "$fin"
sed 's/^/    /' "$R/finalist.txt" | tee -a "$summary"
step san_off 60 "$B/kopt" --db "$R/san.db" eval configs/examples/rmsnorm.json --candidate "$fin" --workloads t1_h4096 --json --no-store
step sanitize 150 "$B/kopt" --db "$R/san.db" eval configs/examples/rmsnorm.json --candidate "$fin" --workloads t1_h4096 --json --no-store --sanitize
python3 - "$R/sanitize.out" <<'PY' | tee -a "$summary"
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    print("    sanitize: %s" % json.dumps(j.get("sanitize"))[:600])
except (ValueError, OSError):
    print("    sanitize: no JSON in the output")
PY
[[ -n ${wall[sanitize]:-} && -n ${wall[san_off]:-} ]] &&
  say "    compute-sanitizer cost: $((wall[sanitize] - wall[san_off])) s (${wall[sanitize]} s with --sanitize, ${wall[san_off]} s without, one workload)"

# the hook through kopt eval: the restart as kopt reports it
rm -f /tmp/kopt_clock_lost_cli
step clock_cli 60 env KOPT_WORKER_TEST_DROP_ACTIVITY_RECORDS=/tmp/kopt_clock_lost_cli \
  "$B/kopt" --db "$R/clock.db" eval configs/examples/rmsnorm.json --workloads t16_h4096 t2048_h4096 --json --no-store --max-time 0.3
python3 - "$R/clock_cli.out" <<'PY' | tee -a "$summary"
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except (ValueError, OSError):
    print("    clock_cli: no JSON in the output"); sys.exit()
for e in j.get("events", []):
    print("    event: %s" % e[:220])
for role, s in j.get("results", {}).items():
    print("    %-9s %s, %d/%d workloads ok" % (role, s["status"], s["workloads_ok"], s["workloads"]))
PY
[[ -e /tmp/kopt_clock_lost_cli ]] && say "    (the hook's marker exists: a worker dropped its records)"

# the other GPU tests, while time is left
for t in "$B"/test_worker_*; do
  n=$(basename "$t")
  [[ $n == test_worker_clock_lost ]] && continue
  step "$n" 150 env -C /tmp "$t"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|SKIPPED" "$R/$n.out" 2>/dev/null | head -8 | sed 's/^/    /' | tee -a "$summary"
done

say "== $(( $(date +%s) - T0 )) s in all; $failed step(s) failed"
cp "$summary" "$final/summary.txt"
# Stores and logs; not the daemon's cubin caches.
tar czf "$final/results.tgz" -C "$R" --exclude='*/cache' --exclude='share-kopt' --exclude='*/chromium-profile' . 2>/dev/null
ls -la "$final"
[[ $failed == 0 ]]
