"""Build aot_linear ahead of time with torch.utils.cpp_extension and setuptools alone.

    pip install --no-build-isolation .        # or: pip wheel --no-build-isolation -w dist .

--no-build-isolation: the extension must be compiled against the torch it will run with;
an isolated build would download whatever torch is newest into a temporary environment.
"""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="aot_linear",
    version="0.1.0",
    description="y = x @ weight.T + bias with a C++ forward and backward (example)",
    packages=["aot_linear"],
    package_dir={"": "src"},  # src layout: a script here never imports the unbuilt sources
    # "aot_linear._C": the module lands inside the package, and BuildExtension defines
    # TORCH_EXTENSION_NAME=_C from the last part of this name.
    ext_modules=[CppExtension("aot_linear._C", ["csrc/linear.cpp"], extra_compile_args=["-O2"])],
    cmdclass={"build_ext": BuildExtension},
    install_requires=["torch"],
    python_requires=">=3.10",
)
