#!/usr/bin/env bash
# The daemon on one GPU, overnight-style (GPU verification issue 24, items
# 1-2): four campaigns at once (two replay campaigns of vector_add, one
# autotune and one agent campaign of rmsnorm, the agent scripted through
# `kopt propose`), run A uninterrupted, run B with kill -9 of the daemon and
# of a worker at random moments; checks that every campaign ends as in A
# with nothing lost or repeated, and reports the GPU busy fraction (from
# /api/daemon) and evaluations per GPU-hour. The work is bench/daemon_soak.py
# (python3 standard library); this wrapper finds the binaries.
#
# Usage: bench/daemon_gpu_soak.sh OUT [BIN] [--dry] [daemon_soak.py options]
#   BIN: directory with kopt and kopt-worker (default build/bin).
#   --dry: no GPU: the daemon's fake evaluator (tests only), to test this
#          script on a CPU machine; add --fake-worker to use a fake worker
#          process instead, so that worker kills hit a real process.
#   Options: --kills N (4), --run-timeout S (150 per run), --seed N (kill
#            moments), --replay-iterations N (6), --autotune-iterations N (4).
# Output: OUT/summary.txt (the table), OUT/summary.json, OUT/{a,b}/ (stores,
# daemon logs), OUT/revise_prompts.md. Exit 0 when every check passed.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: $0 OUT [BIN] [--dry] [options]}
shift
bin=$here/build/bin
if [[ $# -gt 0 && $1 != --* ]]; then bin=$1; shift; fi
bin=$(cd "$bin" && pwd) || exit 2
args=()
fake_worker=0
for x in "$@"; do
  if [[ $x == --fake-worker ]]; then fake_worker=1; else args+=("$x"); fi
done
mkdir -p "$out"
if [[ $fake_worker == 1 ]]; then
  # The daemon tests' fake worker (tests/daemon/fake_worker.hpp), with a
  # delay per workload so that kills land in the middle of GPU work.
  python3 - "$here/tests/daemon/fake_worker.hpp" "$out/fake_worker" <<'PY' || exit 2
import os, re, sys
src, d = sys.argv[1:3]
text = open(src).read()
py = re.search(r'R"PY\((.*?)\)PY"', text, re.S).group(1)
os.makedirs(d, exist_ok=True)
# The protocol version of this build, as the tests fill it in.
pv = re.search(r'inline constexpr int version\s*=\s*(\d+)',
               open(os.path.join(os.path.dirname(src), "../../profiler/protocol/protocol.hpp")).read()).group(1)
anchor = '    for w in req["workloads"]:\n'
assert anchor in py, "fake worker changed: no per-workload loop"
py = py.replace("@DIR@", d).replace("@PROTOCOL@", pv).replace(
    anchor, anchor + '        __import__("time").sleep(0.05)\n')
p = os.path.join(d, "kopt-fake-worker.py")
open(p, "w").write(py)
os.chmod(p, 0o755)
print(p)
PY
  args+=(--fake-worker "$out/fake_worker/kopt-fake-worker.py")
fi
exec python3 "$here/bench/daemon_soak.py" "$out" --kopt "$bin/kopt" --worker-exe "$bin/kopt-worker" "${args[@]}"
