"""setup_kwargs and its parts: config, sources, metadata-only runs, friendly failures."""

from __future__ import annotations

import ast
import builtins
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shared_build import knobs, setup_helpers, torch_facts
from shared_build.build_info import git_provenance
from shared_build.commands import check_cxx_runtime, remove_stale_modules
from shared_build.config import (
    BuildConfig,
    check_setuptools,
    is_metadata_only,
    merge_options,
    read_config,
    wheel_hook,
)
from shared_build.cuda import CudaBuild, resolve_cuda
from shared_build.errors import BuildError
from shared_build.extensions import collect_sources, make_extensions
from shared_build.flags import INCLUDE_DIR, Flags, compile_flags, cxx_runtime_link_args
from shared_build.knobs import Knobs
from shared_build.setup_args import build_tag, runtime_requirements
from shared_build.torch_facts import TorchFacts, require_ninja


def make_package(tmp_path, tool_table: str = "", files=("csrc/op.cpp",), name="demo"):
    root = tmp_path / name
    (root / "src" / name).mkdir(parents=True)
    (root / "src" / name / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [project]
            name = "{name}"
            version = "1.2.3"

            [tool.shared_build]
            """
        )
        + textwrap.dedent(tool_table)
    )
    for relative in files:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("// source\n")
    return root


def test_read_config_defaults(tmp_path):
    config = read_config(make_package(tmp_path))
    assert (
        config.name,
        config.version,
        config.cuda,
        config.module,
        config.python_module,
        config.limited_api,
    ) == (
        "demo",
        "1.2.3",
        "none",
        "_C",
        True,
        True,
    )


def test_read_config_limited_api_off(tmp_path):
    assert read_config(make_package(tmp_path, "limited_api = false\n")).limited_api is False


def test_read_config_infers_optional_cuda_from_cu_files(tmp_path):
    root = make_package(tmp_path, files=("csrc/op.cpp", "csrc/cuda/op_kernel.cu"))
    assert read_config(root).cuda == "optional"


def test_read_config_rejects_unknown_keys(tmp_path):
    root = make_package(tmp_path, 'cudaa = "required"\n')
    with pytest.raises(BuildError, match=r"unknown keys \['cudaa'\]"):
        read_config(root)


def test_read_config_extra_compile_args_reach_the_compiler(tmp_path):
    root = make_package(tmp_path, 'extra_compile_args = { cxx = ["-ffp-contract=off"] }\n')
    config = read_config(root)
    options = merge_options(config.extra, {"extra_compile_args": {"cxx": ["-O2"]}})
    assert options.extra_compile_args == {"cxx": ["-ffp-contract=off", "-O2"]}


@pytest.mark.parametrize(
    "value", ['["-O2"]', '{ cxx = "-O2" }', '{ gcc = ["-O2"] }', "{ cxx = [2] }"]
)
def test_read_config_rejects_malformed_extra_compile_args(tmp_path, value):
    root = make_package(tmp_path, f"extra_compile_args = {value}\n")
    with pytest.raises(BuildError, match='keyed by "cxx" and "nvcc"'):
        read_config(root)


def test_read_config_rejects_bad_cuda_value(tmp_path):
    root = make_package(tmp_path, 'cuda = "sometimes"\n', files=("csrc/a.cu",))
    with pytest.raises(BuildError, match="cuda = 'sometimes'"):
        read_config(root)


def test_read_config_cuda_without_cu_files(tmp_path):
    root = make_package(tmp_path, 'cuda = "required"\n')
    with pytest.raises(BuildError, match="has no .cu file"):
        read_config(root)


def test_collect_sources_cpu_and_cuda(tmp_path):
    root = make_package(
        tmp_path,
        files=(
            "csrc/op.cpp",
            "csrc/cpu/op_kernel.cpp",
            "csrc/cuda/op_kernel.cu",
            "csrc/cuda/helper.cpp",
            "csrc/op.h",
        ),
    )
    assert collect_sources(root, with_cuda=False) == [
        "csrc/cpu/op_kernel.cpp",
        "csrc/op.cpp",
    ]
    assert collect_sources(root, with_cuda=True) == [
        "csrc/cpu/op_kernel.cpp",
        "csrc/cuda/helper.cpp",
        "csrc/cuda/op_kernel.cu",
        "csrc/op.cpp",
    ]


def make_common(tmp_path, name="demo_common"):
    """A folder shared by packages, beside the package: csrc/ (a .cpp and a cuda/ source),
    python/ and tests/."""
    common = tmp_path / name
    for relative in (
        "csrc/shared.cpp",
        "csrc/shared.h",
        "csrc/cuda/shared_kernel.cu",
        "tests/suite.py",
    ):
        (common / relative).parent.mkdir(parents=True, exist_ok=True)
        (common / relative).write_text("// source\n")
    (common / "python").mkdir()
    (common / "python" / "__init__.py").write_text("")
    return common


def link_common(tmp_path) -> Path:
    """A package whose csrc/, src/demo/ and tests/ link the shared folder's, as lltm_cpu
    links lltm_common's."""
    common = make_common(tmp_path)
    root = make_package(tmp_path, files=("csrc/op.cpp", "tests/test_demo.py"))
    (root / "csrc" / "shared").symlink_to(common / "csrc")
    (root / "src" / "demo" / "_shared").symlink_to(common / "python")
    (root / "tests" / "shared").symlink_to(common / "tests")
    return root


def test_a_linked_folder_compiles_and_installs_as_the_packages_own(tmp_path):
    """Links are followed: the shared csrc/ compiles into the package (paths inside it, so
    objects stay in the build folder), the shared python/ installs as demo._shared."""
    root = link_common(tmp_path)
    assert collect_sources(root, with_cuda=False) == ["csrc/op.cpp", "csrc/shared/shared.cpp"]
    assert "csrc/shared/cuda/shared_kernel.cu" in collect_sources(root, with_cuda=True)
    kwargs = setup_helpers._setup_kwargs(root, {}, ["setup.py", "egg_info"], {})
    assert kwargs["packages"] == ["demo", "demo._shared"]
    assert kwargs["package_dir"] == {"": "src"}


def test_collect_sources_rejects_same_base_name(tmp_path):
    root = make_package(tmp_path, files=("csrc/op.cpp", "csrc/op.cu"))
    with pytest.raises(BuildError, match=r"csrc/op.cpp and csrc/op.cu would both compile to op.o"):
        collect_sources(root, with_cuda=True)


def test_collect_sources_needs_sources(tmp_path):
    root = make_package(tmp_path, files=("csrc/readme.txt",))
    with pytest.raises(BuildError, match="has no .cpp or .cu sources"):
        collect_sources(root, with_cuda=False)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["setup.py", "egg_info"], True),
        (["setup.py", "dist_info", "--output-dir", "x"], True),
        (["setup.py", "sdist", "--formats", "gztar"], True),
        (["setup.py", "--version"], True),
        (["setup.py", "bdist_wheel", "--dist-dir", "x"], False),
        (["setup.py", "build_ext", "--inplace"], False),
        (["setup.py", "editable_wheel"], False),
        (["setup.py", "install"], False),
    ],
)
def test_metadata_only(argv, expected):
    assert is_metadata_only(argv) is expected


