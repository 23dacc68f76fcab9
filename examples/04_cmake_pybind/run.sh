#!/usr/bin/env bash
# CMake: find_package(Torch), a pybind11 module linking a plain C++ library, imported from Python.
# requires: cmake c++
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="${EXAMPLE_WORKDIR:-$(mktemp -d)}"

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi

echo "== cmake configure (finds torch through $(command -v python))"
start=$SECONDS
# With a CUDA build of torch, find_package(Torch) also looks for the CUDA toolkit.
mapfile -t cuda_args < <(python "$here/../cuda_cmake_args.py" "$work")
cmake -S "$here" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DPython3_EXECUTABLE="$(command -v python)" --log-level=WARNING "${cuda_args[@]}"
echo "configured in $((SECONDS - start)) s"

echo "== cmake --build"
start=$SECONDS
cmake --build "$work/build"
echo "built in $((SECONDS - start)) s"

echo "== use it"
PYTHONPATH="$work/build" python "$here/use_softclip.py"
