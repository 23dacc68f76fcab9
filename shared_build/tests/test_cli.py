"""python -m shared_build new | doctor | info: the sentences for broken setups, the
scaffold's refusals, and a scaffolded package that builds and passes its own tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from shared_build import cli, doctor, knobs, scaffold
from shared_build.config import read_config
from shared_build.errors import BuildError
from shared_build.setup_args import runtime_requirements
from shared_build.torch_facts import OLDEST_STABLE_TARGET

ROOT = Path(__file__).resolve().parents[2]


def fake_program(folder: Path, name: str, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


# --- doctor -----------------------------------------------------------------------------


def test_doctor_flags_a_compiler_without_cxx20(tmp_path):
    """A compiler that rejects -std=c++20 (GCC 9 says "unrecognized command-line option")."""
    old = fake_program(
        tmp_path,
        "g++-9",
        'case "$*" in *--version*) echo "g++-9 (Debian 9.3.0) 9.3.0";;\n'
        "*-std=c++20*) echo \"g++-9: error: unrecognized command-line option '-std=c++20'\" >&2; exit 1;;\n"
        "esac\n",
    )
    finding = doctor.check_cxx({"CXX": str(old), "PATH": os.environ["PATH"]}, "2.15.0")
    assert finding.status == "fail"
    assert "does not accept -std=c++20, which torch 2.15.0's headers need" in finding.text
    assert "unrecognized command-line option" in finding.text
    assert "set CXX to such a compiler" in finding.text


@pytest.mark.compiler
def test_doctor_accepts_the_real_compiler():
    # C++20 under torch 2.13 and newer, C++17 under the GPU machine's torch 2.11.
    finding = doctor.check_cxx(dict(os.environ), torch.__version__)
    standard = doctor.cxx_standard(torch.__version__)
    assert finding.status == "ok" and f"accepts -std={standard}" in finding.text


@pytest.mark.parametrize(
    ("wrapper", "status", "words"),
    [
        ('exec {cxx} "$@"\n', "ok", "links the shared libstdc++"),
        ('exec {cxx} "$@" -static-libstdc++\n', "warn", "links libstdc++ statically by default"),
        (
            'args=""; for a in "$@"; do case "$a" in *stdc++*) ;; *) args="$args $a";; esac; done\n'
            "exec {cxx} $args -static-libstdc++\n",
            "fail",
            "even when the shared one is named",
        ),
    ],
)
@pytest.mark.compiler
def test_doctor_says_how_the_compiler_links_libstdcxx(tmp_path, wrapper, status, words, shared_cxx):
    """The lent GPU machines' build compiler linked libstdc++ statically: every library
    then crashed at its first error message."""
    cxx = fake_program(tmp_path, "g++-real", wrapper.format(cxx=shared_cxx))
    finding = doctor.check_cxx_runtime({"CXX": str(cxx), "PATH": os.environ["PATH"]})
    assert finding is not None and finding.status == status and words in finding.text


@pytest.mark.compiler
def test_doctor_picks_the_first_compiler_that_links_the_shared_libstdcxx(tmp_path, shared_cxx):
    """As on the lent H100: c++ and g++ wrappers that link libstdc++ statically around
    g++-real. pick_cxx takes g++-real, and the doctor names it; a numbered g++-N is tried
    after g++-real, the newest first."""
    run = f'PATH={os.environ["PATH"]} exec {shared_cxx} "$@"'  # finds as and ld
    for name in ("c++", "g++", "g++-9", "g++-11"):
        fake_program(tmp_path, name, f"{run} -static-libstdc++\n")
    env = {"PATH": str(tmp_path)}
    assert doctor.cxx_candidates(env) == ["c++", "g++", "g++-11", "g++-9"]
    assert doctor.pick_cxx(env)[0] is None
    fake_program(tmp_path, "g++-real", f"{run}\n")
    chosen, tried = doctor.pick_cxx(env)
    assert chosen == "g++-real"
    assert [(name, f.status) for name, f in tried] == [
        ("c++", "warn"),
        ("g++", "warn"),
        ("g++-real", "ok"),
    ]
    findings = doctor.diagnose({**env, "CXX": str(tmp_path / "c++")}, torch=None)
    (runtime,) = [f for f in findings if f.topic == "c++ runtime"]
    assert runtime.status == "warn" and runtime.text.endswith("here CXX=g++-real does")


def test_doctor_cxx_standard_by_torch_version():
    assert doctor.cxx_standard("2.13.0") == "c++20"
    assert doctor.cxx_standard("2.12.1+cu128") == "c++17"


def test_doctor_flags_missing_ninja(tmp_path, monkeypatch):
    """The build's own search (torch_facts.require_ninja) and its sentence."""
    monkeypatch.setitem(sys.modules, "ninja", None)  # the pip package is not importable
    monkeypatch.setattr("shared_build.torch_facts.sys.executable", str(tmp_path / "python"))
    finding = doctor.check_ninja({"PATH": str(tmp_path)})
    assert finding.status == "fail"
    assert finding.text.startswith("ninja is required to build (it compiles in parallel")
    assert finding.text.endswith("; pip install ninja")