def test_metadata_only_run_needs_no_torch(tmp_path, monkeypatch):
    root = make_package(tmp_path)
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    kwargs = setup_helpers._setup_kwargs(root, {}, ["setup.py", "sdist"], {})
    assert kwargs["packages"] == ["demo"]
    assert kwargs["package_dir"] == {"": "src"}
    assert "ext_modules" not in kwargs


@pytest.mark.compiler
def test_build_without_torch_says_no_build_isolation(tmp_path, monkeypatch):
    root = make_package(tmp_path)
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch":
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with pytest.raises(
        BuildError,
        match=r"needs torch, which is not importable .* pip install --no-build-isolation ./packages/demo",
    ):
        setup_helpers._setup_kwargs(root, {}, ["setup.py", "bdist_wheel"], {})


RUNNER = "/tmp/pip-env/lib/python3.11/site-packages/pip/_vendor/pyproject_hooks/_in_process/_in_process.py"


@pytest.mark.parametrize(
    ("orig_argv", "hook"),
    [
        (
            ["python", RUNNER, "get_requires_for_build_wheel", "/tmp/x"],
            "get_requires_for_build_wheel",
        ),
        (["python", RUNNER, "build_editable", "/tmp/x"], "build_editable"),
        (["python", RUNNER, "get_requires_for_build_sdist", "/tmp/x"], None),
        (["python", RUNNER, "build_sdist", "/tmp/x"], None),
        (["python", "setup.py", "egg_info"], None),
        ([], None),
    ],
)
def test_wheel_hook(orig_argv, hook):
    assert wheel_hook(orig_argv) == hook


