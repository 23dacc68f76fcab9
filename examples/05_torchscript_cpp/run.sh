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
# With a CUDA build of torch, find_package(Torch) also looks for the CUDA toolkit: point it
# at the one shared_build picks (CUDA_HOME, the environment's pip nvcc given a CUDA_HOME-
# shaped folder of links, then a fitting /usr/local/cuda or nvcc on PATH), else at the first
# of CUDA_HOME, CUDA_PATH, /usr/local/cuda, torch's guess; and at the nvrtc of NVIDIA's pip
# wheels when that toolkit has none (runtime-only installs).
mapfile -t cuda_args < <(EXAMPLE_WORK="$work" python - 2>/dev/null <<'PY'
import glob, os, torch
root = None
if torch.version.cuda:
    try:
        from shared_build.cuda import select_toolkit
        from shared_build.setup_helpers import _site_dirs

        chosen = select_toolkit(
            os.environ, torch.version.cuda, _site_dirs(torch),
            os.path.join(os.environ["EXAMPLE_WORK"], "cuda_home"),
        )
        root = chosen.toolkit.root if chosen else None
    except Exception:  # shared_build absent, or no compiler fits: fall back to the guesses
        root = None
    if root is None:
        from torch.utils.cpp_extension import CUDA_HOME
        candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda", CUDA_HOME]
        root = next((c for c in candidates if c and os.path.isfile(os.path.join(c, "include", "cuda_runtime.h"))), None)
if torch.version.cuda and root:
    print(f"-DCUDA_TOOLKIT_ROOT_DIR={root}")
    print(f"-DCUDAToolkit_ROOT={root}")
    # enable_language(CUDA) takes the first nvcc on PATH otherwise, whatever its version.
    print(f"-DCMAKE_CUDA_COMPILER={os.path.join(root, 'bin', 'nvcc')}")
    if not glob.glob(os.path.join(root, "lib*", "libnvrtc.so*")):
        site = os.path.dirname(os.path.dirname(torch.__file__))
        wheels = sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", "libnvrtc.so*")))
        if wheels:
            print(f"-DCUDA_nvrtc_LIBRARY={wheels[0]}")
PY
)
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
