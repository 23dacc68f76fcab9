#!/usr/bin/env bash
# A model that calls warp_perspective, saved from Python as TorchScript and as an
# AOTInductor package (torch.export), run from C++ programs built with CMake against the
# installed torch and in a fresh Python process that loads only the op library; the
# results of each format must be identical everywhere.
# requires: warp_perspective cmake c++
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="${EXAMPLE_WORKDIR:-$(mktemp -d)}"
mkdir -p "$work"
echo "== scratch folder: $work"

library="$(python -c 'import warp_perspective as w; print(w.library_path())')"
prefix="$(python -c 'import torch; print(torch.utils.cmake_prefix_path)')"
abi="$(python -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')"
echo "== op library: $library"
echo "== torch cmake prefix: $prefix (torch _GLIBCXX_USE_CXX11_ABI=$abi)"

echo "== 1. save the scripted model (Python, package imported)"
python "$here/model.py" save "$work"

echo "== 2. export it and compile it with AOTInductor (Python)"
python "$here/model.py" export "$work"

echo "== 3. build the C++ apps with CMake"
quiet() {  # run "$@" into a log; show the log only if it fails
  local log="$1"
  shift
  "$@" > "$log" 2>&1 || { tail -n 40 "$log" >&2; exit 1; }
}
# With a CUDA build of torch, find_package(Torch) also looks for the CUDA toolkit.
mapfile -t cuda_args < <(python "$here/../cuda_cmake_args.py" "$work")
quiet "$work/cmake.log" cmake -S "$here" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DWARP_PERSPECTIVE_LIBRARY="$library" "${cuda_args[@]}"
quiet "$work/build.log" cmake --build "$work/build" -j 2
echo "built $work/build/warp_app and $work/build/aoti_app"

echo "== 4. run them (C++, no Python)"
"$work/build/warp_app" "$work/model.pt" "$work/inputs.pt" "$work/cpp_output.pt" \
  | tee "$work/app.log"
if ! grep -q "_GLIBCXX_USE_CXX11_ABI=$abi" "$work/app.log"; then
  echo "the app was built with another C++ ABI than torch's ($abi)" >&2
  exit 1
fi
"$work/build/aoti_app" "$work/model.pt2" "$work/inputs.pt" "$work/cpp_aoti_output.pt"

echo "== 5. compare (fresh Python process that loads only the library)"
python "$here/model.py" check "$work" "$library"
