"""Build softclip as one stable-ABI wheel: abi3 for CPython >= 3.10, any torch >= 2.13.

    pip wheel --no-build-isolation -w dist .     # or pip wheel -w dist . (builds on 2.13)

Three things make the wheel independent of the torch it runs on:
- the C++ includes only torch/csrc/stable, torch/headeronly and the C shim (csrc/softclip.cpp);
- TORCH_TARGET_VERSION: the headers then offer only the stable API of that release (2.13),
  which every later release keeps;
- py_limited_api: no libtorch_python and no CPython ABI beyond the limited one, so the
  wheel is tagged cp310-abi3 instead of one CPython version.
"""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

# The oldest torch the wheel supports, as torch/headeronly/version.h encodes releases:
# one byte each for major, minor and patch, from the top of a 64-bit number.
TARGET = (2, 13, 0)
TARGET_MACRO = f"0x{(TARGET[0] << 56) | (TARGET[1] << 48) | (TARGET[2] << 40):016x}ULL"

setup(
    name="softclip",
    version="0.1.0",
    description="limit * tanh(x / limit) on the LibTorch stable ABI (example)",
    packages=["softclip"],
    package_dir={"": "src"},
    ext_modules=[
        CppExtension(
            "softclip._C",
            ["csrc/softclip.cpp"],
            py_limited_api=True,
            define_macros=[("TORCH_TARGET_VERSION", TARGET_MACRO)],
            extra_compile_args=["-O2"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
    install_requires=[f"torch>={TARGET[0]}.{TARGET[1]}"],
    python_requires=">=3.10",
)
