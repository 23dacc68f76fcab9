"""The command line of shared_build: ``python -m shared_build new | doctor | info``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import BuildError


def _repo_packages_dir(start: Path) -> Path:
    """packages/ of the repository around start: the first folder up from start that holds
    packages/ and shared_build/. Outside one, a BuildError: writing ./packages/NAME there
    would make a package nothing builds or tests."""
    for folder in [start, *start.parents]:
        if (folder / "packages").is_dir() and (folder / "shared_build").is_dir():
            return folder / "packages"
    raise BuildError(
        f"{start} is not inside a checkout of this repository (no folder from it up holds "
        "packages/ and shared_build/); run shared-build new inside one, or say where to "
        "write with --packages-dir"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="shared-build",
        description="Scaffold, diagnose and inspect PyTorch C++/CUDA extension packages.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    new = commands.add_parser("new", help="write packages/NAME: a working op in every slot")
    new.add_argument("name", help="package name: a lower-case Python identifier")
    new.add_argument("--cuda", action="store_true", help="with a CUDA kernel")
    new.add_argument(
        "--abi",
        choices=("full", "stable"),
        default="full",
        help="full: the checks and a Meta kernel in C++, autograd in Python "
        "(torch.library.register_autograd), a wheel per torch release; stable: LibTorch's "
        "stable ABI, one abi3 wheel for every torch from the target on, checks, fake kernel "
        "and autograd in Python",
    )
    new.add_argument("--packages-dir", type=Path, help="default: the repository's packages/")
    commands.add_parser("doctor", help="what this machine can build, one line per fact")
    info = commands.add_parser("info", help="what an installed package was built with")
    info.add_argument("package")
    args = parser.parse_args(argv)

    try:
        if args.command == "new":
            from .scaffold import new_package

            packages_dir = args.packages_dir or _repo_packages_dir(Path.cwd())
            target = new_package(args.name, packages_dir, cuda=args.cuda, abi=args.abi)
            print(f"wrote {target}")
            print(f"next: pip install --no-build-isolation {target}")
            print(f"      python -m pytest {target / 'tests'}")
            return 0
        if args.command == "doctor":
            from .doctor import main as doctor_main

            return doctor_main()
        from .info import main as info_main

        return info_main(args.package)
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