def test_doctor_flags_an_old_nvcc_with_the_pip_command(tmp_path, monkeypatch):
    """torch's CUDA 13.2 and only a CUDA 12.4 nvcc: a blocker (a build with CUDA on stops at
    the same sentence) naming it and the fix; not one with USE_CUDA=0."""
    root = tmp_path / "cuda-12.4"
    fake_program(
        root / "bin",
        "nvcc",
        'case "$1" in --version) echo "Cuda compilation tools, release 12.4, V12.4.131";;\n'
        f"--dryrun) echo '#$ _HERE_={root / 'bin'}';; esac\n",
    )
    (root / "include").mkdir()
    monkeypatch.setattr("shared_build.cuda.DEFAULT_CUDA_HOME", str(root))
    finding, toolkit = doctor.check_nvcc(
        {}, "13.2", [], str(tmp_path / "home"), which=lambda _: None
    )
    assert toolkit is None and finding.status == "fail"
    assert (
        "nvcc 12.4 at" in finding.text
        and "its CUDA 12.4 is not torch's major version 13" in finding.text
    )
    assert 'pip install "nvidia-cuda-nvcc==13.2.*" "nvidia-cuda-crt==13.2.*"' in finding.text
    off, _ = doctor.check_nvcc(
        {"USE_CUDA": "0"}, "13.2", [], str(tmp_path / "home"), which=lambda _: None
    )
    assert off.status == "ok" and off.text.startswith("not used (USE_CUDA=0)")


def test_doctor_without_any_nvcc_gives_the_pip_command(tmp_path, monkeypatch):
    monkeypatch.setattr("shared_build.cuda.DEFAULT_CUDA_HOME", str(tmp_path / "none"))
    finding, _ = doctor.check_nvcc({}, "13.0", [], str(tmp_path / "home"), which=lambda _: None)
    assert finding.status == "warn"
    assert "none found, so CUDA kernels are skipped" in finding.text
    assert '"nvidia-cuda-nvcc==13.0.*"' in finding.text


def test_doctor_max_jobs_warns_when_memory_is_short():
    finding = doctor.check_max_jobs({"MAX_JOBS": "8"}, 8, 4 * 2**30, with_cuda=True)
    assert finding.status == "warn" and "lower MAX_JOBS to 2" in finding.text
    assert doctor.check_max_jobs({}, 2, 24 * 2**30, with_cuda=False).status == "ok"


def test_doctor_opencv_missing():
    finding = doctor.check_opencv(
        which=lambda name: "/usr/bin/pkg-config",
        run=lambda cmd, stdin: subprocess.CompletedProcess(cmd, 1, "", "not found"),
    )
    assert finding.status == "warn" and "apt-get install libopencv-dev" in finding.text


@pytest.mark.parametrize(
    ("version", "status"), [("80.9.0", "ok"), ("77.0.3", "ok"), ("65.5.0", "fail"), (None, "fail")]
)
def test_doctor_checks_setuptools(version, status):
    finding = doctor.check_setuptools(version)
    assert finding.status == status
    if status == "fail":
        assert finding.text.endswith("pip install -U 'setuptools>=77'")


