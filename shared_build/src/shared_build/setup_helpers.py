"""``setup_kwargs``: everything a package's ``setup()`` needs, from one call.

A package's setup.py is a few lines: put shared_build on sys.path and call
``setup(**setup_kwargs(here))``. This module reads the package's pyproject.toml, decides
CUDA, finds the toolkit and compiler, sets the flags and returns ext_modules, cmdclass,
packages and options. Every failure is a BuildError whose message says what to do next;
setup.py prints it without a traceback.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import platform
import pprint
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from . import cuda as cuda_mod
from . import knobs
from .errors import BuildError

HERE = Path(__file__).resolve().parent
INCLUDE_DIR = HERE / "include"
# On Linux, ahead of the system's headers: see glibc_compat/sys/single_threaded.h.
GLIBC_COMPAT_DIR = HERE / "glibc_compat"
RUNTIME_TEMPLATE = HERE / "runtime.py"
BUILD_INFO_MARKER = "BUILD_INFO: dict[str, Any] = {}"
BUILD_INFO_FILE = "_build_info.py"
# A stable-ABI package's Python side of its ops (fake kernels, autograd, checks): copied
# beside _build_info.py, so that the wheel needs no shared_build at run time.
STABLE_OP_TEMPLATE = HERE / "stable_op.py"
STABLE_OP_FILE = "_stable_op.py"
# The oldest torch a stable-ABI package supports (the first line of
# requirements/torch-matrix.txt; a test keeps the two equal). Its wheel is built with
# -DTORCH_TARGET_VERSION set to this release, so it may only use the stable API this
# release has, and loads on it and on every newer torch.
STABLE_TARGET = "2.13"

# Commands that compile; any other invocation of setup.py (egg_info, dist_info, sdist,
# --version) only needs metadata and must work without torch, e.g. in an isolated sdist build.
BUILD_COMMANDS = frozenset(
    {
        "build",
        "build_ext",
        "bdist_wheel",
        "bdist",
        "bdist_egg",
        "install",
        "develop",
        "editable_wheel",
    }
)
_SDIST_SKIP_DIRS = frozenset({"build", "dist", "_vendor", "__pycache__", ".pytest_cache", ".nox"})
_SDIST_SKIP_SUFFIXES = (".so", ".o", ".pyc")


def _log(message: str) -> None:
    print(f"shared_build: {message}", file=sys.stderr, flush=True)


@dataclass
class PackageConfig:
    """A package's name, version and its ``[tool.shared_build]`` table."""

    root: Path
    name: str
    version: str
    cuda: str = "none"
    module: str = "_C"
    python_module: bool = True
    limited_api: bool = True
    # A source folder shared with other packages (csrc/, python/): its C++ is compiled
    # into this package's module, its python/ installed as <name>._<folder name>.
    common: Path | None = None
    abi: str = "full"
    # [project] dynamic = ["dependencies"]: shared_build writes them (runtime_requirements),
    # the torch requirement from the torch built against, plus these.
    dynamic_dependencies: bool = False
    dependencies: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    # [project] optional-dependencies (test, bench ...): what nox installs beside it.
    optional_dependencies: dict[str, list[str]] = field(default_factory=dict)


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise BuildError(
                "reading pyproject.toml on Python 3.10 needs tomli; pip install tomli"
            ) from None
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def read_config(root: Path) -> PackageConfig:
    """Parse the package's pyproject.toml into a PackageConfig, validating every key."""
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        raise BuildError(f"{root} has no pyproject.toml; run setup.py from the package folder")
    data = _load_toml(pyproject)
    project = data.get("project", {})
    name = project.get("name")
    if not name:
        raise BuildError(f"{pyproject} has no [project] name")
    table = dict(data.get("tool", {}).get("shared_build", {}))
    has_cu = any((root / "csrc").rglob("*.cu")) if (root / "csrc").is_dir() else False
    cuda = table.pop("cuda", "optional" if has_cu else "none")
    if cuda not in ("none", "optional", "required"):
        raise BuildError(
            f'[tool.shared_build] cuda = {cuda!r} in {pyproject}; use "none", "optional" or "required"'
        )
    if cuda != "none" and not has_cu:
        raise BuildError(f"[tool.shared_build] cuda = {cuda!r} but {root / 'csrc'} has no .cu file")
    module = table.pop("module", "_C")
    python_module = table.pop("python_module", True)
    limited_api = table.pop("limited_api", True)
    common = find_common(root, table.pop("common", None))
    abi = table.pop("abi", "full")
    if abi not in ("full", "stable"):
        raise BuildError(
            f'[tool.shared_build] abi = {abi!r} in {pyproject}; use "full" or "stable"'
        )
    if abi == "stable" and not limited_api:
        raise BuildError(
            f'[tool.shared_build] abi = "stable" in {pyproject} makes one abi3 wheel: drop '
            "limited_api = false (pybind11 and the full Python C API are not stable)"
        )
    dynamic_dependencies = "dependencies" in project.get("dynamic", [])
    dependencies = table.pop("dependencies", [])
    if dependencies and not dynamic_dependencies:
        raise BuildError(
            f"[tool.shared_build] dependencies in {pyproject} are for a package whose [project] "
            'dynamic = ["dependencies"]; list them in [project] dependencies instead'
        )
    allowed = {
        "libraries",
        "library_dirs",
        "include_dirs",
        "extra_link_args",
        "define_macros",
        "extra_compile_args",
    }
    unknown = set(table) - allowed
    if unknown:
        raise BuildError(
            f"[tool.shared_build] in {pyproject} has unknown keys {sorted(unknown)}; known: "
            f"abi, common, cuda, dependencies, module, python_module, limited_api, "
            f"{', '.join(sorted(allowed))}"
        )
    compile_args = table.get("extra_compile_args", {})
    if not (
        isinstance(compile_args, dict)
        and set(compile_args) <= {"cxx", "nvcc"}
        and all(
            isinstance(args, list) and all(isinstance(a, str) for a in args)
            for args in compile_args.values()
        )
    ):
        raise BuildError(
            f"[tool.shared_build] extra_compile_args = {compile_args!r} in {pyproject}; use a "
            'table of lists of strings keyed by "cxx" and "nvcc", e.g. '
            '{ cxx = ["-ffp-contract=off"] }'
        )
    return PackageConfig(
        root=root,
        name=name,
        version=str(project.get("version", "0")),
        cuda=cuda,
        module=module,
        python_module=bool(python_module),
        limited_api=bool(limited_api),
        common=common,
        abi=abi,
        dynamic_dependencies=dynamic_dependencies,
        dependencies=list(dependencies),
        extra=table,
        optional_dependencies={
            k: list(v) for k, v in project.get("optional-dependencies", {}).items()
        },
    )


