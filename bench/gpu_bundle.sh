#!/usr/bin/env bash
# Packs what bench/gpu_verify.sh needs from a build tree for the GPU machine
# (no Debian libraries there): stripped kopt, kopt-worker and the GPU tests
# (test_worker_*) in BUNDLE/bin, the Debian shared libraries kopt links
# (spdlog, fmt, sqlite, httplib; found with ldd) in BUNDLE/lib.
#
# Usage: bench/gpu_bundle.sh BUILD_DIR BUNDLE   e.g. bench/gpu_bundle.sh build-dev .gpuwork/bundle
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR BUNDLE}
out=${2:?usage: $0 BUILD_DIR BUNDLE}
rm -rf "$out/bin" "$out/lib"
mkdir -p "$out/bin" "$out/lib"
for exe in "$build"/bin/kopt "$build"/bin/kopt-worker "$build"/bin/test_worker_* "$build"/bin/bench_compare_noise; do
  [[ -x $exe && -f $exe ]] || continue
  [[ $(basename "$exe") == worker_test_metrics_host ]] && continue
  strip -o "$out/bin/$(basename "$exe")" "$exe"
done
for lib in libspdlog.so libfmt.so libsqlite3.so libcpp-httplib.so; do
  src=$(ldd "$build/bin/kopt" | awk -v l="$lib" 'index($1, l) == 1 {print $3; exit}')
  [[ -n $src ]] && cp -L "$src" "$out/lib/"
done
# The checkout the build was configured from: kopt and the tests carry it
# as their compiled-in source directory, so the GPU machine links it to its
# own copy of the checkout (bench/gpu_verify.sh reads this file).
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" >"$out/source_dir"
ls "$out/bin"
du -sh "$out"
