#!/usr/bin/env bash
# The README's main job from a fresh clone (GPU verification issue 24,
# item 6), in two halves because the GPU machine has no network and no apt:
#
#   bench/fresh_clone_main_job.sh prepare [REPO] [PKG]   here (Debian 12, packages installed)
#     git clone REPO (default: the repository this script is in) into
#     /tmp/kopt-fresh, then `scripts/setup` there exactly as the README says,
#     timed; then packs PKG (default .gpuwork/fresh of this checkout):
#     clone.tgz (the clone without build/), bin/ (build/bin/kopt and
#     kopt-worker, stripped), lib/ (the Debian libraries they need),
#     setup_wall_s, commit.
#     KOPT_FRESH_TARGETS="kopt kopt-worker": instead of scripts/setup, its
#     configure line and only these targets (not the README; says so in
#     setup_wall_s). KOPT_FRESH_REUSE=1: pack the clone already built there.
#   bench/fresh_clone_main_job.sh run PKG OUT            on the GPU machine
#     unpacks the clone at the same path (/tmp/kopt-fresh: kopt finds its data
#     in the source tree it was built from), puts the binaries in its build/bin
#     and runs, from the clone's directory, the README's command
#     `build/bin/kopt run configs/examples/rmsnorm.json`, timed (the store is
#     a fresh XDG_STATE_HOME in OUT). Writes OUT/main_job.log, main_job.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
clone=/tmp/kopt-fresh
mode=${1:?usage: $0 prepare [REPO] [PKG] | run PKG OUT}

if [[ $mode == prepare ]]; then
  repo=${2:-$here}
  pkg=${3:-$here/.gpuwork/fresh}
  rm -rf "$pkg"
  mkdir -p "$pkg"
  pkg=$(cd "$pkg" && pwd)
  if [[ ${KOPT_FRESH_REUSE:-0} == 1 ]]; then
    # Pack a clone built earlier (e.g. by hand, or an interrupted run).
    [[ -x $clone/build/bin/kopt && -x $clone/build/bin/kopt-worker ]] || { echo "no build in $clone" >&2; exit 1; }
    echo "reused the build in $clone" >"$pkg/setup.log"
    echo "not measured (KOPT_FRESH_REUSE)" >"$pkg/setup_wall_s"
    git -C "$clone" log -1 --format='%H %cI %s' >"$pkg/commit"
    cd "$clone" || exit 1
  else
    rm -rf "$clone"
    git clone --depth 1 "file://$repo" "$clone" >"$pkg/clone.log" 2>&1 || { cat "$pkg/clone.log"; exit 1; }
    git -C "$clone" log -1 --format='%H %cI %s' >"$pkg/commit"
    echo "cloned $(cat "$pkg/commit")"
    cd "$clone" || exit 1
    t0=$(date +%s.%N)
    if [[ -n ${KOPT_FRESH_TARGETS:-} ]]; then
      # Not the README's command: scripts/setup's own configure line, then
      # only these targets (a whole scripts/setup builds every test too,
      # which a slow shared machine cannot do in time).
      export PATH="/usr/local/cuda/bin:$PATH"
      { cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKOPT_SANITIZE=OFF -DKOPT_ENABLE_WORKER=ON &&
        cmake --build build -j"$(nproc)" --target $KOPT_FRESH_TARGETS; } >"$pkg/setup.log" 2>&1
      rc=$?
      what="setup's configure + build of $KOPT_FRESH_TARGETS"
    else
      scripts/setup >"$pkg/setup.log" 2>&1
      rc=$?
      what=scripts/setup
    fi
    t1=$(date +%s.%N)
    echo "$(python3 -c "print(round($t1 - $t0, 1))") ($what, $(nproc) cores)" >"$pkg/setup_wall_s"
    echo "$what: exit $rc, $(cat "$pkg/setup_wall_s") s wall (log: $pkg/setup.log)"
    [[ $rc == 0 ]] || { tail -20 "$pkg/setup.log"; exit 1; }
  fi
  mkdir -p "$pkg/bin" "$pkg/lib"
  for exe in kopt kopt-worker; do strip -o "$pkg/bin/$exe" "build/bin/$exe" || exit 1; done
  # The Debian libraries the GPU machine lacks, resolved through ldd of the
  # built kopt (as scripts/device-bundle does).
  for lib in libspdlog.so libfmt.so libsqlite3.so libcpp-httplib.so; do
    src=$(ldd build/bin/kopt | awk -v l="$lib" 'index($1, l) == 1 {print $3; exit}')
    [[ -n $src ]] && cp -L "$src" "$pkg/lib/"
  done
  tar czf "$pkg/clone.tgz" --exclude=./build -C "$clone" .
  du -sh "$pkg"
  exit 0
fi

if [[ $mode == run ]]; then
  pkg=$(cd "${2:?PKG}" && pwd) || exit 2
  out=${3:?OUT}
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  # Never over a prepared build (run mode replaces the clone with the package).
  if [[ -f $clone/build/CMakeCache.txt ]]; then
    echo "$clone holds a build tree (prepare ran here): not replacing it" >&2
    exit 2
  fi
  rm -rf "$clone"
  mkdir -p "$clone/build/bin"
  tar xzf "$pkg/clone.tgz" -C "$clone" || exit 1
  cp "$pkg/bin/kopt" "$pkg/bin/kopt-worker" "$clone/build/bin/"
  export LD_LIBRARY_PATH=$pkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # As on a fresh machine: no kopt variables (kopt finds its worker beside
  # itself and its data in the clone), a fresh default store and caches.
  unset KOPT_DATA_DIR KOPT_WORKER KOPT_CACHE_DIR KOPT_PROMPTS_DIR KOPT_DB KOPT_REQUIRE_GPU
  export XDG_STATE_HOME=$out/state XDG_CACHE_HOME=$out/cache
  export PATH=/usr/local/cuda/bin:$PATH
  cd "$clone" || exit 1
  echo "clone $(cat "$pkg/commit"); setup here took $(cat "$pkg/setup_wall_s") s" | tee "$out/main_job.txt"
  t0=$(date +%s.%N)
  build/bin/kopt run configs/examples/rmsnorm.json >"$out/main_job.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  echo "build/bin/kopt run configs/examples/rmsnorm.json: exit $rc, $(python3 -c "print(round($t1 - $t0, 1))") s wall" |
    tee -a "$out/main_job.txt"
  tail -8 "$out/main_job.log" | tee -a "$out/main_job.txt"
  exit $rc
fi
echo "usage: $0 prepare [REPO] [PKG] | run PKG OUT" >&2
exit 2