def hide_torch(monkeypatch):
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    monkeypatch.delitem(sys.modules, "torch", raising=False)


def test_wheel_hook_without_torch_fails_before_any_download(tmp_path, monkeypatch):
    """pip's first wheel hook runs setup.py egg_info: fail there, before pip fetches torch."""
    root = make_package(tmp_path)
    hide_torch(monkeypatch)
    orig_argv = ["python", RUNNER, "get_requires_for_build_wheel", "/tmp/x"]
    with pytest.raises(BuildError, match=r"needs torch, .* pip install --no-build-isolation"):
        setup_helpers._setup_kwargs(root, {}, ["setup.py", "egg_info"], {}, orig_argv)


def test_sdist_hook_without_torch_works(tmp_path, monkeypatch):
    root = make_package(tmp_path)
    hide_torch(monkeypatch)
    orig_argv = ["python", RUNNER, "build_sdist", "/tmp/x"]
    kwargs = setup_helpers._setup_kwargs(root, {}, ["setup.py", "sdist"], {}, orig_argv)
    assert "ext_modules" not in kwargs


def test_setup_kwargs_exits_with_the_sentence(tmp_path, monkeypatch):
    root = make_package(tmp_path, 'cuda = "sometimes"\n', files=("csrc/a.cu",))
    with pytest.raises(SystemExit) as excinfo:
        setup_helpers.setup_kwargs(root)
    assert str(excinfo.value).startswith("error: [tool.shared_build] cuda = 'sometimes'")


def test_require_ninja_missing(monkeypatch):
    monkeypatch.setattr(torch_facts.shutil, "which", lambda *a, **k: None)
    monkeypatch.setitem(sys.modules, "ninja", None)  # the pip package is not importable
    with pytest.raises(BuildError, match="ninja is required .*; pip install ninja"):
        require_ninja({"PATH": "/nowhere"})


