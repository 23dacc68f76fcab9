"""CMake arguments that point find_package(Torch) at a CUDA toolkit, one per line.

    python examples/cuda_cmake_args.py WORKDIR

With a CUDA build of torch, TorchConfig.cmake enables CUDA and looks for the toolkit. This
prints the one shared_build picks (CUDA_HOME, the environment's pip nvcc given a
CUDA_HOME-shaped folder of links under WORKDIR, then a fitting /usr/local/cuda or nvcc on
PATH), else the first of CUDA_HOME, CUDA_PATH, /usr/local/cuda and torch's guess; and the nvrtc
of NVIDIA's pip wheels when that toolkit has none (runtime-only installs). Nothing for a CPU
build of torch. Used by the CMake examples (04, 05).
"""

import glob
import os
import sys

import torch

root = None
if torch.version.cuda:
    try:
        from shared_build.cuda import select_toolkit
        from shared_build.setup_helpers import _site_dirs

        chosen = select_toolkit(
            os.environ,
            torch.version.cuda,
            _site_dirs(torch),
            os.path.join(sys.argv[1], "cuda_home"),
        )
        root = chosen.toolkit.root if chosen else None
    except Exception:  # shared_build absent, or no compiler fits: fall back to the guesses
        root = None
    if root is None:
        from torch.utils.cpp_extension import CUDA_HOME

        candidates = [
            os.environ.get("CUDA_HOME"),
            os.environ.get("CUDA_PATH"),
            "/usr/local/cuda",
            CUDA_HOME,
        ]
        root = next(
            (
                c
                for c in candidates
                if c and os.path.isfile(os.path.join(c, "include", "cuda_runtime.h"))
            ),
            None,
        )
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