def find_common(root: Path, relative: str | None) -> Path | None:
    """The shared source folder named by ``common``: the sdist's vendored copy
    (``_vendor/<folder name>``) or, in a checkout, the path relative to the package."""
    if relative is None:
        return None
    in_checkout = (root / relative).resolve()
    for candidate in (root / "_vendor" / in_checkout.name, in_checkout):
        if (candidate / "csrc").is_dir():
            return candidate.resolve()
    raise BuildError(
        f"[tool.shared_build] common = {relative!r}: neither {in_checkout} nor "
        f"{root / '_vendor' / in_checkout.name} has a csrc/ folder"
    )


def is_metadata_only(argv: Sequence[str]) -> bool:
    """True when setup.py was asked for metadata or an sdist, not for a build."""
    return not any(arg in BUILD_COMMANDS for arg in argv[1:])


# PEP 517 hooks that lead to a wheel. setuptools' build_meta runs setup.py (as egg_info or
# dist_info, which need no torch) already in the first of them, get_requires_for_build_wheel,
# before pip resolves the package's runtime dependencies: torch>=2.6 there is about 3 GB.
WHEEL_HOOKS = frozenset(
    {
        "get_requires_for_build_wheel",
        "prepare_metadata_for_build_wheel",
        "build_wheel",
        "get_requires_for_build_editable",
        "prepare_metadata_for_build_editable",
        "build_editable",
    }
)


def wheel_hook(orig_argv: Sequence[str]) -> str | None:
    """The PEP 517 wheel hook this process runs, or None (an sdist hook, or setup.py itself).

    Front ends (pip, build) run each hook in a fresh interpreter through pyproject_hooks'
    in-process runner, whose command line is ``python .../_in_process.py <hook> <dir>``.
    """
    for index, arg in enumerate(orig_argv[:-1]):
        if os.path.basename(arg).startswith("_in_process.py"):
            hook = orig_argv[index + 1]
            return hook if hook in WHEEL_HOOKS else None
    return None


def collect_sources(root: Path, with_cuda: bool, common: Path | None = None) -> list[str]:
    """csrc/**/*.cpp, plus *.cu and anything under a cuda/ folder when building CUDA; the
    same from the common folder's csrc/ (as absolute paths: it lies outside the package).

    Two sources that differ only in their suffix (csrc/add.cpp and csrc/add.cu) would compile
    to the same object file and one would silently overwrite the other at link time.
    """
    csrc = root / "csrc"
    if not csrc.is_dir():
        raise BuildError(f"{root} has no csrc/ folder with the C++ sources")
    sources = []
    csrc_dirs = [csrc] if common is None else [csrc, common / "csrc"]
    for path in sorted(p for d in csrc_dirs for p in d.rglob("*")):
        if path.suffix not in (".cpp", ".cu") or not path.is_file():
            continue
        base = next(d for d in csrc_dirs if d in path.parents)
        in_cuda_dir = "cuda" in path.relative_to(base).parts[:-1]
        if (path.suffix == ".cu" or in_cuda_dir) and not with_cuda:
            continue
        sources.append(path)

    def shown(path: Path) -> str:
        return str(path.relative_to(root)) if root in path.parents else str(path)

    objects: dict[Path, Path] = {}
    for path in sources:
        obj = path.with_suffix("")
        if obj in objects:
            raise BuildError(
                f"{shown(objects[obj])} and {shown(path)} would both "
                f"compile to {obj.name}.o; rename one of them"
            )
        objects[obj] = path
    if not sources:
        raise BuildError(f"{csrc} has no .cpp or .cu sources")
    # setuptools refuses absolute paths; a common folder's are relative, with "..".
    return [os.path.relpath(p, root) for p in sources]