def test_require_ninja_adds_the_pip_package_folder_to_path(monkeypatch, tmp_path):
    folder = str(tmp_path)
    monkeypatch.setattr(torch_facts.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(
        torch_facts.shutil,
        "which",
        lambda name, path=None: f"{folder}/ninja" if path == folder else None,
    )
    env = {"PATH": "/usr/bin"}
    assert require_ninja(env) == f"{folder}/ninja"
    assert env["PATH"].startswith(folder)


def sdist_names(root: Path, dist: Path) -> set[str]:
    """The files of a real `setup.py sdist` (no torch needed) of the package at root."""
    import subprocess
    import tarfile

    (root / "setup.py").write_text(
        "from setuptools import setup\n"
        "from shared_build import setup_kwargs\n"
        "setup(**setup_kwargs(__file__))\n"
    )
    subprocess.run(
        [sys.executable, "setup.py", "-q", "sdist", "-d", str(dist)],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    (archive,) = dist.glob("demo-1.2.3.tar.gz")
    with tarfile.open(archive) as tar:
        return {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}


def test_sdist_carries_sources_not_shared_build(tmp_path):
    """A real `setup.py sdist` (no torch needed) packs csrc/ and tests/; shared_build is its
    build requirement, never a copy inside it."""
    root = make_package(tmp_path, files=("csrc/op.cpp", "csrc/op.h", "tests/test_demo.py"))
    (root / "build").mkdir()
    (root / "build" / "junk.o").write_text("")
    names = sdist_names(root, tmp_path / "dist")
    assert {"csrc/op.cpp", "csrc/op.h", "tests/test_demo.py", "pyproject.toml", "setup.py"} <= names
    assert not any(name.startswith(("_vendor/", "build/")) for name in names), names


def test_sdist_carries_a_linked_folder_as_files(tmp_path):
    """What a package links (csrc/shared, src/demo/_shared, tests/shared) goes into the
    sdist as files: it builds and tests with no repository around it."""
    root = link_common(tmp_path)
    names = sdist_names(root, tmp_path / "dist")
    assert {
        "csrc/shared/shared.cpp",
        "csrc/shared/shared.h",
        "src/demo/_shared/__init__.py",
        "tests/shared/suite.py",
    } <= names
    assert not any(".." in name for name in names)


def test_remove_stale_modules_keeps_only_the_target(tmp_path: Path) -> None:
    folder = tmp_path / "add_ext"
    folder.mkdir()
    for name in (
        "_C.abi3.so",
        "_C.cpython-311-x86_64-linux-gnu.so",
        "_C.so",
        "_CX.so",
        "_C.py",
        "ops.py",
        "_build_info.py",
    ):
        (folder / name).write_text("x")
    target = folder / "_C.cpython-311-x86_64-linux-gnu.so"
    removed = remove_stale_modules(target)
    assert sorted(p.name for p in removed) == ["_C.abi3.so", "_C.so"]
    assert sorted(p.name for p in folder.iterdir()) == [
        "_C.cpython-311-x86_64-linux-gnu.so",
        "_C.py",
        "_CX.so",
        "_build_info.py",
        "ops.py",
    ]


def test_remove_stale_modules_without_a_folder_yet(tmp_path: Path) -> None:
    assert remove_stale_modules(tmp_path / "missing" / "_C.abi3.so") == []


def _dynamic(root: Path) -> Path:
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text().replace(
        'version = "1.2.3"', 'version = "1.2.3"\ndynamic = ["dependencies"]'
    )
    pyproject.write_text(text)
    return root


@pytest.mark.parametrize(
    ("abi", "torch_version", "env", "expected"),
    [
        # The full ABI: exactly the release built against, whatever its local label.
        ("full", "2.14.1+cu130", {}, "torch==2.14.1"),
        ("full", "2.13.0+cpu", {}, "torch==2.13.0"),
        # An sdist's metadata (no torch imported): the oldest a build can take.
        ("full", None, {}, "torch>=2.11"),
        # The stable ABI: the target (the torch built against, or the knob's) and newer; an
        # sdist's metadata, the oldest target its sources build for.
        ("stable", "2.15.0", {}, "torch>=2.15"),
        ("stable", "2.15.0", {"SHARED_BUILD_STABLE_TARGET": "2.13"}, "torch>=2.13"),
        ("stable", None, {}, "torch>=2.11"),
        ("stable", "2.11.0+cu130", {"SHARED_BUILD_STABLE_TARGET": "2.11"}, "torch>=2.11"),
    ],
)
def test_runtime_requirements_follow_the_abi(tmp_path, abi, torch_version, env, expected):
    root = _dynamic(make_package(tmp_path, f'abi = "{abi}"\ndependencies = ["numpy"]\n'))
    config = read_config(root)
    assert runtime_requirements(config, env, torch_version) == [
        expected,
        "packaging",
        "numpy",
    ]


def test_static_dependencies_are_left_alone(tmp_path):
    config = read_config(make_package(tmp_path))
    assert runtime_requirements(config, {}, "2.14.1") is None


def test_extra_dependencies_need_dynamic_dependencies(tmp_path):
    with pytest.raises(BuildError, match=r'dynamic = \["dependencies"\]; list them in'):
        read_config(make_package(tmp_path, 'dependencies = ["numpy"]\n'))


def test_git_provenance(tmp_path):
    import subprocess

    assert git_provenance(tmp_path) == {"git_commit": None, "git_dirty": None}
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    package = tmp_path / "packages" / "demo"
    package.mkdir(parents=True)
    (package / "a.txt").write_text("1")
    (tmp_path / ".gitignore").write_text("build/\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert git_provenance(package) == {"git_commit": head.strip(), "git_dirty": False}
    # Untracked files outside the package's folder, and ignored ones inside it, are not
    # its sources.
    (tmp_path / "untracked.txt").write_text("not part of the build's sources")
    (package / "build").mkdir()
    (package / "build" / "x.o").write_text("")
    assert git_provenance(package)["git_dirty"] is False
    (package / "a.txt").write_text("2")
    assert git_provenance(package)["git_dirty"] is True


def test_git_provenance_counts_a_package_never_committed(tmp_path):
    """A scaffolded package not yet committed was recorded as a clean tree (issue 45)."""
    import subprocess

    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "README.md").write_text("repo")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    package = tmp_path / "packages" / "my_op"
    package.mkdir(parents=True)
    (package / "setup.py").write_text("")
    assert git_provenance(package)["git_dirty"] is True


def test_read_config_takes_the_setuptools_of_build_system(tmp_path):
    root = make_package(tmp_path)
    assert read_config(root).setuptools_requirement is None
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        '[build-system]\nrequires = ["ninja", "setuptools>=77"]\n' + pyproject.read_text()
    )
    assert read_config(root).setuptools_requirement == "setuptools>=77"


def test_an_old_setuptools_gets_a_sentence_before_its_own_message():
    """pip install --no-build-isolation keeps the setuptools installed: 65.5 in a fresh
    Python 3.11 venv with torch 2.11, which fails on our license = "BSD-3-Clause" with
    "`project.license` must be valid exactly by one definition" (issue 45)."""
    with pytest.raises(
        BuildError,
        match=r"requires setuptools>=77, but this environment has setuptools 65\.5\.0, .*"
        r"pip install -U 'setuptools>=77'$",
    ):
        check_setuptools("setuptools>=77", building=False, version="65.5.0")
    check_setuptools("setuptools>=77", building=True, version="80.9.0")
    check_setuptools(None, building=False, version="65.5.0")  # nothing asked: no verdict


def test_setup_kwargs_checks_setuptools_before_anything_else(tmp_path, monkeypatch):
    root = make_package(tmp_path)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        '[build-system]\nrequires = ["setuptools>=9999"]\n' + pyproject.read_text()
    )
    hide_torch(monkeypatch)
    with pytest.raises(BuildError, match=r"requires setuptools>=9999"):
        setup_helpers._setup_kwargs(root, {}, ["setup.py", "egg_info"], {})


