"""Step 6 of a build, the setuptools commands: an sdist that builds alone, and torch's
BuildExtension that also removes stale builds of the module, refuses a library with its own
C++ runtime, and writes ``_build_info.py``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .build_info import BUILD_INFO_FILE, STABLE_OP_FILE, render_build_info, render_stable_op
from .errors import BuildError, log
from .knobs import loads_shared_libstdcxx

GENERATED = (BUILD_INFO_FILE, STABLE_OP_FILE)  # written by the build, never packed

_SDIST_SKIP_DIRS = {"build", "dist", "__pycache__", ".pytest_cache", ".nox"}


def make_sdist(root: Path) -> type:
    from setuptools.command.sdist import sdist

    class SdistWithSources(sdist):
        """An sdist that carries every source file of the package, links followed (a folder
        shared by packages is a link in each), so that it builds without this repository."""

        def make_release_tree(self, base_dir: str, files: list[str]) -> None:
            # egg_info's manifest knows nothing of headers or of folders outside the Python
            # packages; add them here.
            extra = []
            for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
                dirnames[:] = sorted(
                    d for d in dirnames if d not in _SDIST_SKIP_DIRS and not d.endswith(".egg-info")
                )
                extra += [
                    os.path.relpath(os.path.join(dirpath, name), root)
                    for name in filenames
                    if not name.endswith((".so", ".o", ".pyc")) and name not in GENERATED
                ]
            super().make_release_tree(base_dir, sorted(set(files) | set(extra)))

    return SdistWithSources


def remove_stale_modules(target: str | os.PathLike[str]) -> list[Path]:
    """Delete (and return) the other builds of the module ``target`` is about to become
    (``_C.abi3.so``, ``_C.cpython-311-...so``): setuptools never clears its build folder,
    so the old file would go into the next wheel, and Python may import it first."""
    target = Path(target)
    stem = target.name.split(".", 1)[0]
    removed = [
        path
        for path in target.parent.glob(f"{stem}.*")
        if path.name != target.name and path.suffix in (".so", ".pyd", ".dylib") and path.is_file()
    ]
    for path in removed:
        path.unlink()
    return removed


def check_cxx_runtime(library: str, linker: str) -> None:
    """Fail the build when ``library`` does not load libstdc++.so.6 itself (Linux): its own
    C++ runtime would crash beside torch's (flags.cxx_runtime_link_args)."""
    if not sys.platform.startswith("linux") or loads_shared_libstdcxx(library) is not False:
        return
    raise BuildError(
        f"{os.path.basename(library)} does not load libstdc++.so.6: {linker!r}, which "
        "linked it, ignored -l:libstdc++.so.6, so the library carries a C++ runtime of its "
        "own (a static libstdc++, from a wrapper adding -static-libstdc++, or libc++). "
        "Beside the libstdc++.so.6 torch loads, it crashes at the first C++ stream or "
        "exception that crosses between them. Build with a compiler that links the shared libstdc++: set CXX (and LDSHARED "
        "or LDCXXSHARED, where set) to e.g. /usr/bin/g++"
    )


def make_build_ext(info: dict[str, Any], python_module: bool) -> type:
    from torch.utils.cpp_extension import BuildExtension

    base = BuildExtension.with_options(no_python_abi_suffix=not python_module, use_ninja=True)

    # What is written beside each built module: _build_info.py, and a stable-ABI package's
    # _stable_op.py.
    files = {BUILD_INFO_FILE: render_build_info(info)}
    if info.get("abi") == "stable":
        files[STABLE_OP_FILE] = render_stable_op()

    class BuildExtWithInfo(base):  # type: ignore[misc, valid-type]
        def _generated_paths(self) -> list[str]:
            folders = {os.path.dirname(self.get_ext_fullpath(ext.name)) for ext in self.extensions}
            return [os.path.join(folder, name) for folder in sorted(folders) for name in files]

        def run(self) -> None:
            for ext in self.extensions:
                for path in remove_stale_modules(self.get_ext_fullpath(ext.name)):
                    log(f"removed {path}, a build of {ext.name} with another file name")
            super().run()
            for path in self._generated_paths():
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(files[os.path.basename(path)])

        def get_outputs(self) -> list[str]:
            return [*super().get_outputs(), *self._generated_paths()]

        def build_extension(self, ext: Any) -> None:
            super().build_extension(ext)
            try:
                # A C++ extension links with CXX in place of the linker's first word.
                linker = getattr(self.compiler, "compiler_cxx", None) or self.compiler.linker_so
                check_cxx_runtime(self.get_ext_fullpath(ext.name), " ".join(linker))
            except BuildError as error:
                raise SystemExit(f"error: {ext.name}: {error}") from None

    return BuildExtWithInfo
