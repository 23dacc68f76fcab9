"""lltm_cuda's tests: the LLTM suite both LLTM packages share (tests/lltm_common, a link to
lltm_common/tests/lltm_common) runs against lltm_cuda on the GPU."""

from lltm_common.suite import conftest

impl = conftest("lltm_cuda", "cuda")
