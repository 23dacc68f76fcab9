#!/usr/bin/env bash
# lltm_cpu's bench (python -m benchmarks.run --only lltm_cpu) under each torch of the matrix,
# default threads and one thread (OMP_NUM_THREADS=1), from the repository root, in the nox
# environments that hold each torch with lltm_cpu built for it. Raw JSON beside this file;
# table.py turns them into the goal rows of issue 63.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../../.."
for env in dev:2.13.0 tests-torch-2-14-1:2.14.1 tests-torch-2-15-0:2.15.0; do
  python=".nox/${env%%:*}/bin/python"
  for threads in default 1; do
    out="$here/torch-${env##*:}-threads-$threads.json"
    uptime | tee -a "$here/load.txt"
    if [ "$threads" = 1 ]; then
      OMP_NUM_THREADS=1 "$python" -m benchmarks.run --only lltm_cpu --no-build-times --output "$out" >/dev/null
    else
      "$python" -m benchmarks.run --only lltm_cpu --no-build-times --output "$out" >/dev/null
    fi
  done
done
uptime | tee -a "$here/load.txt"