# ---- the named steps of _setup_kwargs ------------------------------------------------------


def test_merge_options_merges_each_key_once_config_first():
    extra = {
        "include_dirs": ["/cfg/include"],
        "libraries": ["opencv_core"],
        "define_macros": ["FROM_CONFIG", ["LEVEL", "2"]],
    }
    overrides = {
        "include_dirs": ["/over/include"],
        "extra_link_args": ["-Wl,-z,now"],
        "define_macros": [("FROM_SETUP", "1")],
        "extra_compile_args": {"cxx": ["-DX"], "nvcc": ["-lineinfo"]},
        "build_info": {"backend": "opencv"},
    }
    options = merge_options(extra, overrides)
    assert options.include_dirs == ["/cfg/include", "/over/include"]
    assert options.libraries == ["opencv_core"]
    assert options.library_dirs == []
    assert options.extra_link_args == ["-Wl,-z,now"]
    assert options.define_macros == [("FROM_CONFIG", None), ("LEVEL", "2"), ("FROM_SETUP", "1")]
    assert options.extra_compile_args == {"cxx": ["-DX"], "nvcc": ["-lineinfo"]}
    assert options.build_info == {"backend": "opencv"}
    # The inputs are left as they were.
    assert extra["include_dirs"] == ["/cfg/include"]


