"""python -m shared_build new | doctor | info: the sentences for broken setups, the
scaffold's refusals, and a scaffolded package that builds and passes its own tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from shared_build import cli, doctor, knobs, scaffold
from shared_build.config import read_config
from shared_build.errors import BuildError
from shared_build.setup_args import runtime_requirements
from shared_build.torch_facts import STABLE_TARGET

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
def test_doctor_says_how_the_compiler_links_libstdcxx(tmp_path, wrapper, status, words, shared_cxx):
    """The lent GPU machines' build compiler linked libstdc++ statically: every library
    then crashed at its first error message."""
    cxx = fake_program(tmp_path, "g++-real", wrapper.format(cxx=shared_cxx))
    finding = doctor.check_cxx_runtime({"CXX": str(cxx), "PATH": os.environ["PATH"]})
    assert finding is not None and finding.status == status and words in finding.text


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
    monkeypatch.setitem(sys.modules, "ninja", None)  # the pip package is not importable
    finding = doctor.check_ninja({"PATH": str(tmp_path)})
    assert finding.status == "fail"
    assert finding.text.startswith("not found on PATH nor as the pip package; pip install ninja")


def test_doctor_flags_an_old_nvcc_with_the_pip_command(tmp_path, monkeypatch):
    """torch's CUDA 13.2 and only a CUDA 12.4 nvcc: a warning naming it and the fix."""
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
    assert toolkit is None and finding.status == "warn"
    assert (
        "nvcc 12.4 at" in finding.text
        and "its CUDA 12.4 is not torch's major version 13" in finding.text
    )
    assert 'pip install "nvidia-cuda-nvcc==13.2.*" "nvidia-cuda-crt==13.2.*"' in finding.text


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


def test_doctor_exit_code_is_1_on_a_blocker(monkeypatch, capsys):
    monkeypatch.setattr(
        doctor, "diagnose", lambda env=None: [doctor.Finding("fail", "ninja", "missing")]
    )
    assert doctor.main() == 1
    assert "[FAIL] ninja: missing" in capsys.readouterr().out


def test_doctor_runs_here():
    """On this machine, with its torch: every fact has a line, and the build works (nox
    builds every package here), so nothing blocks."""
    findings = doctor.diagnose()
    topics = [f.topic for f in findings]
    for topic in (
        "python",
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
        ("class", "is not a Python identifier"),
        ("MyOp", "has capitals; use lower case, e.g. myop"),
        ("add_ext", "exists already; choose another name"),
    ],
)
def test_new_refuses_bad_names(name, message):
    with pytest.raises(BuildError, match=message):
        scaffold.new_package(name, ROOT / "packages")


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
        "tests/test_demo_st.py",
    ]
    text = "".join(p.read_text() for p in target.rglob("*") if p.is_file())
    assert not re.search(r"\{\{[a-z_]+\}\}", text)
    pyproject = (target / "pyproject.toml").read_text()
    assert 'abi = "stable"' in pyproject
    assert f'"torch=={STABLE_TARGET}.0"' in pyproject
    config = read_config(target)
    assert config.abi == "stable"
    # Its wheel's metadata: the target and every newer torch.
    requirements = runtime_requirements(config, {}, None)
    assert requirements[0] == f"torch>={STABLE_TARGET}"
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
        "tests/test_demo_op.py",
    ]
    text = "".join(p.read_text() for p in target.rglob("*") if p.is_file())
    assert not re.search(r"\{\{[a-z_]+\}\}", text)
    assert 'cuda = "optional"' in (target / "pyproject.toml").read_text()
    cpu_only = scaffold.new_package("cpu_op", tmp_path)
    assert not (cpu_only / "csrc" / "cuda").exists()
    assert 'cuda = "none"' in (cpu_only / "pyproject.toml").read_text()
    # Its tests ask for no CUDA kernel it does not have (they would fail on a GPU machine).
    assert 'pytest.param("cuda"' in (target / "tests" / "test_demo_op.py").read_text()
    assert 'DEVICES = ["cpu"]' in (cpu_only / "tests" / "test_cpu_op.py").read_text()
    assert 'pytest.param("cuda"' not in (cpu_only / "tests" / "test_cpu_op.py").read_text()
    stable = scaffold.new_package("cpu_st", tmp_path, abi="stable")
    assert 'pytest.param("cuda"' not in (stable / "tests" / "test_cpu_st.py").read_text()


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
