"""Build-time choice of warp_perspective's CPU backends: whether OpenCV is compiled in, and
which backend the public op uses by default (WARP_PERSPECTIVE_OPENCV=auto, 1 or 0: the
README's table). setup.py calls opencv_overrides() for ``shared_build.setup_kwargs``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

from shared_build import pkg_config
from shared_build.setup_helpers import is_metadata_only

# cv::warpPerspective lives in imgproc and needs core; pkg-config lists every OpenCV module
# (highgui, videoio, dnn ...), and each extra one is a DT_NEEDED that drags GTK, FFmpeg or
# protobuf into every process that loads the op. A build with opencv_world has only that.
_WANTED = ("opencv_core", "opencv_imgproc")
_SYSTEM_LIB_DIRS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/lib/x86_64-linux-gnu")


def _log(message: str) -> None:
    print(f"warp_perspective: {message}", file=sys.stderr, flush=True)


def opencv_overrides(env: dict[str, str] | None = None) -> dict[str, Any]:
    """setup_kwargs overrides that compile the OpenCV backend in, or nothing but the record."""
    env = dict(os.environ if env is None else env)
    if is_metadata_only(sys.argv):
        return {}
    mode = env.get("WARP_PERSPECTIVE_OPENCV", "auto").strip().lower() or "auto"
    if mode not in ("auto", "1", "0"):
        raise SystemExit(
            f"error: WARP_PERSPECTIVE_OPENCV={mode!r}; use auto (default), 1 (require OpenCV "
            "and make it the default) or 0 (built-in kernel only)"
        )
    builtin = {"build_info": {"backend": "builtin", "cpu_default": "builtin", "opencv": None}}
    if mode == "0":
        _log("CPU backend: built-in kernel (WARP_PERSPECTIVE_OPENCV=0)")
        return builtin
    found = pkg_config("opencv4", env)
    if found is None:
        why = (
            "pkg-config is not installed (apt-get install pkg-config libopencv-dev)"
            if shutil.which("pkg-config") is None
            else "pkg-config found no opencv4 (install libopencv-dev, or set PKG_CONFIG_PATH)"
        )
        if mode == "1":
            raise SystemExit(f"error: WARP_PERSPECTIVE_OPENCV=1 but {why}")
        _log(f"CPU backend: built-in kernel; {why}")
        return builtin
    world = [lib for lib in found["libraries"] if lib == "opencv_world"]
    libraries = world or [lib for lib in found["libraries"] if lib in _WANTED]
    if not libraries:
        raise SystemExit(
            f"error: pkg-config opencv4 lists neither opencv_world nor {', '.join(_WANTED)} "
            f"(got {found['libraries']}); set WARP_PERSPECTIVE_OPENCV=0 to build without OpenCV"
        )
    proc = subprocess.run(["pkg-config", "--modversion", "opencv4"], capture_output=True,
                          text=True, env=env, check=False)  # fmt: skip
    version = proc.stdout.strip() or "unknown"
    # An OpenCV outside the loader's default folders must still be found at run time.
    rpaths = [f"-Wl,-rpath,{d}" for d in found["library_dirs"] if d not in _SYSTEM_LIB_DIRS]
    # The built-in kernel is several times faster than per-plane cv::warpPerspective (see
    # the README), so OpenCV is the default only when the build asks for it.
    default = "opencv" if mode == "1" else "builtin"
    macros = [("WARP_PERSPECTIVE_WITH_OPENCV", None)]
    if default == "opencv":
        macros.append(("WARP_PERSPECTIVE_OPENCV_DEFAULT", None))
    _log(
        f"CPU backends: OpenCV {version} (pkg-config opencv4; include {found['include_dirs']}, "
        f"linking {libraries}) and the built-in kernel; default: "
        + ("OpenCV (WARP_PERSPECTIVE_OPENCV=1)" if default == "opencv" else "built-in kernel")
    )
    return {
        "include_dirs": found["include_dirs"],
        "library_dirs": found["library_dirs"],
        "libraries": libraries,
        "extra_link_args": rpaths,
        "define_macros": macros,
        "build_info": {"backend": "opencv", "cpu_default": default, "opencv": version},
    }