def target_version_macro(release: str) -> str:
    """TORCH_TARGET_VERSION for a torch release ("2.13"), encoded as torch/headeronly/version.h
    encodes TORCH_ABI_VERSION: one byte each for major, minor, patch, from the top."""
    parts = [int(p) for p in Version(release).release[:3]] + [0, 0]
    major, minor, patch = parts[:3]
    return f"0x{(major << 56) | (minor << 48) | (patch << 40):016x}ULL"


def split_cuda_sources(sources: Sequence[str]) -> tuple[list[str], list[str]]:
    """(C++ sources, CUDA sources): .cu files and anything under a cuda/ folder are CUDA."""
    cpp, cuda = [], []
    for source in sources:
        path = Path(source)
        (cuda if path.suffix == ".cu" or "cuda" in path.parts[:-1] else cpp).append(source)
    return cpp, cuda


def import_torch(package: str) -> Any:
    """Import torch, or explain that pip's build isolation hid it."""
    try:
        import torch
    except ImportError as error:
        raise BuildError(
            f"building {package} needs torch, which is not importable in this build "
            f"environment ({error}); install torch first, then build with "
            f"pip install --no-build-isolation ./packages/{package} so that the build sees it"
        ) from None
    return torch


def check_setuptools() -> None:
    import setuptools

    if (
        Version(setuptools.__version__) < Version("70.1")
        and importlib.util.find_spec("wheel") is None
    ):
        raise BuildError(
            f"setuptools {setuptools.__version__} needs the 'wheel' package to build wheels; "
            "pip install -U 'setuptools>=77' (or pip install wheel)"
        )


def require_ninja(env: dict[str, str]) -> str:
    """Find ninja, adding the pip ninja package's folder to PATH when it is not on it."""
    found = shutil.which("ninja", path=env.get("PATH"))
    if found:
        return found
    candidates = [os.path.dirname(sys.executable)]
    spec = importlib.util.find_spec("ninja")
    if spec is not None:
        try:
            import ninja  # type: ignore[import-not-found]

            candidates.insert(0, ninja.BIN_DIR)
        except (ImportError, AttributeError):
            pass
    for folder in candidates:
        path = shutil.which("ninja", path=folder)
        if path:
            env["PATH"] = folder + os.pathsep + env.get("PATH", "")
            return path
    raise BuildError(
        "ninja is required to build (it compiles in parallel and rebuilds only what "
        "changed); pip install ninja"
    )


def render_build_info(info: Mapping[str, Any]) -> str:
    """The text of a package's _build_info.py: the runtime check plus what it was built against."""
    template = RUNTIME_TEMPLATE.read_text(encoding="utf-8")
    if BUILD_INFO_MARKER not in template:
        raise BuildError(f"{RUNTIME_TEMPLATE} lost its marker line {BUILD_INFO_MARKER!r}")
    filled = f"BUILD_INFO: dict[str, Any] = {pprint.pformat(dict(info), sort_dicts=True)}"
    return "# Generated by shared_build at build time; do not edit.\n" + template.replace(
        BUILD_INFO_MARKER, filled
    )


