#!/usr/bin/env bash
# The largest CI job's disk, its steps replayed here (issue 62, goal 4): a fresh clone, the
# caches where .ci/build_env.sh puts them (.nox/uv-cache, empty: a first run), the stable and
# raw torch-2.15.0 wheels as the artifacts bring them, then `nox --no-dependencies -s
# "tests(torch='2.15.0')"` with PREBUILT_WHEELS (collect only), and the cache save's archive
# (tar | zstd of .nox/uv-cache, as actions/cache makes it). du of the clone every 5 s.
set -euo pipefail
src=/work/ci-final
job=/work/disk/job
rm -rf "$job" && git clone -q /work/main "$job" && cd "$job"
export UV_CACHE_DIR="$job/.nox/uv-cache" CCACHE_DIR="$job/.nox/ccache"
mkdir -p .nox/wheelhouse .nox/prebuilt
cp -r "$src/.nox/wheelhouse/stable" "$src/.nox/wheelhouse/stable-release" .nox/wheelhouse/
cp -r "$src/.nox/wheelhouse/torch-2.15.0" .nox/prebuilt/
( while true; do echo "$(date +%s) $(du -sxk "$job" | cut -f1) $(df -k --output=used / | tail -1)"; sleep 5; done ) > /work/disk/samples.txt &
sampler=$!
start=$(date +%s)
PREBUILT_WHEELS=.nox/prebuilt bash .ci/without_system_cuda.sh python3 -m nox --no-dependencies \
  -s "tests(torch='2.15.0')" -- --co -q > /work/disk/nox.log 2>&1 || echo "nox rc=$?"
echo "nox done after $(( $(date +%s) - start )) s"
tar -cf - -C .nox uv-cache | zstd -T0 -3 -q -o /work/disk/job/uv-cache.tar.zst
ls -l /work/disk/job/uv-cache.tar.zst
sleep 6; kill $sampler
du -sxh .nox .nox/uv-cache .nox/tests-torch-2-15-0 .nox/prebuilt .nox/wheelhouse uv-cache.tar.zst
sort -k2 -n /work/disk/samples.txt | tail -1
