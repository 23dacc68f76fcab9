"""Every package under packages/: its layout, its import, its ops' registrations.

Runs against the installed packages. A package nox could not build in this environment
(e.g. a CUDA-only one under a CPU-only torch) arrives in REPO_SKIPPED_PACKAGES as
name=reason and is skipped here by name with that reason.
"""

from __future__ import annotations

import importlib
import os
import re
import tomllib
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))
SKIPPED = dict(
    item.split("=", 1)
    for item in os.environ.get("REPO_SKIPPED_PACKAGES", "").split(",")
    if "=" in item
)


def package_names() -> list[str]:
    return [p.name for p in PACKAGE_DIRS]


def is_stable(root: Path) -> bool:
    """[tool.shared_build] abi = "stable": one wheel for the target torch and every newer one."""
    project = tomllib.loads((root / "pyproject.toml").read_text())
    return project.get("tool", {}).get("shared_build", {}).get("abi") == "stable"


def import_or_skip(name: str):
    if name in SKIPPED:
        pytest.skip(f"{name} not built in this environment: {SKIPPED[name]}")
    return importlib.import_module(name)


def test_packages_are_discovered():
    assert "add_ext" in package_names()


@pytest.mark.parametrize("root", PACKAGE_DIRS, ids=lambda p: p.name)
def test_layout(root: Path):
    """The fixed slots of STYLE.md: metadata, a setup.py that calls shared_build, sources,
    the Python package, tests, a README."""
    name = root.name
    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert project["project"]["name"] == name, "the package name is its folder's name"
    requires = project["build-system"]["requires"]
    assert "torch" not in " ".join(requires), (
        "torch must not be a build requirement: the build must see the torch you run"
    )
    assert "shared_build" in requires, "shared_build is an ordinary build requirement"
    assert "setup_kwargs(" in (root / "setup.py").read_text()
    assert "sys.path" not in (root / "setup.py").read_text()
    # shared_build writes them: the wheel's metadata names the torch it needs.
    assert project["project"].get("dynamic") == ["dependencies"], "dynamic dependencies"
    assert "dependencies" not in project["project"]
    assert list((root / "csrc").rglob("*.cpp")), "C++ sources live in csrc/"
    assert (root / "src" / name / "__init__.py").is_file()
    assert (root / "src" / name / "ops.py").is_file()
    assert list((root / "tests").glob("test_*.py")), "each package has its own tests"
    assert (root / "README.md").is_file()


# Where each dispatch key's kernels live (the README's layout section): a folder per key,
# each kernel file there named after its op, <op>_kernel.cpp (or .cu).
KERNEL_FOLDERS = {
    "CPU": ("cpu", ".cpp"),
    "CUDA": ("cuda", ".cu"),
    "Autograd": ("autograd", ".cpp"),
    "CompositeExplicitAutograd": ("composite", ".cpp"),
}
_SCHEMAS = re.compile(r"\b(?:STABLE_)?TORCH_LIBRARY(?:_FRAGMENT)?\(\s*\w+")
_IMPL = re.compile(r"\b(?:STABLE_)?TORCH_LIBRARY_IMPL\(\s*\w+\s*,\s*(\w+)")
_SCHEMA = re.compile(r'"(\w+)\((?:Tensor|int|float|bool|str|SymInt|Scalar|ScalarType|\))')
_LINE_COMMENT = re.compile(r"//[^\n]*")


def csrc_dirs(root: Path) -> list[tuple[Path, Path]]:
    """(csrc folder, its schema file): the package's, and each shared folder it links into
    its csrc/ (csrc/lltm_common: lltm_common/csrc/lltm.h holds the LLTM's schemas, which
    each LLTM package's TORCH_LIBRARY block defines)."""
    dirs = [(root / "csrc", root / "csrc" / f"{root.name}.cpp")]
    for link in sorted(p for p in (root / "csrc").iterdir() if p.is_symlink() and p.is_dir()):
        dirs.append((link, link / f"{link.name.removesuffix('_common')}.h"))
    return dirs


def kernel_names(root: Path) -> set[str]:
    """What a kernel file may be named after: each op the package's schema files define
    (leading underscores dropped), and the common folder's stem (lltm)."""
    names = set()
    for csrc, schema_file in csrc_dirs(root):
        if schema_file.is_file():
            names |= {op.lstrip("_") for op in _SCHEMA.findall(schema_file.read_text())}
        if csrc.parent != root:
            names.add(schema_file.stem)
    return names


