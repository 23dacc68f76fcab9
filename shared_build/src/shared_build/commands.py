"""Step 6 of a build, the setuptools commands: an sdist that builds alone, and a build_ext
that writes the build's record.

``make_sdist`` packs every source file of the package, links followed (a folder shared by
packages is a link in each); shared_build is its build requirement. ``make_build_ext`` is
torch's BuildExtension (ninja), which also removes stale builds of the module, refuses a
library with its own C++ runtime, and writes ``_build_info.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .build_info import BUILD_INFO_FILE, STABLE_OP_FILE, render_build_info, render_stable_op
from .errors import BuildError, log
from .knobs import loads_shared_libstdcxx

_SDIST_SKIP_DIRS = frozenset({"build", "dist", "__pycache__", ".pytest_cache", ".nox"})
_SDIST_SKIP_SUFFIXES = (".so", ".o", ".pyc")


def make_sdist(root: Path) -> type:
    from setuptools.command.sdist import sdist

    class SdistWithSources(sdist):
        """An sdist that carries every source file of the package, so that it builds on a
        machine without this repository."""

        def make_release_tree(self, base_dir: str, files: list[str]) -> None:
            # setuptools takes the file list from egg_info's manifest, which knows nothing
            # of headers or of folders outside the Python packages; add them here.
            extra = []
            for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
                dirnames[:] = sorted(
                    d for d in dirnames if d not in _SDIST_SKIP_DIRS and not d.endswith(".egg-info")
                )
                for filename in sorted(filenames):
                    if filename.endswith(_SDIST_SKIP_SUFFIXES) or filename in (
                        BUILD_INFO_FILE,
                        STABLE_OP_FILE,
                    ):
                        continue
                    extra.append(os.path.relpath(os.path.join(dirpath, filename), root))
            super().make_release_tree(base_dir, sorted(set(files) | set(extra)))

    return SdistWithSources


_MODULE_SUFFIXES = (".so", ".pyd", ".dylib")


def remove_stale_modules(target: str | os.PathLike[str]) -> list[Path]:
    """Delete the other builds of the module that ``target`` is about to become.

    A module's file name depends on the build (``_C.abi3.so`` under the limited API,
    ``_C.cpython-311-x86_64-linux-gnu.so`` without it, ``_C.so`` for a plain library), and
    setuptools never clears its build folder: after such a change the old file stays beside
    the new one and goes into the next wheel, where Python may import the old one first.
    Returns the paths removed.
    """
    target = Path(target)
    stem = target.name.split(".", 1)[0]
    removed = []
    if target.parent.is_dir():
        for path in target.parent.iterdir():
            if (
                path.name != target.name
                and path.name.startswith(stem + ".")
                and path.name.endswith(_MODULE_SUFFIXES)
                and path.is_file()
            ):
                path.unlink()
                removed.append(path)
    return removed


def check_cxx_runtime(library: str, linker: str) -> None:
    """Fail the build when ``library`` does not load libstdc++.so.6 itself (Linux): it
    carries a C++ runtime of its own, which, loaded beside torch's, crashes at the first
    stream or exception that crosses over (flags.cxx_runtime_link_args)."""
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

    class BuildExtWithInfo(base):  # type: ignore[misc, valid-type]
        """BuildExtension that also writes _build_info.py (and a stable-ABI package's
        _stable_op.py) beside each built module."""

        # The files written beside each built module.
        generated = (BUILD_INFO_FILE, *([STABLE_OP_FILE] if info.get("abi") == "stable" else []))

        def _generated(self) -> dict[str, str]:
            """The text of each generated file, by name."""
            files = {BUILD_INFO_FILE: render_build_info(info)}
            if STABLE_OP_FILE in self.generated:
                files[STABLE_OP_FILE] = render_stable_op()
            return files

        def _generated_paths(self) -> list[str]:
            folders = {os.path.dirname(self.get_ext_fullpath(ext.name)) for ext in self.extensions}
            return [
                os.path.join(folder, name) for folder in sorted(folders) for name in self.generated
            ]

        def run(self) -> None:
            for ext in self.extensions:
                for path in remove_stale_modules(self.get_ext_fullpath(ext.name)):
                    log(f"removed {path}, a build of {ext.name} with another file name")
            super().run()
            files = self._generated()
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
