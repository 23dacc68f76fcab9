#!/usr/bin/env bash
# The A/B of README.md: two installed copies of gc_cpp (old: HEAD's build, new: with
# typed-shim.patch), put first on PYTHONPATH in turn; run from a clone with the nox
# environment of torch 2.15.0 (nox -s dev -- gc_cpp --torch 2.15.0 builds it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-.nox/envs/torch-2.15.0/bin/python}
for rep in 1 2 3; do
  for v in old new; do
    echo "== $v rep $rep"
    PYTHONPATH=/tmp/exp/$v OMP_NUM_THREADS=1 "$python" -c "import gc_cpp; print(gc_cpp.__file__)"
    PYTHONPATH=/tmp/exp/$v OMP_NUM_THREADS=1 "$python" "$here/gap_n1024.py" 1
    PYTHONPATH=/tmp/exp/$v "$python" "$here/gap_n1024.py" 2
    PYTHONPATH=/tmp/exp/$v OMP_NUM_THREADS=1 "$python" packages/gc_cpp/bench/call_overhead.py
  done
done