@pytest.mark.parametrize("root", PACKAGE_DIRS, ids=lambda p: p.name)
def test_kernels_sit_in_the_slot_of_their_dispatch_key(root: Path):
    """The schemas (TORCH_LIBRARY) in the schema file, with the Meta kernels; a CPU, CUDA,
    Autograd or CompositeExplicitAutograd kernel in csrc/<cpu|cuda|autograd|composite>/
    <op>_kernel.cpp|.cu (composite ones may also sit beside the schemas); every
    *_kernel file of those folders named after an op of the library (or lltm)."""
    schema_files = [schema_file for _, schema_file in csrc_dirs(root)]
    assert all(f.is_file() for f in schema_files), f"the schema files: {schema_files}"
    ops = kernel_names(root)
    folders = {folder for folder, _ in KERNEL_FOLDERS.values()}
    misplaced = []
    registrations = 0
    for csrc, schema_file in csrc_dirs(root):
        for path in sorted(csrc.rglob("*")):
            if path.suffix not in (".cpp", ".cu"):
                continue
            relative = path.relative_to(csrc)
            code = _LINE_COMMENT.sub("", path.read_text())
            in_slot = relative.parts[:-1] and relative.parts[0] in folders
            op = path.stem.removesuffix("_kernel")
            if in_slot and op != path.stem and op not in ops:
                misplaced.append(f"{relative} is named after no op of {sorted(ops)}")
            if _SCHEMAS.search(code) and path != schema_file:
                misplaced.append(f"{relative} defines schemas outside {schema_file.name}")
            for key in _IMPL.findall(code):
                registrations += 1
                folder, suffix = KERNEL_FOLDERS.get(key, (None, None))
                if path == schema_file and key in ("Meta", "CompositeExplicitAutograd"):
                    continue
                if not (
                    relative.parts[:-1] == (folder,)
                    and path.suffix == suffix
                    and path.stem.endswith("_kernel")
                ):
                    misplaced.append(f"{relative} registers {key}")
    assert registrations, "no TORCH_LIBRARY_IMPL found: the pattern no longer matches"
    assert not misplaced, misplaced


_IMPL_BLOCK = re.compile(
    r"\b(?:STABLE_)?TORCH_LIBRARY_IMPL\(\s*\w+\s*,\s*(\w+)\s*,\s*\w+\s*\)\s*\{(.*?)\n\}", re.S
)
# A function's address (&f, &ns::f<T>) or a constant holding one (ns::f_meta<T>).
_REGISTERED = re.compile(r'\.impl\(\s*"(\w+)"\s*,\s*(?:TORCH_BOX\(\s*)?(?:&\s*)?(?:\w+::)*(\w+)')
_SUFFIX = {"Meta": "_meta", "Autograd": "_autograd"}


@pytest.mark.parametrize("root", PACKAGE_DIRS, ids=lambda p: p.name)
def test_kernels_are_named_after_their_op(root: Path):
    """torchvision's scheme (README, slots): the function registered for op <op> (leading
    underscores dropped) is <op>_meta for Meta, <op>_autograd for Autograd, <op>_kernel for
    every other key, so one op has one name in every backend. Checked in each package's own
    csrc/, where every package registers its kernels (the LLTM's are templates of
    lltm_common/csrc/lltm.h)."""
    wrong = []
    for path in sorted((root / "csrc").rglob("*")):
        if path.suffix not in (".cpp", ".cu"):
            continue
        code = _LINE_COMMENT.sub("", path.read_text())
        blocks = _IMPL_BLOCK.findall(code)
        assert len(blocks) == len(_IMPL.findall(code)), f"{path}: the pattern no longer matches"
        for key, body in blocks:
            for op, function in _REGISTERED.findall(body):
                want = op.lstrip("_") + _SUFFIX.get(key, "_kernel")
                if function != want:
                    wrong.append(
                        f"{path.relative_to(root)}: {op} ({key}) is {function}, not {want}"
                    )
    assert not wrong, wrong


