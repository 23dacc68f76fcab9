"""Environment knobs: USE_CUDA/FORCE_CUDA, DEBUG, MAX_JOBS, CXX."""

from __future__ import annotations

import re

import pytest

from shared_build import knobs
from shared_build.errors import BuildError
from shared_build.flags import compile_args, openmp_compile_args, sanitize_args, warning_args
from shared_build.torch_facts import stable_target

GiB = 1 << 30


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "auto"),
        ({"USE_CUDA": ""}, "auto"),
        ({"USE_CUDA": "auto"}, "auto"),
        ({"USE_CUDA": "AUTO"}, "auto"),
        ({"USE_CUDA": "1"}, "on"),
        ({"USE_CUDA": "true"}, "on"),
        ({"USE_CUDA": "0"}, "off"),
        ({"USE_CUDA": "off"}, "off"),
        ({"FORCE_CUDA": "1"}, "on"),
        ({"FORCE_CUDA": "0"}, "auto"),
        ({"USE_CUDA": "auto", "FORCE_CUDA": "1"}, "on"),
    ],
)
def test_use_cuda_mode(env, expected):
    assert knobs.use_cuda_mode(env) == expected


def test_use_cuda_rejects_unknown_values():
    with pytest.raises(BuildError, match=r"USE_CUDA='maybe' is not understood; use USE_CUDA=auto"):
        knobs.use_cuda_mode({"USE_CUDA": "maybe"})


def test_force_cuda_contradicting_use_cuda():
    with pytest.raises(BuildError, match="contradict"):
        knobs.use_cuda_mode({"USE_CUDA": "0", "FORCE_CUDA": "1"})


@pytest.mark.parametrize(
    ("value", "expected"), [(None, False), ("1", True), ("0", False), ("yes", True)]
)
def test_debug(value, expected):
    env = {} if value is None else {"DEBUG": value}
    assert knobs.parse_flag(env, "DEBUG") is expected


def test_debug_rejects_unknown_values():
    with pytest.raises(BuildError, match="DEBUG='2'"):
        knobs.parse_flag({"DEBUG": "2"}, "DEBUG")


def test_werror_adds_warnings_and_makes_other_headers_system_headers():
    assert knobs.parse_flag({"WERROR": "1"}, "WERROR") and not knobs.parse_flag({}, "WERROR")
    assert warning_args(False, ["/torch/include"]) == []
    assert warning_args(True, ["/torch/include", "/py"]) == [
        "-Wall", "-Wextra", "-Werror", "-isystem", "/torch/include", "-isystem", "/py",
    ]  # fmt: skip
    with pytest.raises(BuildError, match="WERROR='maybe' is not understood"):
        knobs.parse_flag({"WERROR": "maybe"}, "WERROR")


def test_compile_args_release_and_debug():
    release = compile_args(debug=False, with_cuda=True)
    # -g0: Python's CFLAGS bring -g, and a release library carries no debug info.
    assert release["cxx"] == ["-O3", "-g0"]
    assert "-O3" in release["nvcc"] and "-lineinfo" in release["nvcc"]
    debug = compile_args(debug=True, with_cuda=True)
    assert debug["cxx"] == ["-O0", "-g"]
    assert debug["nvcc"] == ["-O0", "-g", "-G"]
    assert "nvcc" not in compile_args(debug=False, with_cuda=False)


@pytest.mark.parametrize(
    ("env", "cores", "memory", "cuda", "expected"),
    [
        ({"MAX_JOBS": "3"}, 64, 1 * GiB, True, 3),  # explicit wins over everything
        ({}, 2, 24 * GiB, False, 2),  # cores bound
        ({}, 64, 8 * GiB, False, 8),  # memory bound, 1 GiB per C++ job
        ({}, 64, 8 * GiB, True, 4),  # 2 GiB per nvcc job
        ({}, 16, 512 << 20, False, 1),  # never below one
        ({}, 4, None, True, 4),  # memory unknown: cores
    ],
)
def test_max_jobs(env, cores, memory, cuda, expected):
    assert knobs.max_jobs(env, cores, memory, cuda) == expected


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_max_jobs_rejects_bad_values(value):
    with pytest.raises(BuildError, match=f"MAX_JOBS='{value}' must be a whole number"):
        knobs.max_jobs({"MAX_JOBS": value}, 4, None, False)