def test_doctor_without_torch_says_to_install_it():
    (torch_line,) = [f for f in doctor.diagnose(torch=None) if f.topic == "torch"]
    assert torch_line.status == "fail" and "pip install torch" in torch_line.text


def test_doctor_exit_code_is_1_on_a_blocker(monkeypatch, capsys):
    monkeypatch.setattr(
        doctor, "diagnose", lambda env=None: [doctor.Finding("fail", "ninja", "missing")]
    )
    assert doctor.main() == 1
    assert "[FAIL] ninja: missing" in capsys.readouterr().out


@pytest.mark.compiler
def test_doctor_runs_here():
    """On this machine, with its torch: every fact has a line, and the build works (nox
    builds every package here), so nothing blocks."""
    findings = doctor.diagnose()
    topics = [f.topic for f in findings]
    for topic in (
        "python",
        "setuptools",
        "torch",
        "c++",
        "ninja",
        "nvcc",
        "MAX_JOBS",
        "opencv",
        "compiler cache",
    ):
        assert topic in topics
    assert [f.line() for f in findings if f.status == "fail"] == []


# --- compiler cache -----------------------------------------------------------------------


def test_compiler_launcher():
    which = {"ccache": "/usr/bin/ccache", "sccache": "/usr/bin/sccache"}.get
    assert knobs.compiler_launcher({}, which) == "/usr/bin/ccache"
    assert knobs.compiler_launcher({"USE_CCACHE": "0"}, which) is None
    assert knobs.compiler_launcher({}, {"sccache": "/x/sccache"}.get) == "/x/sccache"
    assert knobs.compiler_launcher({}, lambda _: None) is None
    with pytest.raises(BuildError, match="USE_CCACHE=1 asks for a compiler cache but neither"):
        knobs.compiler_launcher({"USE_CCACHE": "1"}, lambda _: None)
    with pytest.raises(BuildError, match="USE_CCACHE='maybe' is not understood"):
        knobs.compiler_launcher({"USE_CCACHE": "maybe"}, which)


# --- new ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("9lives", "is not a Python identifier"),
        ("my-op", "is not a Python identifier"),
        ("class", "'class' is a Python keyword"),
        ("MyOp", "has capitals; use lower case, e.g. myop"),
        # Identifiers that no project name can be: the build failed on them later (issue 61).
        ("_x", r"'_x' starts or ends with an underscore, .* \(PEP 508\); e.g. x$"),
        ("x__", r"'x__' starts or ends with an underscore, .* \(PEP 508\); e.g. x$"),
        ("add_ext", "exists already; choose another name"),
        # Names that broke things (issue 45): installing shared_build replaces the tool,
        # torch is pip's ResolutionImpossible, aten is torch's own op namespace, and test
        # shadows the standard library's package.
        ("shared_build", "'shared_build' is this tool's own name"),
        ("torch", "'torch' is torch's own name"),
        ("aten", r"'aten' is an op namespace of torch itself \(torch.ops.aten\)"),
        ("prims", r"'prims' is an op namespace of torch itself"),
        ("test", "'test' is the name of a module Python imports here already"),
        ("numpy", "'numpy' is the name of a module Python imports here already"),
    ],
)
def test_new_refuses_bad_names(name, message):
    with pytest.raises(BuildError, match=message):
        scaffold.new_package(name, ROOT / "packages")


def test_new_refuses_torch_namespaces_without_torch(monkeypatch):
    monkeypatch.setattr(scaffold.importlib.util, "find_spec", lambda name: None)
    assert {"aten", "prim", "prims"} <= scaffold.torch_namespaces()
    with pytest.raises(BuildError, match="'aten' is an op namespace of torch itself"):
        scaffold.check_name("aten", ROOT / "packages")