def test_build_tag_names_every_combination():
    tag = build_tag("2.14.1+cu130", True, True, ["address", "undefined"])
    assert tag == f"torch2.14.1_cu130-{sys.implementation.cache_tag}-cuda-debug-address-undefined"
    assert build_tag("2.13.0+cpu", False, False, []) == (
        f"torch2.13.0_cpu-{sys.implementation.cache_tag}"
    )


def test_resolve_cuda_off_for_a_package_without_cuda(tmp_path):
    config = BuildConfig(read_config(make_package(tmp_path)), build_root=tmp_path, env={})
    facts = TorchFacts("2.14.1+cu130", cuda="13.0")
    assert resolve_cuda(config, facts) == CudaBuild()
    assert config.env == {}  # no CUDA_HOME, no arch list


def _macros(extension) -> dict[str, str | None]:
    return dict(extension.define_macros)


@pytest.mark.parametrize(
    ("abi", "cuda", "expected"),
    [
        # (extension names, CUDAExtension?, WITH_CUDA in each, USE_CUDA in each)
        ("full", False, [("demo._C", False, False, False)]),
        ("full", True, [("demo._C", True, True, False)]),
        ("stable", False, [("demo._C", False, False, False)]),
        # Stable with CUDA: the .cu files go into a second library, the only one built
        # with WITH_CUDA and USE_CUDA.
        ("stable", True, [("demo._C", False, False, False), ("demo._C_cuda", True, True, True)]),
    ],
)
@pytest.mark.compiler  # a CUDAExtension needs a CUDA toolkit
def test_make_extensions(tmp_path, abi, cuda, expected):
    cpp_extension = pytest.importorskip("torch.utils.cpp_extension")
    if cuda and cpp_extension.CUDA_HOME is None:
        pytest.skip("CUDAExtension needs a CUDA toolkit (CUDA_HOME) to list its libraries")
    table = f'abi = "{abi}"\ncuda = "optional"\n'
    root = make_package(tmp_path, table, files=("csrc/op.cpp", "csrc/cuda/op_kernel.cu"))
    package = read_config(root)
    flags = Flags(
        {"cxx": ["-O3"], "nvcc": ["-O3"]},
        ["/inc"],
        link_args=["-l:libstdc++.so.6", "-fsanitize=address"],
        define_macros=[("FROM_CONFIG", None)],
        libraries=["m"],
    )
    extensions, cuda_library = make_extensions(package, CudaBuild(enabled=cuda), flags)
    got = [
        (
            e.name,
            any(s.endswith(".cu") for s in e.sources),
            "WITH_CUDA" in _macros(e),
            "USE_CUDA" in _macros(e),
        )
        for e in extensions
    ]
    assert got == expected
    assert cuda_library == ("_C_cuda" if abi == "stable" and cuda else None)
    main = extensions[0]
    assert _macros(main)["FROM_CONFIG"] is None
    assert main.libraries[0] == "m"
    # Every library links the same way: the sanitizer runtime, the shared libstdc++.
    for extension in extensions:
        assert extension.extra_link_args[-2:] == flags.link_args, extension.name
    # cpp_extension adds to the lists it is given: the flags shared by the two extensions
    # are left as they were.
    assert flags.include_dirs == ["/inc"]
    assert flags.libraries == ["m"]
    assert flags.compile_args == {"cxx": ["-O3"], "nvcc": ["-O3"]}


