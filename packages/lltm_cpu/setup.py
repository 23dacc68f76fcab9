import sys
from pathlib import Path

from setuptools import setup

here = Path(__file__).resolve().parent
# shared_build: vendored into sdists, at the repository root in a checkout.
sys.path[:0] = [str(here / "_vendor"), str(here.parents[1] / "shared_build" / "src")]
from shared_build import setup_kwargs  # noqa: E402

setup(**setup_kwargs(here))
