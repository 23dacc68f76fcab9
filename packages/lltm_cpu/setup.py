import sys
from pathlib import Path

from setuptools import setup

here = Path(__file__).resolve().parent
# shared_build: vendored into sdists, at the repository root in a checkout.
sys.path[:0] = [str(here / "_vendor"), str(here.parents[1] / "shared_build" / "src")]
from shared_build import setup_kwargs  # noqa: E402

# -fno-trapping-math: the pointwise passes select between values computed for
# every element (clamps, elu's two branches); under GCC's default
# -ftrapping-math those selects stay branches in the AVX2 and baseline clones
# of SHARED_BUILD_CPU_CLONES, which then run one element at a time (only the
# AVX-512 clone, with its masks, vectorized). Nothing here enables FP traps,
# and the flag changes no value: NaN and infinities keep their meaning.
setup(**setup_kwargs(here, extra_compile_args={"cxx": ["-fno-trapping-math"]}))
