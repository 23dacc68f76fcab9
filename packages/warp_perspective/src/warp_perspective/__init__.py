"""warp_perspective: ``cv2.warpPerspective`` as a PyTorch custom op.

>>> import torch, warp_perspective
>>> image = torch.rand(3, 64, 64)
>>> shift = torch.tensor([[1.0, 0, 5], [0, 1, 0], [0, 0, 1]])
>>> warp_perspective.warp_perspective(image, shift).shape
torch.Size([3, 64, 64])

The op (``torch.ops.warp_perspective.warp_perspective``) lives in a plain shared library
without Python in it, built on LibTorch's stable ABI (one wheel for torch 2.13 and every
newer torch): :func:`library_path` gives its path, for ``torch.ops.load_library`` in a
process that does not import this package (a saved TorchScript model) and for linking into
a C++ program; :func:`cuda_library_path` the CUDA kernels' library, loaded only under a
CUDA build of torch. Autograd and the fake kernels of torch.compile are registered by this
package (``ops``): a process that only loads the library runs the op but does not
differentiate it.
"""

from ._build_info import BUILD_INFO, check_compatible

# Before loading the compiled library: a torch mismatch becomes one sentence, not an
# undefined-symbol traceback.
check_compatible()

from ._library import cuda_library_path, library_path, load_library  # noqa: E402

load_library()

from .ops import backend, build_config, warp_perspective  # noqa: E402

__all__ = [
    "BUILD_INFO",
    "backend",
    "build_config",
    "cuda_library_path",
    "library_path",
    "warp_perspective",
]
__version__ = BUILD_INFO["version"]