def _compiler_version(command: str) -> str:
    try:
        out = subprocess.run(
            [*command.split(), "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return command
    return out.splitlines()[0].strip() if out else command


def git_provenance(source: Path) -> dict[str, Any]:
    """The git commit the sources were built from and whether the work tree differed from
    it (tracked files only); both None outside a git checkout (an sdist's build)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(source), *args],
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return {"git_commit": None, "git_dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit, "git_dirty": None if status is None else bool(status)}


def runtime_requirements(
    config: PackageConfig, env: Mapping[str, str], torch_version: str | None
) -> list[str] | None:
    """The [project] dependencies shared_build writes for a package that declares them
    dynamic, or None. The torch requirement follows the ABI: the release built against for
    the full ABI (its C++ symbols change with every release; torchvision pins its torch the
    same way), so that pip refuses or replaces a mismatched torch before an import could
    fail; the stable target and newer for the stable ABI. Without torch (an sdist's
    metadata) the oldest torch a build can take, made exact by the build. Then packaging,
    which the runtime check (_build_info.py) imports, and [tool.shared_build] dependencies.
    """
    if not config.dynamic_dependencies:
        return None
    if config.abi == "stable":
        target = (
            knobs.stable_target(env, STABLE_TARGET, torch_version)
            if torch_version
            else env.get("SHARED_BUILD_STABLE_TARGET", "").strip() or STABLE_TARGET
        )
        torch_requirement = f"torch>={target}"
    elif torch_version:
        torch_requirement = f"torch=={Version(torch_version).public}"
    else:
        torch_requirement = f"torch>={knobs.OLDEST_STABLE_TARGET}"
    return [torch_requirement, "packaging", *config.dependencies]


def _site_dirs(torch_module: Any) -> list[str]:
    dirs = [str(Path(torch_module.__file__).resolve().parents[1])]
    try:
        dirs += site.getsitepackages()
    except AttributeError:
        pass
    user = site.getusersitepackages()
    if isinstance(user, str):
        dirs.append(user)
    return [d for i, d in enumerate(dirs) if d not in dirs[:i]]


def _torch_archs(torch_module: Any) -> list[str]:
    """The GPU architectures this torch's own kernels were built for ("8.0", ...), read
    without a GPU; [] where torch does not say."""
    try:
        flags = torch_module._C._cuda_getArchFlags()
    except (AttributeError, RuntimeError):
        return []
    return cuda_mod.parse_nvcc_gpu_codes(flags or "")


def _visible_capabilities(torch_module: Any) -> list[tuple[int, int]]:
    try:
        if not torch_module.cuda.is_available():
            return []
        return [
            torch_module.cuda.get_device_capability(i)
            for i in range(torch_module.cuda.device_count())
        ]
    except Exception:  # a broken driver must not stop a build that targets other GPUs
        return []


def _make_sdist(root: Path, common: Path | None = None) -> type:
    from setuptools.command.sdist import sdist

    class SdistWithSharedBuild(sdist):
        """An sdist that carries every source file of the package and copies of shared_build
        and of the common folder, so that it builds on a machine without this repository."""

        def make_release_tree(self, base_dir: str, files: list[str]) -> None:
            # setuptools takes the file list from egg_info's manifest, which knows nothing
            # of headers or of folders outside the Python packages; add them here.
            extra = []
            for dirpath, dirnames, filenames in os.walk(root):
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
            # The common folder's files reach the manifest as "../../<folder>/...": they go
            # into _vendor below, never beside the release tree.
            inside = {f for f in files if not os.path.normpath(f).startswith("..")}
            super().make_release_tree(base_dir, sorted(inside | set(extra)))
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(HERE, Path(base_dir) / "_vendor" / "shared_build", ignore=ignore)
            if common is not None:
                shutil.copytree(common, Path(base_dir) / "_vendor" / common.name, ignore=ignore)

    return SdistWithSharedBuild


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


def keep_objects_inside(compiler: Any) -> None:
    """Make a common folder's sources (``../../lltm_common/csrc/x.cpp``: setuptools takes
    only relative paths) compile to objects inside the build folder, each ``..`` of the
    path becoming ``_up``, instead of beside the sources or in another build's folder."""
    original = compiler.object_filenames

    def object_filenames(sources, strip_dir=False, output_dir=""):  # type: ignore[no-untyped-def]
        inside = [
            os.path.join(*("_up" if part == ".." else part for part in Path(source).parts))
            for source in sources
        ]
        return original(inside, strip_dir, output_dir)

    compiler.object_filenames = object_filenames


def check_cxx_runtime(library: str, linker: str) -> None:
    """Fail the build when ``library`` does not load libstdc++.so.6 itself (Linux): it
    carries a C++ runtime of its own, which, loaded beside torch's, crashes at the first
    stream or exception that crosses over (knobs.cxx_runtime_link_args)."""
    if not sys.platform.startswith("linux") or knobs.loads_shared_libstdcxx(library) is not False:
        return
    raise BuildError(
        f"{os.path.basename(library)} does not load libstdc++.so.6: {linker!r}, which "
        "linked it, ignored -l:libstdc++.so.6, so the library carries a C++ runtime of its "
        "own (a static libstdc++, from a wrapper adding -static-libstdc++, or libc++). "
        "Beside the libstdc++.so.6 torch loads, it crashes at the first C++ stream or "
        "exception that crosses between them. Build with a compiler that links the shared libstdc++: set CXX (and LDSHARED "
        "or LDCXXSHARED, where set) to e.g. /usr/bin/g++"
    )


def _make_build_ext(info: dict[str, Any], python_module: bool) -> type:
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
                files[STABLE_OP_FILE] = (
                    "# Copied from shared_build at build time; do not edit.\n"
                    + STABLE_OP_TEMPLATE.read_text(encoding="utf-8")
                )
            return files

        def _generated_paths(self) -> list[str]:
            folders = {os.path.dirname(self.get_ext_fullpath(ext.name)) for ext in self.extensions}
            return [
                os.path.join(folder, name) for folder in sorted(folders) for name in self.generated
            ]

        def run(self) -> None:
            for ext in self.extensions:
                for path in remove_stale_modules(self.get_ext_fullpath(ext.name)):
                    _log(f"removed {path}, a build of {ext.name} with another file name")
            super().run()
            files = self._generated()
            for path in self._generated_paths():
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(files[os.path.basename(path)])

        def get_outputs(self) -> list[str]:
            return [*super().get_outputs(), *self._generated_paths()]

        def build_extensions(self) -> None:
            keep_objects_inside(self.compiler)
            super().build_extensions()

        def build_extension(self, ext: Any) -> None:
            super().build_extension(ext)
            try:
                # A C++ extension links with CXX in place of the linker's first word.
                linker = getattr(self.compiler, "compiler_cxx", None) or self.compiler.linker_so
                check_cxx_runtime(self.get_ext_fullpath(ext.name), " ".join(linker))
            except BuildError as error:
                raise SystemExit(f"error: {ext.name}: {error}") from None

    return BuildExtWithInfo


def setup_kwargs(package_root: str | os.PathLike[str], **overrides: Any) -> dict[str, Any]:
    """Everything ``setuptools.setup()`` needs to build the package at package_root.

    overrides may add to the extension: libraries, library_dirs, include_dirs,
    extra_link_args, define_macros, extra_compile_args ({"cxx": [...], "nvcc": [...]}), and
    build_info (a dict recorded in _build_info.py, e.g. which backend was compiled in).
    """
    try:
        return _setup_kwargs(
            Path(package_root), os.environ, sys.argv, overrides, getattr(sys, "orig_argv", ())
        )
    except BuildError as error:
        raise SystemExit(f"error: {error}") from None


def build_root(env: Mapping[str, str], package: str) -> Path:
    """The out-of-tree folder for the package's build folders and its egg-info.

    SHARED_BUILD_DIR/<package> when set (kept: ninja's objects make the next build
    incremental), else a temporary folder removed when this process ends, built or failed:
    a plain ``pip install ./packages/<name>`` leaves nothing in the source tree.
    """
    chosen = env.get("SHARED_BUILD_DIR", "").strip()
    if chosen:
        root = Path(chosen).resolve() / package
        root.mkdir(parents=True, exist_ok=True)
        return root
    root = Path(tempfile.mkdtemp(prefix=f"shared_build-{package}-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def _egg_info_options(base: Path) -> dict[str, str]:
    folder = base / "egg-info"
    folder.mkdir(parents=True, exist_ok=True)
    return {"egg_base": str(folder)}


# The keys of [tool.shared_build.extra] and of setup_kwargs' overrides that add to the
# extension; both are merged once, the package's configuration first.
_OPTION_LISTS = ("include_dirs", "library_dirs", "libraries", "extra_link_args")


@dataclass
class Options:
    """What pyproject.toml's [tool.shared_build.extra] and setup.py's overrides add to the
    extension, merged."""

    include_dirs: list[str] = field(default_factory=list)
    library_dirs: list[str] = field(default_factory=list)
    libraries: list[str] = field(default_factory=list)
    extra_link_args: list[str] = field(default_factory=list)
    define_macros: list[tuple[str, str | None]] = field(default_factory=list)
    extra_compile_args: dict[str, list[str]] = field(default_factory=dict)
    build_info: dict[str, Any] = field(default_factory=dict)


def merge_options(extra: Mapping[str, Any], overrides: Mapping[str, Any]) -> Options:
    """extra, then overrides, for every key; a macro given as a name alone has no value."""
    options = Options(build_info=dict(overrides.get("build_info", {})))
    for key in _OPTION_LISTS:
        setattr(options, key, [*extra.get(key, []), *overrides.get(key, [])])
    options.define_macros = [
        tuple(m) if isinstance(m, (list, tuple)) else (m, None)
        for m in [*extra.get("define_macros", []), *overrides.get("define_macros", [])]
    ]
    for source in (extra, overrides):
        for key, args in source.get("extra_compile_args", {}).items():
            options.extra_compile_args.setdefault(key, []).extend(args)
    return options


def _python_packages(root: Path, config: PackageConfig) -> dict[str, Any]:
    """The setup() arguments of the package's Python side: its packages (and the common
    folder's python/, as <name>._<folder>), where they are, and the sdist command."""
    packages = sorted(
        {
            p.parent.relative_to(root / "src").as_posix().replace("/", ".")
            for p in (root / "src").rglob("__init__.py")
        }
    )
    package_dir = {"": "src"}
    if config.common is not None:
        common_package = f"{config.name}._{config.common.name.removesuffix('_common')}"
        packages.append(common_package)
        # setuptools takes only relative paths here, even ones that leave the package.
        package_dir[common_package] = Path(
            os.path.relpath(config.common / "python", root)
        ).as_posix()
    return {
        "packages": packages,
        "package_dir": package_dir,
        "cmdclass": {"sdist": _make_sdist(root, config.common)},
    }


@dataclass
class CudaBuild:
    """Whether the build compiles CUDA, with which toolkit, and what that adds."""

    enabled: bool = False
    toolkit: cuda_mod.CudaToolkit | None = None
    include_dirs: list[str] = field(default_factory=list)
    arch_list: str | None = None
    arch_origin: str | None = None
    rpath_args: list[str] = field(default_factory=list)


def resolve_cuda(
    env: dict[str, str], config: PackageConfig, torch: Any, out_of_tree: Path
) -> CudaBuild:
    """USE_CUDA, the package's cuda key and the torch decide; with CUDA on, the toolkit
    becomes CUDA_HOME (env and cpp_extension's) and the arch list TORCH_CUDA_ARCH_LIST."""
    mode = knobs.use_cuda_mode(env)
    chosen = None
    if config.cuda != "none" and mode != "off" and torch.version.cuda is not None:
        # Where a pip compiler gets its CUDA_HOME-shaped folder of links: per torch, since
        # each torch version pins its own CUDA.
        cuda_home_dir = out_of_tree / "cuda_home" / f"torch{torch.__version__}".replace("+", "_")
        chosen = cuda_mod.select_toolkit(
            env, torch.version.cuda, _site_dirs(torch), str(cuda_home_dir.resolve())
        )
    toolkit = chosen.toolkit if chosen else None
    if not cuda_mod.decide_cuda(mode, config.cuda, torch.version.cuda, toolkit, config.name):
        return CudaBuild()
    assert chosen is not None and toolkit is not None
    warning = cuda_mod.minor_mismatch_warning(toolkit, torch.version.cuda)
    if warning:
        _log(f"warning: {warning}")
    from torch.utils import cpp_extension

    env["CUDA_HOME"] = toolkit.root
    # cpp_extension resolved CUDA_HOME when it was imported; make it use our choice.
    cpp_extension.CUDA_HOME = toolkit.root
    toolkit_archs = cuda_mod.parse_nvcc_gpu_codes(
        subprocess.run(
            [toolkit.nvcc, "--list-gpu-code"], capture_output=True, text=True, check=False
        ).stdout
    )
    arch_list, arch_origin = cuda_mod.resolve_arch_list(
        env, _visible_capabilities(torch), toolkit_archs, _torch_archs(torch)
    )
    env["TORCH_CUDA_ARCH_LIST"] = arch_list
    rpath_args = []
    if toolkit.pip_dir:
        # Built with NVIDIA's pip runtime: the library finds libcudart.so.13 beside it in
        # site-packages when a C++ program (no Python, no torch import first) loads it,
        # as torch's own libraries do.
        site_dir = os.path.dirname(os.path.dirname(toolkit.pip_dir))
        cuda_rpath = os.path.relpath(
            os.path.join(toolkit.pip_dir, "lib"), os.path.join(site_dir, config.name)
        )
        rpath_args.append(f"-Wl,-rpath,$ORIGIN/{cuda_rpath}")
    return CudaBuild(
        enabled=True,
        toolkit=toolkit,
        include_dirs=list(chosen.extra_include_dirs),
        arch_list=arch_list,
        arch_origin=arch_origin,
        rpath_args=rpath_args,
    )


@dataclass
class Flags:
    """The compiler's arguments ({"cxx": [...], "nvcc": [...]}), include folders and the
    link arguments (the sanitizers', the shared C++ runtime)."""

    compile_args: dict[str, list[str]]
    include_dirs: list[str]
    link_args: list[str] = field(default_factory=list)


def compile_flags(
    env: Mapping[str, str],
    root: Path,
    config: PackageConfig,
    options: Options,
    cuda: CudaBuild,
    openmp: bool,
    debug: bool,
    sanitize: Sequence[str],
) -> Flags:
    """Optimisation or debug, sanitizers, OpenMP, the overrides, the glibc shims and the
    warnings; the include folders: shared_build's, the package's, the common folder's,
    the configured ones, CUDA's."""
    from torch.utils import cpp_extension

    sanitize_cxx, sanitize_link = knobs.sanitize_args(sanitize, debug)
    compile_args = knobs.compile_args(debug, cuda.enabled)
    compile_args["cxx"] += sanitize_cxx
    compile_args["cxx"] += knobs.openmp_compile_args(openmp, sys.platform)
    for key, extra in options.extra_compile_args.items():
        compile_args.setdefault(key, []).extend(extra)
    ours = [str(INCLUDE_DIR), str(root / "csrc")]
    include_dirs = [
        *ours,
        *([str(config.common / "csrc")] if config.common else []),
        *options.include_dirs,
        *cuda.include_dirs,
    ]
    if sys.platform.startswith("linux"):
        # The wheel needs no glibc newer than 2.28 (manylinux_2_28):
        # - glibc_compat/ ahead of the system's headers, for C++ and for nvcc's host
        #   compiler (glibc_compat/sys/single_threaded.h says why);
        # - NVTX_DISABLE: CUDA 13.2's headers compile NVTX3's loader into every .cu
        #   object, and it calls dlopen, dlsym and dlclose at GLIBC_2.34. Our kernels
        #   emit no NVTX ranges (torch's own, in its libraries, are untouched).
        for key in compile_args:
            compile_args[key] += ["-isystem", str(GLIBC_COMPAT_DIR), "-DNVTX_DISABLE"]
    compile_args["cxx"] += knobs.warning_args(
        knobs.is_werror(env),
        [
            *cpp_extension.include_paths("cuda" if cuda.enabled else "cpu"),
            sysconfig.get_path("include"),
            *(d for d in include_dirs if d not in ours),  # CUDA's, OpenCV's ...
        ],
    )
    return Flags(
        compile_args, include_dirs, [*sanitize_link, *knobs.cxx_runtime_link_args(sys.platform)]
    )


def make_extensions(
    config: PackageConfig,
    sources: list[str],
    flags: Flags,
    options: Options,
    cuda: CudaBuild,
    link_args: list[str],
    stable_target: str | None,
) -> tuple[list[Any], str | None]:
    """The extensions and the name of the CUDA library (None without one).

    One extension, <name>.<module>, a CUDAExtension when it compiles CUDA. A stable-ABI
    build with CUDA puts its .cu files into a second one, <module>_cuda, which the package
    loads only under a CUDA torch, so that the same wheel imports under a CPU-only torch.
    WITH_CUDA is defined where CUDA is compiled; USE_CUDA too in the second library (the C
    shim declares its CUDA entry points, the current stream and stream guards, under it).
    """
    from torch.utils import cpp_extension

    def compile_args() -> dict[str, list[str]]:
        # A copy per extension: cpp_extension adds to the lists it is given.
        return {key: list(args) for key, args in flags.compile_args.items()}

    macros = list(options.define_macros)
    if stable_target is not None:
        macros.append(("TORCH_TARGET_VERSION", target_version_macro(stable_target)))
    extensions = []
    cuda_library = None
    if stable_target is not None and cuda.enabled:
        sources, cuda_sources = split_cuda_sources(sources)
        cuda_library = f"{config.module}_cuda"
        extensions.append(
            cpp_extension.CUDAExtension(
                name=f"{config.name}.{cuda_library}",
                sources=cuda_sources,
                include_dirs=list(flags.include_dirs),
                define_macros=[*macros, ("WITH_CUDA", None), ("USE_CUDA", None)],
                extra_compile_args=compile_args(),
                extra_link_args=[*options.extra_link_args, *link_args],
                py_limited_api=True,
            )
        )
    main_cuda = cuda.enabled and cuda_library is None
    extension_cls = cpp_extension.CUDAExtension if main_cuda else cpp_extension.CppExtension
    main = extension_cls(
        name=f"{config.name}.{config.module}",
        sources=sources,
        include_dirs=list(flags.include_dirs),
        library_dirs=list(options.library_dirs),
        libraries=list(options.libraries),
        extra_link_args=[*options.extra_link_args, *link_args],
        define_macros=[*macros, *([("WITH_CUDA", None)] if main_cuda else [])],
        extra_compile_args=compile_args(),
        # By default nothing uses libtorch_python or pybind11: ops reach Python through the
        # dispatcher, so one abi3 wheel serves every CPython >= 3.10, and a library without
        # a Python module links into a C++ program without libpython. limited_api = false
        # is for a package that binds functions with pybind11 (full C API, torch_python).
        py_limited_api=config.limited_api or not config.python_module,
    )
    return [main, *extensions], cuda_library


def build_tag(torch_version: str, cuda: bool, debug: bool, sanitize: Sequence[str]) -> str:
    """The build folder's name: one per torch/Python/CUDA/debug/sanitizer combination, so
    that switching torch never reuses objects compiled against other headers, and
    switching back recompiles nothing."""
    tag = (
        f"torch{torch_version}-{sys.implementation.cache_tag}{'-cuda' if cuda else ''}"
        f"{'-debug' if debug else ''}{''.join('-' + s for s in sanitize)}"
    )
    return tag.replace("+", "_")


def _setup_kwargs(
    root: Path,
    env: dict[str, str],
    argv: Sequence[str],
    overrides: Mapping[str, Any],
    orig_argv: Sequence[str] = (),
) -> dict[str, Any]:
    root = root.resolve()
    if root.is_file():
        root = root.parent
    config = read_config(root)
    package = config.name
    kwargs = _python_packages(root, config)
    if is_metadata_only(argv):
        # Building a wheel without torch cannot end well: say so in the front end's first
        # hook, before it downloads the runtime dependencies. An sdist needs no torch.
        metadata_torch = None
        if wheel_hook(orig_argv) is not None:
            metadata_torch = import_torch(package).__version__
        # egg_info (get_requires_*, sdist) writes src/<name>.egg-info by default; an sdist
        # needs only the PKG-INFO it copies from there.
        kwargs["options"] = {"egg_info": _egg_info_options(build_root(env, package))}
        requirements = runtime_requirements(config, env, metadata_torch)
        if requirements is not None:
            kwargs["install_requires"] = requirements
        return kwargs

    torch = import_torch(package)
    check_setuptools()
    compiler = knobs.find_cxx(env)
    require_ninja(env)
    out_of_tree = build_root(env, package)
    options = merge_options(config.extra, overrides)
    cuda = resolve_cuda(env, config, torch, out_of_tree)
    debug = knobs.is_debug(env)
    sanitize = knobs.sanitizers(env)
    flags = compile_flags(
        env, root, config, options, cuda, torch.backends.openmp.is_available(), debug, sanitize
    )
    jobs = knobs.max_jobs(env, knobs.cpu_count(), knobs.available_memory_bytes(), cuda.enabled)
    env["MAX_JOBS"] = str(jobs)
    # A compiler cache in front of c++ and nvcc: torch.utils.cpp_extension (2.13 on) puts
    # ccache or sccache in front of both in its ninja file whenever one is on PATH, and
    # TORCH_NO_COMPILER_WRAPPER=1 stops it; USE_CCACHE decides which, and records it.
    launcher = knobs.compiler_launcher(env)
    if launcher is None:
        env["TORCH_NO_COMPILER_WRAPPER"] = "1"
    else:
        env.pop("TORCH_NO_COMPILER_WRAPPER", None)
    target = None
    if config.abi == "stable":
        try:
            target = knobs.stable_target(env, STABLE_TARGET, torch.__version__)
        except BuildError as error:
            raise BuildError(f"{package}: {error}") from None
    extensions, cuda_library = make_extensions(
        config,
        collect_sources(root, cuda.enabled, config.common),
        flags,
        options,
        cuda,
        [*flags.link_args, *cuda.rpath_args],
        target,
    )
    toolkit = cuda.toolkit
    info: dict[str, Any] = {
        "package": package,
        "version": config.version,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda": str(toolkit.version) if toolkit else None,
        "nvcc": toolkit.nvcc if toolkit else None,
        "arch_list": cuda.arch_list,
        "debug": debug,
        "sanitize": list(sanitize),
        "python": platform.python_version(),
        "compiler": _compiler_version(compiler.command),
        "compiler_launcher": launcher,
        "source_dir": str(root),
        "abi": config.abi,
        "torch_target": target,
        "cuda_library": cuda_library,
        **git_provenance(root),
        **options.build_info,
    }
    build_base = str(out_of_tree / build_tag(torch.__version__, cuda.enabled, debug, sanitize))
    cuda_summary = (
        f"on (nvcc {toolkit.version} at {toolkit.nvcc}, {toolkit.origin}, "
        f"TORCH_CUDA_ARCH_LIST={cuda.arch_list} from {cuda.arch_origin})"
        if toolkit
        else "off"
    )
    _log(
        f"{package}: CUDA {cuda_summary}, {'DEBUG -O0 -g' if debug else '-O3'}"
        f"{', WERROR -Wall -Wextra -Werror' if knobs.is_werror(env) else ''}"
        f"{', SANITIZE=' + ','.join(sanitize) if sanitize else ''}, MAX_JOBS={jobs}, "
        f"compiler cache {launcher or 'off'}, torch {torch.__version__}, build folder {build_base}"
    )

    requirements = runtime_requirements(config, env, torch.__version__)
    if requirements is not None:
        kwargs["install_requires"] = requirements
    kwargs["ext_modules"] = extensions
    kwargs["cmdclass"]["build_ext"] = _make_build_ext(info, config.python_module)
    kwargs["options"] = {
        "build": {"build_base": build_base},
        "egg_info": _egg_info_options(out_of_tree),
    }
    if config.limited_api:
        kwargs["options"]["bdist_wheel"] = {"py_limited_api": "cp310"}
    return kwargs


def pkg_config(name: str, env: Mapping[str, str] | None = None) -> dict[str, list[str]] | None:
    """include_dirs, library_dirs and libraries of a pkg-config package, or None if absent."""
    program = shutil.which("pkg-config")
    if program is None:
        return None
    run_env = dict(os.environ if env is None else env)
    result = {}
    for key, flag, prefix in (
        ("include_dirs", "--cflags-only-I", "-I"),
        ("library_dirs", "--libs-only-L", "-L"),
        ("libraries", "--libs-only-l", "-l"),
    ):
        proc = subprocess.run(
            [program, flag, name], capture_output=True, text=True, env=run_env, check=False
        )
        if proc.returncode != 0:
            return None
        result[key] = [
            item[len(prefix) :] for item in proc.stdout.split() if item.startswith(prefix)
        ]
    return result