@pytest.mark.parametrize("name", package_names())
def test_installed_metadata_names_the_torch_it_needs(name: str):
    """The wheel nox installed here pins the torch release it was built against (full ABI)
    or takes the stable target and newer (stable ABI)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    import_or_skip(name)
    requirements = {Requirement(r).name: Requirement(r) for r in metadata.requires(name) or []}
    this = torch.__version__.split("+")[0]
    spec = str(requirements["torch"].specifier)
    if is_stable(ROOT / "packages" / name):
        assert spec.startswith(">="), spec
    else:
        assert spec == f"=={this}", spec
    assert "packaging" in requirements


# The oldest glibc our wheels load on (nox -s release's manylinux_2_28).
OLDEST_GLIBC = (2, 28)


@pytest.mark.parametrize("name", package_names())
def test_libraries_need_no_glibc_newer_than_manylinux_2_28(name: str):
    """What auditwheel would refuse: a glibc symbol version past 2.28 in any library of
    the installed package (under this torch's headers and CUDA). Checked under every torch,
    where the release proof of tests/test_distribution.py runs under one."""
    import shutil

    from shared_build.runtime import glibc_newer_than

    if shutil.which("nm") is None:
        pytest.skip("needs nm (binutils)")
    from packaging.version import Version

    module = import_or_skip(name)
    target = module.BUILD_INFO.get("torch_target")
    if target and Version(target) < Version("2.13"):
        # For an older target, torch's stable headers reach the shims newer than it through
        # dlsym, versioned by the build machine's glibc (2.34 here); no release ships it.
        pytest.skip(f"built for torch {target} (SHARED_BUILD_STABLE_TARGET), not a release build")
    libraries = sorted(Path(module.__file__).parent.glob("*.so"))
    assert libraries, f"no shared library in the installed {name}"
    for library in libraries:
        too_new = glibc_newer_than(str(library), OLDEST_GLIBC)
        assert not too_new, f"{library.name} needs glibc > 2.28: {too_new}"


@pytest.mark.parametrize("root", PACKAGE_DIRS, ids=lambda p: p.name)
def test_module_init_uses_the_macro(root: Path):
    """The C++ side never hard-codes the Python module name."""
    for source in root.joinpath("csrc").rglob("*.cpp"):
        text = source.read_text()
        assert not re.search(r"PyInit_\w+\s*\(", text), f"{source}: use SHARED_BUILD_PYTHON_MODULE"
        assert not re.search(r"PYBIND11_MODULE\(\s*(?!TORCH_EXTENSION_NAME)", text), (
            f"{source}: PYBIND11_MODULE must be named TORCH_EXTENSION_NAME"
        )


def ops_of(name: str) -> list[str]:
    return sorted(op for op in torch._C._dispatch_get_all_op_names() if op.startswith(f"{name}::"))


@pytest.mark.parametrize("name", package_names())
def test_imports_and_records_its_build(name: str):
    module = import_or_skip(name)
    info = module._build_info.BUILD_INFO
    assert info["package"] == name
    if info.get("abi") == "stable":
        from packaging.version import Version

        assert Version(torch.__version__) >= Version(info["torch_target"])
    else:
        assert info["torch"] == torch.__version__, (
            "the environment's torch is the one built against"
        )
    assert ops_of(name), f"{name} registers its ops in the {name} namespace"


@pytest.mark.parametrize("name", [p.name for p in PACKAGE_DIRS if is_stable(p)])
def test_stable_ops_are_tagged_pt2_compliant(name: str):
    """Op tags through the stable API arrived in torch 2.12 (shared_build/stable_compat.h):
    a build for 2.12 or newer (the release wheel targets 2.13) tags every public op; a build
    for torch 2.11 (SHARED_BUILD_STABLE_TARGET=2.11) cannot tag any."""
    from packaging.version import Version

    module = import_or_skip(name)
    tagged = Version(module._build_info.BUILD_INFO["torch_target"]) >= Version("2.12")
    public = [op.split("::")[1] for op in ops_of(name) if not op.split("::")[1].startswith("_")]
    assert public
    for op in public:
        tags = getattr(getattr(torch.ops, name), op).default.tags
        assert (torch.Tag.pt2_compliant_tag in tags) == tagged, op


def takes_or_returns_tensors(op: str) -> bool:
    schema = torch._C._get_schema(op, "")
    return any("Tensor" in str(item.type) for item in [*schema.arguments, *schema.returns])


@pytest.mark.parametrize("name", package_names())
def test_every_op_has_a_fake_kernel(name: str):
    """Every op with tensors in its schema; a query such as warp_perspective::_build_config
    (no tensors in or out) is not traced as a tensor op."""
    import_or_skip(name)
    for op in filter(takes_or_returns_tensors, ops_of(name)):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "Meta"), (
            f"{op} has no fake/meta kernel: torch.compile and export cannot trace it"
        )


@pytest.mark.parametrize("name", package_names())
def test_import_check_names_both_versions(name: str):
    module = import_or_skip(name)
    if module._build_info.BUILD_INFO.get("abi") == "stable":
        # Any torch from the target on will do; a target above the running torch will not.
        newer = {**module._build_info.BUILD_INFO, "torch_target": "99.0"}
        with pytest.raises(
            ImportError,
            match=rf"{name} is built on the stable ABI for torch 99.0 and newer but torch .* "
            r"is installed; upgrade torch with: pip install 'torch>=99.0'",
        ):
            module._build_info.check_compatible(newer)
        return
    stale = {**module._build_info.BUILD_INFO, "torch": "1.13.1"}
    with pytest.raises(
        ImportError,
        match=rf"{name} was built against torch 1.13.1 but torch .* is installed; rebuild it with: pip install --no-build-isolation",
    ):
        module._build_info.check_compatible(stale)


def test_all_packages_load_together():
    loaded = [import_or_skip(name) for name in package_names() if name not in SKIPPED]
    namespaces = {m.__name__ for m in loaded}
    assert len(namespaces) == len(loaded)
    for module in loaded:
        assert ops_of(module.__name__)


def _pip_nvcc_dirs() -> list[str]:
    import site

    from shared_build.cuda import pip_nvcc_dirs

    return pip_nvcc_dirs(site.getsitepackages())


def _cuda_packages() -> list[str]:
    names = []
    for root in PACKAGE_DIRS:
        if list((root / "csrc").rglob("*.cu")):
            names.append(root.name)
    return names


@pytest.mark.skipif(torch.version.cuda is None, reason="torch here is a CPU-only build")
@pytest.mark.parametrize("name", _cuda_packages())
@pytest.mark.compiler
def test_cuda_build_used_this_environments_compiler_and_carries_sm90(name: str):
    """Under a CUDA torch, nox gives each environment NVIDIA's pip compiler of torch's CUDA
    version; with CUDA_HOME unset the build must have used it, not a system nvcc of another
    version, and the library must carry Hopper (sm_90) device code."""
    import subprocess

    module = import_or_skip(name)
    info = module._build_info.BUILD_INFO
    assert info.get("cuda"), (
        f"{name} was built without its CUDA kernels under torch {torch.__version__}"
    )
    pip_dirs = _pip_nvcc_dirs()
    if not pip_dirs or os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"):
        pytest.skip("no pip compiler in this environment, or CUDA_HOME chooses the compiler")
    if info.get("abi") == "stable":
        # The one stable wheel, built once (nox -s stable) in its own environment with that
        # environment's pip compiler: its CUDA major must be this torch's.
        assert "site-packages/nvidia" in info["nvcc"], (
            f"{name}'s stable wheel was built with {info['nvcc']}, not a pip compiler"
        )
        assert info["cuda"].split(".")[0] == torch.version.cuda.split(".")[0]
    else:
        assert any(info["nvcc"].startswith(d) for d in pip_dirs), (
            f"{name} was built with {info['nvcc']}, not this environment's pip compiler {pip_dirs}"
        )
        assert info["cuda"] == ".".join(torch.version.cuda.split(".")[:2])
    cuobjdump = Path(pip_dirs[0]) / "bin" / "cuobjdump"
    if not cuobjdump.is_file():
        pytest.skip("no cuobjdump (nvidia-cuda-cuobjdump) in this environment")
    libraries = sorted(Path(module.__file__).parent.glob("*.so"))
    elves = subprocess.run(
        [str(cuobjdump), "--list-elf", *map(str, libraries)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert "sm_90" in elves, f"{name}: no sm_90 code in {libraries}: {elves!r}"