def test_new_outside_the_repository_writes_nothing(tmp_path, monkeypatch, capsys):
    """It wrote ./packages/NAME silently, where nothing builds or tests it (issue 45)."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["new", "demo_op"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path} is not inside a checkout of this repository")
    assert "--packages-dir" in err
    assert list(tmp_path.iterdir()) == []
    # With --packages-dir it writes where it is told.
    assert cli.main(["new", "demo_op", "--packages-dir", str(tmp_path / "mine")]) == 0
    assert (tmp_path / "mine" / "demo_op" / "setup.py").is_file()


def test_new_says_what_it_writes_and_how_to_test_it(tmp_path, capsys):
    """Its next steps use python -m pytest, as the README does (issue 45)."""
    assert cli.main(["new", "demo_op", "--packages-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"wrote {tmp_path / 'demo_op'}",
        f"next: pip install --no-build-isolation {tmp_path / 'demo_op'}",
        f"      python -m pytest {tmp_path / 'demo_op' / 'tests'}",
    ]
    for template in scaffold.TEMPLATES.values():
        readme = (template / "README.md.tmpl").read_text()
        assert "python -m pytest packages/" in readme
        assert not re.search(r"^pytest ", readme, re.MULTILINE)


def test_new_help_says_where_each_abi_has_its_autograd(capsys):
    """The full-ABI scaffold registers autograd in Python; --help said "C++ autograd"."""
    with pytest.raises(SystemExit):
        cli.main(["new", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "C++ autograd" not in help_text
    assert "full: the checks and a Meta kernel in C++, autograd in Python" in help_text
    ops = (scaffold.TEMPLATES["full"] / "src" / "NAME" / "ops.py.tmpl").read_text()
    assert "torch.library.register_autograd(" in ops
    cpp = (scaffold.TEMPLATES["full"] / "csrc" / "NAME.cpp.tmpl").read_text()
    assert "TORCH_LIBRARY_IMPL({{name}}, Meta, m)" in cpp
    assert "Autograd" not in cpp


def test_readme_installs_torch_before_doctor_and_names_setuptools():
    """The README ran shared-build doctor before installing torch, so doctor failed
    (issue 45); and it installed setuptools without the version the packages need."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Adding an op") :]
    block = section[section.index("```bash") : section.index("```", section.index("```bash") + 3)]
    lines = [line.split("#")[0].strip() for line in block.splitlines()]
    torch_line = next(
        i for i, line in enumerate(lines) if line.startswith("pip install") and " torch " in line
    )
    assert torch_line < lines.index("shared-build doctor")
    assert '"setuptools>=77"' in lines[torch_line]
    assert f"setuptools {doctor.SETUPTOOLS_NEEDED} or newer" in readme


def test_new_stable_abi_writes_every_slot(tmp_path):
    target = scaffold.new_package("demo_st", tmp_path, cuda=True, abi="stable")
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "bench/bench_demo_st.py",
        "csrc/cpu/mul_add_kernel.cpp",
        "csrc/cuda/mul_add_kernel.cu",
        "csrc/demo_st.cpp",
        "csrc/demo_st.h",
        "pyproject.toml",
        "setup.py",
        "src/demo_st/__init__.py",
        "src/demo_st/ops.py",
        "tests/demo_st_battery.py",
        "tests/test_demo_st.py",
    ]
    text = "".join(p.read_text() for p in target.rglob("*") if p.is_file())
    assert not re.search(r"\{\{[a-z_]+\}\}", text)
    pyproject = (target / "pyproject.toml").read_text()
    assert 'abi = "stable"' in pyproject
    requires = tomllib.loads(pyproject)["build-system"]["requires"]
    assert not [r for r in requires if r.startswith("torch")], "no torch pin in [build-system]"
    assert "shared_build" in requires
    config = read_config(target)
    assert config.abi == "stable"
    # Its wheel's metadata: the target and every newer torch.
    assert runtime_requirements(config, {}, "2.99.0")[0] == "torch>=2.99"
    assert runtime_requirements(config, {}, None)[0] == f"torch>={OLDEST_STABLE_TARGET}"
    # Only the stable API: no ATen, c10 or torch/library.h include in the C++.
    sources = "".join(p.read_text() for p in (target / "csrc").rglob("*.*"))
    assert not re.search(r"#include <(ATen|c10)/|torch/library\.h", sources)