def test_a_linked_folders_headers_are_ours(tmp_path):
    """Under WERROR the package's csrc/, through which a linked folder's headers are
    included ("shared/shared.h"), is searched as ours (-I), not as a system folder: GCC
    reports no warning in a system header, and its -MMD leaves system headers out of the
    dependency files, so ninja did not rebuild lltm_cpu's objects after
    lltm_common/csrc/lltm_autograd.h changed (the module then aborted at import on a
    kernel registered with the old signature)."""
    pytest.importorskip("torch")
    root = link_common(tmp_path)
    config = BuildConfig(read_config(root), merge_options({}, {}), Knobs(werror=True))
    flags = compile_flags(config, TorchFacts("2.13.0", openmp=False), CudaBuild())
    assert str(root / "csrc") in flags.include_dirs
    cxx = flags.compile_args["cxx"]
    assert "-Werror" in cxx
    system = {cxx[i + 1] for i, arg in enumerate(cxx) if arg == "-isystem"}
    assert str(root / "csrc") not in system
    assert any("torch" in folder for folder in system)  # torch's headers stay system ones


@pytest.mark.parametrize("abi", ["full", "stable"])
def test_compile_flags_order_and_include_folders(tmp_path, abi):
    pytest.importorskip("torch")
    table = f'abi = "{abi}"\ninclude_dirs = ["/cfg/include"]\ndefine_macros = ["FROM_CONFIG"]\n'
    root = make_package(tmp_path, table)
    package = read_config(root)
    options = merge_options(
        package.extra,
        {
            "include_dirs": ["/over"],
            "extra_compile_args": {"cxx": ["-DEXTRA"]},
            "extra_link_args": ["-Wl,-z,now"],
            "libraries": ["m"],
        },
    )
    config = BuildConfig(package, options, Knobs(debug=True, sanitize=("address",)))
    facts = TorchFacts("2.13.0", openmp=True, stable_target="2.13" if abi == "stable" else None)
    cuda = CudaBuild(include_dirs=["/cuda/include"], rpath_args=["-Wl,-rpath,$ORIGIN/x"])
    flags = compile_flags(config, facts, cuda)
    assert flags.include_dirs == [
        str(INCLUDE_DIR),
        str(root / "csrc"),
        "/cfg/include",
        "/over",
        "/cuda/include",
    ]
    cxx = flags.compile_args["cxx"]
    assert "-O0" in cxx and "-O3" not in cxx
    # The overrides come after shared_build's own flags, the warnings last.
    assert cxx.index("-DEXTRA") > cxx.index("-O0")
    assert set(flags.compile_args) == {"cxx"}  # no nvcc without CUDA
    assert "-fsanitize=address" in cxx and "-fsanitize=address" in flags.link_args
    assert ("-l:libstdc++.so.6" in flags.link_args) == sys.platform.startswith("linux")
    # The package's link arguments first, the CUDA runtime's rpath last.
    assert flags.link_args[0] == "-Wl,-z,now" and flags.link_args[-1] == "-Wl,-rpath,$ORIGIN/x"
    assert flags.libraries == ["m"]
    macros = dict(flags.define_macros)
    assert macros["FROM_CONFIG"] is None
    assert ("TORCH_TARGET_VERSION" in macros) == (abi == "stable")
    # merge_options' lists are not the ones cpp_extension will add to.
    assert options.libraries == ["m"] and flags.libraries is not options.libraries


