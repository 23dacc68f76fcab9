"""Step 1 of a build: what is asked for (pyproject.toml, setup.py's overrides, the knobs),
read and checked before torch is imported; no later step reads them again."""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from .errors import BuildError
from .knobs import Knobs, read_knobs

# The list keys of [tool.shared_build] and of setup_kwargs' overrides that add to the
# extension, merged once, the package's configuration first (merge_options).
_OPTION_LISTS = ("include_dirs", "library_dirs", "libraries", "extra_link_args")


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
    abi: str = "full"
    # [project] dynamic = ["dependencies"]: shared_build writes them (runtime_requirements).
    dynamic_dependencies: bool = False
    dependencies: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    setuptools_requirement: str | None = None  # of [build-system] requires


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
    if not (name := project.get("name")):
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
    allowed = {*_OPTION_LISTS, "define_macros", "extra_compile_args"}
    if unknown := set(table) - allowed:
        raise BuildError(
            f"[tool.shared_build] in {pyproject} has unknown keys {sorted(unknown)}; known: "
            f"abi, cuda, dependencies, module, python_module, limited_api, "
            f"{', '.join(sorted(allowed))}"
        )
    compile_args = table.get("extra_compile_args", {})
    keyed = isinstance(compile_args, dict) and set(compile_args) <= {"cxx", "nvcc"}
    if not keyed or not all(
        isinstance(args, list) and all(isinstance(a, str) for a in args)
        for args in compile_args.values()
    ):
        raise BuildError(
            f"[tool.shared_build] extra_compile_args = {compile_args!r} in {pyproject}; use a "
            'table of lists of strings keyed by "cxx" and "nvcc", e.g. '
            '{ cxx = ["-ffp-contract=off"] }'
        )
    build_requires = data.get("build-system", {}).get("requires", [])
    setuptools = next((r for r in build_requires if _requirement_name(r) == "setuptools"), None)
    return PackageConfig(
        root=root,
        name=name,
        version=str(project.get("version", "0")),
        cuda=cuda,
        module=module,
        python_module=bool(python_module),
        limited_api=bool(limited_api),
        abi=abi,
        dynamic_dependencies=dynamic_dependencies,
        dependencies=list(dependencies),
        extra=table,
        setuptools_requirement=setuptools,
    )


def _requirement_name(requirement: str) -> str | None:
    try:
        return Requirement(requirement).name.lower()
    except InvalidRequirement:
        return None


def check_setuptools(
    requirement: str | None, building: bool = True, version: str | None = None
) -> None:
    """The setuptools here meets the package's [build-system] ``requirement`` (pip's
    --no-build-isolation builds with the one installed) and, when ``building``, can build a
    wheel."""
    if version is None:
        from setuptools import __version__ as version
    if requirement is not None and not Requirement(requirement).specifier.contains(
        version, prereleases=True
    ):
        raise BuildError(
            f"the package's [build-system] requires {requirement}, but this environment "
            f"has setuptools {version}, which pip install --no-build-isolation does not "
            "upgrade (an older setuptools fails reading pyproject.toml, e.g. "
            '"`project.license` must be valid exactly by one definition"); '
            f"pip install -U '{requirement}'"
        )
    if building and Version(version) < Version("70.1") and not importlib.util.find_spec("wheel"):
        raise BuildError(
            f"setuptools {version} needs the 'wheel' package to build wheels; "
            "pip install -U 'setuptools>=77' (or pip install wheel)"
        )


# Commands that compile; any other invocation of setup.py (egg_info, dist_info, sdist,
# --version) only needs metadata and must work without torch, e.g. in an isolated sdist build.
BUILD_COMMANDS = {"build", "build_ext", "bdist_wheel", "bdist", "bdist_egg", "install"}
BUILD_COMMANDS |= {"develop", "editable_wheel"}


def is_metadata_only(argv: Sequence[str]) -> bool:
    """True when setup.py was asked for metadata or an sdist, not for a build."""
    return not any(arg in BUILD_COMMANDS for arg in argv[1:])


# PEP 517 hooks that lead to a wheel. setuptools' build_meta runs setup.py (as egg_info or
# dist_info, which need no torch) already in the first of them, get_requires_for_build_wheel,
# before pip resolves the package's runtime dependencies (torch, about 3 GB).
WHEEL_HOOKS = {
    f"{hook}_{kind}"
    for hook in ("get_requires_for_build", "prepare_metadata_for_build", "build")
    for kind in ("wheel", "editable")
}


def wheel_hook(orig_argv: Sequence[str]) -> str | None:
    """The PEP 517 wheel hook this process runs (front ends run ``python
    .../_in_process.py <hook> <dir>``), or None: an sdist hook, or setup.py itself."""
    for index, arg in enumerate(orig_argv[:-1]):
        if os.path.basename(arg).startswith("_in_process.py"):
            hook = orig_argv[index + 1]
            return hook if hook in WHEEL_HOOKS else None
    return None


def build_root(env: Mapping[str, str], package: str) -> Path:
    """The out-of-tree folder for the package's build folders and its egg-info:
    SHARED_BUILD_DIR/<package> when set (kept, for incremental builds), else a temporary
    folder removed when this process ends, built or failed."""
    if chosen := env.get("SHARED_BUILD_DIR", "").strip():
        root = Path(chosen).resolve() / package
        root.mkdir(parents=True, exist_ok=True)
        return root
    root = Path(tempfile.mkdtemp(prefix=f"shared_build-{package}-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


@dataclass
class Options:
    """What [tool.shared_build] and setup.py's overrides add to the extension, merged."""

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


@dataclass
class BuildConfig:
    """Step 1's result. ``env`` is the build's environment (os.environ for a real build),
    where later steps write their decisions for cpp_extension (CUDA_HOME, MAX_JOBS ...)."""

    package: PackageConfig
    options: Options = field(default_factory=Options)
    knobs: Knobs = field(default_factory=Knobs)
    build_root: Path = Path(".")
    env: dict[str, str] = field(default_factory=dict)


def configure(
    package: PackageConfig, env: dict[str, str], overrides: Mapping[str, Any]
) -> BuildConfig:
    """Everything a build is asked for, and the out-of-tree folder it goes into."""
    return BuildConfig(
        package=package,
        options=merge_options(package.extra, overrides),
        knobs=read_knobs(env),
        build_root=build_root(env, package.name),
        env=env,
    )
