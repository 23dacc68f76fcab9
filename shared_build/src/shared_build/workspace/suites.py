"""What the test sessions run: the suites, pytest-xdist's workers, what the tests learn
from nox (the REPO_* variables), and the torch versions a session's arguments name."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence

from . import envs
from .envs import TorchEnv
from .release import auditwheel_args
from .repo import Package


def pytest_workers() -> list[str]:
    """pytest-xdist's arguments: PYTEST_WORKERS processes (default: one per core; 0: no xdist).

    --dist loadfile: a test file runs on one worker, so that its module fixtures (a wheel, a
    clean virtual environment) are made once (tests that pack a package's sdist in its
    folder take tests/conftest.py's lock, sdist_of). The repository's
    conftest.py refines it: the cases of a few long, independent tests (conftest.SPREAD: the
    examples, the scaffold builds) go to whichever worker is free, so no file is a long tail."""
    workers = os.environ.get("PYTEST_WORKERS", "").strip() or "auto"
    if workers == "0":
        return ["-p", "no:xdist"]
    return ["-n", workers, "--dist", "loadfile"]


def package_suites(env: TorchEnv, packages: list[Package]) -> list[str]:
    """The tests/ folder of every package built here."""
    return [
        str(p.root / "tests")
        for p in packages
        if p.name not in env.skipped and (p.root / "tests").is_dir()
    ]


def skipped_env(env: TorchEnv) -> dict[str, str]:
    """REPO_SKIPPED_PACKAGES: the packages this torch could not build, and why."""
    return {"REPO_SKIPPED_PACKAGES": ",".join(f"{n}={why}" for n, why in env.skipped.items())}


def test_suites(env: TorchEnv, packages: list[Package]) -> list[str]:
    """shared_build's tests, every package's built here, the cross-package tests."""
    root = env.repo.root
    return [
        str(env.repo.shared_build / "tests"),
        *package_suites(env, packages),
        str(root / "tests"),
    ]


def pytest_env(env: TorchEnv, release: dict[str, str] | None = None) -> dict[str, str]:
    """What the test suites learn from nox."""
    installer = [envs.UV, "pip", "install", "--index-strategy", "unsafe-best-match",
                 *envs.pip_sources()]  # fmt: skip
    return {
        **skipped_env(env),
        # The once-marked tests (sdists, the build journey, scaffolding: pip, setuptools and
        # shared_build with small packages) do not depend on torch's version; they run under
        # one torch of the run and skip under the others: most under the newest, the one a
        # new user gets; the packaging group (tests/test_distribution.py, test_release.py)
        # under the second-newest, a CUDA build too, which CI runs in its other lane (.ci/run).
        "REPO_ONCE_TORCH": env.repo.once_torch_setting(),
        # The wheels installed here (the full-ABI packages' built here, each stable-ABI
        # package's one wheel): the packaging tests take add_ext's file instead of compiling
        # it again (tests/test_distribution.py), and repair the release wheels with nox -s
        # release's auditwheel arguments (tests/test_release.py).
        "REPO_WHEELS": json.dumps(env.wheels()),
        # What nox -s release would ship from here, for the packaging tests' release proof
        # (set where they run), and its auditwheel arguments.
        "REPO_RELEASE_WHEELS": json.dumps(release or {}),
        "REPO_AUDITWHEEL": json.dumps(auditwheel_args()),
        # How nox installs: a clean environment of a test takes torch from uv's cache, the
        # file nox's environment was made from, instead of downloading it again.
        "REPO_INSTALLER": json.dumps(installer if envs.UV else []),
        # Inductor compiles the tests' small graphs in the test process: a pool of compile
        # workers (each importing torch) costs more CPU than it saves at this size, in every
        # xdist worker. The generated code is the same either way.
        "TORCHINDUCTOR_COMPILE_THREADS": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "1"),
        "TORCHINDUCTOR_CACHE_DIR": inductor_cache_dir(env),
        # Each xdist worker's ops run on as many OpenMP threads as the machine has cores,
        # and CI runs two sessions at once: more threads than cores, where OpenMP's default
        # of spinning at every barrier burns the time the other threads need. Idle threads
        # sleep instead; the thread counts (and the multi-threaded paths) stay as they are.
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
    }


def inductor_cache_dir(env: TorchEnv) -> str:
    """torch.compile's cache for the tests, one per set of the wheels built here (their
    names, sizes and times). torch keys a compiled graph on the graph, not on the custom
    ops' libraries: after _backward_pointwise lost three arguments and lltm_cpu was rebuilt,
    the cache's old backward still called it with seven. A TORCHINDUCTOR_CACHE_DIR of
    one's own is kept."""
    if "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        return os.environ["TORCHINDUCTOR_CACHE_DIR"]
    digest = hashlib.sha256()
    for wheel in sorted(env.wheels_dir.glob("*/*.whl")):
        stat = wheel.stat()
        digest.update(f"{wheel.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return str(env.path / "inductor-cache" / digest.hexdigest()[:16])


def dev_torch(posargs: Sequence[str], default: str) -> tuple[str, list[str]]:
    """nox -s dev's torch (`--torch <v>`, else default) and the arguments left."""
    args = list(posargs)
    version = default
    if "--torch" in args:
        index = args.index("--torch")
        if index + 1 == len(args) or args[index + 1].startswith("-"):
            raise ValueError(f"--torch needs a version, e.g. --torch {default}")
        version = args[index + 1]
        del args[index : index + 2]
    return version, args


def bench_versions(
    posargs: Sequence[str], torch_versions: Sequence[str]
) -> tuple[list[str], list[str]]:
    """nox -s bench's torch versions (the first of the run; `--all-torch`: every one;
    `--torch <v>`, repeatable: those) and the arguments left for benchmarks/run.py."""
    args = list(posargs)
    versions = [torch_versions[0]]
    if "--all-torch" in args:
        args.remove("--all-torch")
        versions = list(torch_versions)
    while "--torch" in args:
        index = args.index("--torch")
        versions = (
            [args[index + 1]] if versions == [torch_versions[0]] else [*versions, args[index + 1]]
        )
        del args[index : index + 2]
    return versions, args