@pytest.fixture
def stream_source(tmp_path):
    """A C++ source that uses libstdc++'s streams, for link tests (Linux, c++ and readelf)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("ELF and g++'s driver")
    if shutil.which("c++") is None or shutil.which("readelf") is None:
        pytest.skip("needs c++ and readelf")
    source = tmp_path / "stream.cpp"
    source.write_text(
        "#include <sstream>\n#include <string>\n"
        "std::string f(long x) { std::ostringstream s; s << x; return s.str(); }\n"
    )
    return source


@pytest.mark.compiler
def test_runtime_link_args_keep_libstdcxx_shared_under_a_static_compiler(
    tmp_path, stream_source, shared_cxx
):
    """A compiler that links libstdc++ statically (the lent GPU machines' did, and a plain
    -lstdc++ on the link line did not help there) would give an extension its own copy of
    libstdc++; our link arguments keep the shared one. The wrapper here drops -lstdc++, as
    such a wrapper may, and adds -static-libstdc++."""
    wrapper = tmp_path / "g++-real"
    wrapper.write_text(
        '#!/bin/bash\nargs=()\nfor a in "$@"; do [ "$a" = -lstdc++ ] || args+=("$a"); done\n'
        f'exec {shared_cxx} "${{args[@]}}" -static-libstdc++\n'
    )
    wrapper.chmod(0o755)

    def loads_shared(*link_args):
        out = tmp_path / "lib.so"
        command = [str(wrapper), "-shared", "-fPIC", str(stream_source), *link_args, "-o", str(out)]
        subprocess.run(command, check=True)
        return knobs.loads_shared_libstdcxx(str(out))

    assert loads_shared() is False  # the failure this is about
    assert loads_shared("-lstdc++") is False  # what did not help
    assert loads_shared(*cxx_runtime_link_args(sys.platform)) is True


@pytest.mark.compiler
def test_check_cxx_runtime_names_a_static_libstdcxx(tmp_path, stream_source, shared_cxx):
    shared, static = tmp_path / "shared.so", tmp_path / "static.so"
    base = [*shared_cxx.split(), "-shared", "-fPIC", str(stream_source)]
    subprocess.run([*base, "-o", str(shared)], check=True)
    subprocess.run([*base, "-static-libstdc++", "-o", str(static)], check=True)
    check_cxx_runtime(str(shared), shared_cxx)
    check_cxx_runtime(str(stream_source), shared_cxx)  # no ELF file: no verdict
    with pytest.raises(
        BuildError, match=r"static\.so does not load libstdc\+\+\.so\.6: 'g\+\+-real'"
    ):
        check_cxx_runtime(str(static), "g++-real")


# ---- the layout of shared_build ------------------------------------------------------------

SOURCE = Path(setup_helpers.__file__).resolve().parent

# The steps of a build, in the order setup_kwargs runs them; a module of a step takes the
# results of the steps before it. setup_helpers (setup_kwargs) runs them.
STEPS = {
    "errors": 0,
    "knobs": 1,
    "config": 1,
    "torch_facts": 2,
    "cuda": 3,
    "flags": 4,
    "extensions": 5,
    "build_info": 6,
    "commands": 6,
    "setup_args": 6,
    "setup_helpers": 7,
}


def test_a_build_flows_one_way():
    """No step imports from a later one (annotations included): the data of a build goes
    config -> torch facts -> CUDA -> flags -> extensions -> setuptools, never back."""
    for name, step in STEPS.items():
        tree = ast.parse((SOURCE / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                imported = [node.module] if node.module else [a.name for a in node.names]
                for module in (m.split(".")[0] for m in imported):
                    assert STEPS[module] <= step, f"{name} (step {step}) imports {module}"


def test_setup_kwargs_runs_each_step_once_in_order():
    """_setup_kwargs' body is the steps, one call each, in STEPS' order."""
    tree = ast.parse((SOURCE / "setup_helpers.py").read_text(encoding="utf-8"))
    body = next(
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_setup_kwargs"
    )
    calls = [
        n.func.id
        for n in ast.walk(body)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    ]
    steps = [
        "configure",
        "torch_facts",
        "resolve_cuda",
        "compile_flags",
        "make_extensions",
        "setup_arguments",
    ]
    assert [c for c in calls if c in steps] == steps


def test_no_module_is_long():
    """One job per module: none over about 550 non-blank lines."""
    for path in sorted(SOURCE.rglob("*.py")):
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        assert len(lines) <= 550, f"{path.relative_to(SOURCE)}: {len(lines)} non-blank lines"
