#!/usr/bin/env bash
# A pull request's critical path on GitHub (docs/ci.md, "Estimated wall times"), its jobs'
# commands replayed one after another in a fresh clone on this VM, each job alone:
#   stable -> wheels (nox -s release -- TORCH) -> prebuilt (nox -s "tests(torch='TORCH')"
#   on the wheels job's raw wheels, PREBUILT_WHEELS)
# Before the prebuilt job, the wheels job's objects and ccache are moved aside: a prebuilt
# job starts from its own (cold, on a first run) cache. uv's cache is this machine's (warm).
#   bash replay.sh /work/ci-jobs 2.14.1 > times.txt
set -euo pipefail
clone=$1 torch=${2:-2.14.1}
logs=$(cd "$(dirname "$0")" && pwd)
cd "$clone"
job() {
    local name=$1 start=$SECONDS
    shift
    "$@" >"$logs/$name.log" 2>&1 || echo "$name: FAILED (rc $?)"
    echo "$name: $((SECONDS - start)) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
}
echo "clone at $(git log --oneline -1 | cut -c1-60), torch $torch, $(date -u +%FT%TZ)"
job setup bash .ci/setup.sh
job stable bash .ci/without_system_cuda.sh python3 -m nox -s stable
job wheels bash .ci/without_system_cuda.sh python3 -m nox --no-dependencies -s release -- "$torch"
mkdir -p .nox/prebuilt .nox/aside
cp -r ".nox/wheelhouse/torch-$torch" .nox/prebuilt/
mv .nox/build .nox/ccache .nox/aside/
job prebuilt env PREBUILT_WHEELS=.nox/prebuilt bash .ci/without_system_cuda.sh \
    python3 -m nox --no-dependencies -s "tests(torch='$torch')" --report .nox/report.json
python3 tools/ci_summary.py .nox/report.json | tail -3 || true
du -sh .nox | sed 's/^/.nox after: /'
