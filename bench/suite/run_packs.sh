#!/bin/bash
# Runs GPU packs one after another in ONE device call, from the repository root
# on the device machine: bench/suite/run_packs.sh NAME:SECONDS ...
#
# A pack is .gpuwork/NAME/run.sh (carried with the shared kopt bundle in
# .gpuwork/suite/bundle); it writes its results under $OUT. What this wrapper
# guarantees, each learnt from a device call that returned nothing:
# - a hard limit per pack that kills its whole process group (a plain `timeout
#   bash run.sh` leaves an orphaned kopt or harness running, and the device call
#   then waits for it until the call's own limit);
# - stdin from /dev/null, stdout to a file: a pipe into `tail` loses all output
#   when the call is killed at its limit;
# - ONE archive back ($OUT/packs.tgz) plus a short log: the device returns at
#   most 8 files of at most 16 MiB, so per-pack files would be dropped;
# - only files of at most 3 MiB go into the archive (a pack's own tgz included), and a
#   listing of what was left out.
set -u
REAL=${OUT:?set OUT to the output folder of the device call}; T0=$(date +%s); ST=/tmp/run_packs
rm -rf $ST; mkdir -p $ST
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > $ST/gpu.txt 2>&1
# Byte units: find's -size M rounds up, so -3M would mean "at most 2 MiB". Rewritten after every
# pack, so that a device call killed at its own limit still returns the packs that finished.
archive() {
  (cd $ST && find . -type f -size +3145728c > left_out.txt; find . -type f ! -size +3145728c | tar czf $REAL/packs.tgz.part -T -) &&
    mv -f $REAL/packs.tgz.part $REAL/packs.tgz
}
for spec in "$@"; do
  n=${spec%%:*}; lim=${spec##*:}
  [[ "$spec" == *:* && "$lim" =~ ^[0-9]+$ ]] || { echo "== $spec: expected NAME:SECONDS"; continue; }
  [ -f .gpuwork/$n/run.sh ] || { echo "== $n: no .gpuwork/$n/run.sh (not carried?)"; continue; }
  export OUT=$ST/$n; mkdir -p $OUT
  # Its own session, killed as a whole afterwards: kopt starts kopt-worker in a process group of
  # its own, so killing the pack's process group alone would leave the worker on the GPU.
  setsid -w timeout -k 3 "$lim" bash .gpuwork/$n/run.sh > $ST/$n.stdout 2>&1 < /dev/null &
  sid=$!; wait $sid; rc=$?
  pkill -9 -s $sid 2>/dev/null; sleep 1
  echo "== $n rc=$rc at $(( $(date +%s) - T0 )) s (limit $lim s), stdout $(stat -c %s $ST/$n.stdout) B"
  head -c 4000 $ST/$n.stdout | cut -c1-200
  archive
done
date -u >> $ST/gpu.txt
archive
echo "archive: $(stat -c %s $REAL/packs.tgz) B; left out: $(wc -l < $ST/left_out.txt) file(s)"