def test_new_refuses_an_unknown_abi(tmp_path):
    with pytest.raises(BuildError, match="--abi 'limited' is not known; use full or stable"):
        scaffold.new_package("demo", tmp_path, abi="limited")


def test_new_writes_every_slot(tmp_path):
    target = scaffold.new_package("demo_op", tmp_path, cuda=True)
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "bench/bench_demo_op.py",
        "csrc/cpu/mul_add_kernel.cpp",
        "csrc/cuda/mul_add_kernel.cu",
        "csrc/demo_op.cpp",
        "csrc/demo_op.h",
        "pyproject.toml",
        "setup.py",
        "src/demo_op/__init__.py",
        "src/demo_op/ops.py",
        "tests/demo_op_battery.py",
        "tests/test_demo_op.py",
    ]
    text = "".join(p.read_text() for p in target.rglob("*") if p.is_file())
    assert not re.search(r"\{\{[a-z_]+\}\}", text)
    assert 'cuda = "optional"' in (target / "pyproject.toml").read_text()
    cpu_only = scaffold.new_package("cpu_op", tmp_path)
    assert not (cpu_only / "csrc" / "cuda").exists()
    assert 'cuda = "none"' in (cpu_only / "pyproject.toml").read_text()
    # Its tests ask for no CUDA kernel it does not have (they would fail on a GPU machine).
    assert 'devices=("cpu", "cuda")' in (target / "tests" / "demo_op_battery.py").read_text()
    assert 'devices=("cpu",)' in (cpu_only / "tests" / "cpu_op_battery.py").read_text()
    stable = scaffold.new_package("cpu_st", tmp_path, abi="stable")
    assert 'devices=("cpu",)' in (stable / "tests" / "cpu_st_battery.py").read_text()


def test_cli_new_refusal_is_one_sentence(capsys):
    assert cli.main(["new", "add_ext", "--packages-dir", str(ROOT / "packages")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


@pytest.mark.slow
@pytest.mark.once
@pytest.mark.parametrize("abi", ["full", "stable"])
@pytest.mark.parametrize(
    "cuda",
    [
        False,
        pytest.param(
            True,
            marks=pytest.mark.skipif(torch.version.cuda is None, reason="torch here is CPU-only"),
        ),
    ],
    ids=["cpu", "cuda"],
)
def test_scaffolded_package_builds_and_passes_its_tests(tmp_path, cuda, abi):
    """The generated package, unedited, in a copy of the repository layout: pip installs it
    (--no-build-isolation, into a folder of its own) and its own tests pass."""
    (tmp_path / "packages").mkdir()
    (tmp_path / "shared_build").symlink_to(ROOT / "shared_build")
    args = [sys.executable, "-m", "shared_build", "new", "demo_op", "--abi", abi]
    args += ["--cuda"] if cuda else []
    subprocess.run(
        args,
        cwd=tmp_path,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "shared_build" / "src")},
    )
    package = tmp_path / "packages" / "demo_op"
    env = {
        **os.environ,
        "SHARED_BUILD_DIR": str(tmp_path / "build"),
        "TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0"),
        "WERROR": "1",  # the template is warning-free at -Wall -Wextra, like our sources
    }
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-build-isolation",
            "--no-deps",
            "--target",
            str(tmp_path / "site"),
            str(package),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    if cuda:
        info = (tmp_path / "site" / "demo_op" / "_build_info.py").read_text()
        assert "'cuda': None" not in info, "the --cuda scaffold built without its kernel"
    tests = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore::pytest.PytestUnknownMarkWarning",
            "-rA",
            str(package / "tests"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={**env, "PYTHONPATH": str(tmp_path / "site")},
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and " failed" not in tests.stdout
    # The test battery, with no edit anywhere else: the op fuzzed, property-tested,
    # thread-checked, compiled, exported, its memory held flat.
    for check in (
        "reference",
        "opcheck",
        "gradcheck",
        "fuzz",
        "properties",
        "threads",
        "memory",
        "compile",
        "export",
        "bad",
    ):
        assert re.search(rf"PASSED .*test_battery\[demo_op\.mul_add-{check}-cpu", tests.stdout), (
            check
        )