def test_find_cxx_default_and_override():
    found = knobs.find_cxx({}, which=lambda name: f"/usr/bin/{name}")
    assert found.command == "c++" and found.path == "/usr/bin/c++"
    custom = knobs.find_cxx({"CXX": "clang++-17 -stdlib=libc++"}, which=lambda name: f"/opt/{name}")
    assert custom.path == "/opt/clang++-17"


def test_find_cxx_missing_says_what_to_install():
    with pytest.raises(
        BuildError, match=re.escape("no C++ compiler named 'c++' is on PATH; install one")
    ):
        knobs.find_cxx({}, which=lambda name: None)
    with pytest.raises(BuildError, match=re.escape("CXX='g++-99' is not on PATH")):
        knobs.find_cxx({"CXX": "g++-99"}, which=lambda name: None)


def test_memory_and_cores_are_readable_here():
    assert knobs.cpu_count() >= 1
    memory = knobs.available_memory_bytes()
    assert memory is None or memory > 0


def test_openmp_flag_only_for_openmp_torch_on_linux():
    assert openmp_compile_args(True, "linux") == ["-fopenmp"]
    assert openmp_compile_args(False, "linux") == []
    assert openmp_compile_args(True, "darwin") == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ()),
        ("", ()),
        ("address", ("address",)),
        ("undefined, address", ("address", "undefined")),
        ("ADDRESS,address", ("address",)),
    ],
)
def test_sanitizers(value, expected):
    env = {} if value is None else {"SANITIZE": value}
    assert knobs.sanitizers(env) == expected


def test_sanitizers_rejects_unknown_names():
    with pytest.raises(BuildError, match=r"SANITIZE='address,thread' names thread; use .*address"):
        knobs.sanitizers({"SANITIZE": "address,thread"})


def test_sanitize_args():
    assert sanitize_args(()) == ([], [])
    cxx, link = sanitize_args(("address", "undefined"))
    assert link == ["-fsanitize=address,undefined"]
    assert "-fsanitize=address,undefined" in cxx and "-fno-omit-frame-pointer" in cxx
    # After compile_args' flags on the command line, so the last -O is the sanitizers'.
    release = compile_args(debug=False, with_cuda=False)["cxx"] + cxx
    assert [f for f in release if f.startswith("-O")][-1] == "-O1"
    debug = compile_args(debug=True, with_cuda=False)["cxx"]
    debug += sanitize_args(("address",), debug=True)[0]
    assert [f for f in debug if f.startswith("-O")][-1] == "-O0"


@pytest.mark.parametrize(
    ("env", "torch_version", "expected"),
    [
        # By default, the torch built against; a release names the oldest of its matrix.
        ({}, "2.13.0", "2.13"),
        ({}, "2.15.0+cu132", "2.15"),
        ({}, "2.11.0+cu130", "2.11"),
        ({"SHARED_BUILD_STABLE_TARGET": "2.13"}, "2.15.0+cu132", "2.13"),
        ({"SHARED_BUILD_STABLE_TARGET": "2.12"}, "2.14.1", "2.12"),
        ({"SHARED_BUILD_STABLE_TARGET": " "}, "2.14.1", "2.14"),
    ],
)
def test_stable_target(env, torch_version, expected):
    assert stable_target(env, torch_version) == expected


@pytest.mark.parametrize(
    ("env", "torch_version", "message"),
    [
        ({}, "2.9.1", r"older than .* \(2\.11 and newer\); install torch>=2\.11$"),
        ({"SHARED_BUILD_STABLE_TARGET": "2.12"}, "2.11.0", "needs torch 2.12 or newer"),
        (
            {"SHARED_BUILD_STABLE_TARGET": "2.10"},
            "2.14.1",
            "older than .* or unset SHARED_BUILD_STABLE_TARGET",
        ),
        ({"SHARED_BUILD_STABLE_TARGET": "2.15"}, "2.14.1", "needs torch 2.15 or newer"),
        ({"SHARED_BUILD_STABLE_TARGET": "2.11.0"}, "2.14.1", "not a torch release"),
        ({"SHARED_BUILD_STABLE_TARGET": "latest"}, "2.14.1", "not a torch release"),
    ],
)
def test_stable_target_errors(env, torch_version, message):
    with pytest.raises(BuildError, match=message):
        stable_target(env, torch_version)
