"""warp_perspective outside eager Python: TorchScript saved and run in a fresh process that
loads only the op library, an AOTInductor package, and a build without OpenCV. The C++
programs of examples/05_torchscript_cpp run in tests/test_examples.py."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import List, Optional  # noqa: UP035  (TorchScript reads these annotations)

import pytest
import torch

import warp_perspective

# TorchScript is deprecated from torch 2.14 on (torch.export + AOTInductor replace it) but
# still runs, and these tests are about it.
pytestmark = pytest.mark.filterwarnings("ignore:.*torch.jit.*deprecated")


def _fresh_python(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run code in a new interpreter; fail with its output if it fails."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


class Pipeline(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dsize: List[int] = [20, 30]  # noqa: UP006

    def forward(self, image: torch.Tensor, warp: torch.Tensor) -> torch.Tensor:
        a = warp_perspective.warp_perspective(image, warp, self.dsize, "bilinear", "border")
        b = torch.ops.warp_perspective.warp_perspective(image, warp, None, "nearest", "zeros")
        return a.sum(dim=(-1, -2)) + b.mean(dim=(-1, -2))


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    image = torch.rand(2, 3, 17, 23, generator=g)
    warp = torch.eye(3).repeat(2, 1, 1)
    warp[:, :2, 2] = torch.tensor([[1.5, -2.0], [0.25, 3.0]])
    warp[:, 2, :2] = 1e-3
    return image, warp


def test_wrapper_is_scriptable():
    def fn(x: torch.Tensor, m: torch.Tensor, size: Optional[List[int]]) -> torch.Tensor:  # noqa: UP006, UP045
        return warp_perspective.warp_perspective(x, m, size, "nearest", "border")

    scripted = torch.jit.script(fn)
    image, warp = _inputs()
    assert torch.equal(scripted(image, warp, [9, 8]), fn(image, warp, [9, 8]))
    assert torch.equal(scripted(image, warp, None), fn(image, warp, None))


def test_torchscript_runs_in_a_process_that_only_loads_the_library(tmp_path):
    image, warp = _inputs()
    scripted = torch.jit.script(Pipeline())
    expected = scripted(image, warp)
    scripted.save(str(tmp_path / "model.pt"))
    torch.save({"image": image, "warp": warp, "expected": expected}, tmp_path / "io.pt")
    out = _fresh_python(
        """
import sys, torch
torch.ops.load_library(sys.argv[1])
model = torch.jit.load(sys.argv[2])
io = torch.load(sys.argv[3])
out = model(io["image"], io["warp"])
assert "warp_perspective" not in sys.modules
assert torch.equal(out, io["expected"]), (out - io["expected"]).abs().max()
# The library is on the stable ABI, which has no C++ autograd: the package registers the
# gradients (torch.library.register_autograd), so a model to train needs it imported.
import warp_perspective
x = io["image"].clone().requires_grad_()
model(x, io["warp"]).sum().backward()
assert x.grad is not None and x.grad.abs().sum() > 0
print("ok")
""",
        warp_perspective.library_path(),
        str(tmp_path / "model.pt"),
        str(tmp_path / "io.pt"),
    )
    assert out.strip() == "ok"


def test_loading_without_the_library_names_the_op(tmp_path):
    torch.jit.script(Pipeline()).save(str(tmp_path / "model.pt"))
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, torch; torch.jit.load(sys.argv[1])",
            str(tmp_path / "model.pt"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert "warp_perspective::warp_perspective" in proc.stderr


@pytest.mark.slow
def test_aot_inductor_package(tmp_path):
    """torch.export, compiled by AOTInductor into a .pt2 package, run in a fresh process."""

    class Module(torch.nn.Module):
        def forward(self, image: torch.Tensor, warp: torch.Tensor) -> torch.Tensor:
            out = warp_perspective.warp_perspective(image, warp, [24, 28], "bilinear", "zeros")
            return torch.relu(out * 2 - 0.5)

    image, warp = _inputs()
    batch = torch.export.Dim("batch", min=1, max=32)
    exported = torch.export.export(Module(), (image, warp), dynamic_shapes=({0: batch}, {0: batch}))
    package = torch._inductor.aoti_compile_and_package(
        exported, package_path=str(tmp_path / "warp.pt2")
    )
    image3 = torch.rand(3, 3, 17, 23)
    warp3 = torch.eye(3).repeat(3, 1, 1)
    warp3[:, 0, 2] = torch.tensor([0.5, -1.0, 2.0])
    torch.save(
        {"image": image3, "warp": warp3, "expected": Module()(image3, warp3)}, tmp_path / "io.pt"
    )
    out = _fresh_python(
        """
import sys, torch
torch.ops.load_library(sys.argv[1])
runner = torch._inductor.aoti_load_package(sys.argv[2])
io = torch.load(sys.argv[3])
out = runner(io["image"], io["warp"])
assert "warp_perspective" not in sys.modules
torch.testing.assert_close(out, io["expected"])
print("ok")
""",
        warp_perspective.library_path(),
        package,
        str(tmp_path / "io.pt"),
    )
    assert out.strip() == "ok"


@pytest.mark.slow
@pytest.mark.once
def test_build_without_opencv(tmp_path):
    """WARP_PERSPECTIVE_OPENCV=0: the build says so, and the library's CPU kernel is the
    built-in one. CI thereby exercises both backends from one machine with OpenCV."""
    source = Path(warp_perspective.BUILD_INFO["source_dir"])
    if not (source / "setup.py").is_file():
        pytest.skip(f"the package source is not at {source}")
    env = {
        **os.environ,
        "WARP_PERSPECTIVE_OPENCV": "0",
        "USE_CUDA": "0",
        "SHARED_BUILD_DIR": str(tmp_path / "build"),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
         "-w", str(tmp_path / "wheels"), str(source)],
        capture_output=True, text=True, env=env, timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "CPU backend: built-in kernel (WARP_PERSPECTIVE_OPENCV=0)" in proc.stdout + proc.stderr
    (wheel,) = (tmp_path / "wheels").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extract("warp_perspective/_C.so", tmp_path / "unpacked")
    library = tmp_path / "unpacked" / "warp_perspective" / "_C.so"
    readelf = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True)
    if readelf.returncode == 0:
        assert "opencv" not in readelf.stdout
    out = _fresh_python(
        """
import sys, torch
torch.ops.load_library(sys.argv[1])
config = dict(line.split("=", 1) for line in torch.ops.warp_perspective._build_config().splitlines())
assert config["cpu_backend"] == "builtin" and config["opencv"] == "", config
assert config["cpu_default"] == "builtin", config
try:
    torch.ops.warp_perspective._warp_perspective_opencv(torch.rand(1, 1, 4, 4), torch.eye(3), None, "bilinear", "zeros")
except RuntimeError as error:
    assert 'backend="opencv" was asked for, but this build has no OpenCV' in str(error), error
else:
    raise AssertionError("the OpenCV op ran in a build without OpenCV")
g = torch.Generator().manual_seed(0)
image = torch.rand(2, 3, 31, 45, generator=g)
m = torch.tensor([[1.02, 0.03, -1.5], [0.01, 0.98, 2.2], [1e-4, 2e-4, 1.0]])
for interpolation in ("bilinear", "nearest"):
    for padding in ("zeros", "border"):
        a = torch.ops.warp_perspective.warp_perspective(image, m, None, interpolation, padding)
        b = torch.ops.warp_perspective._warp_perspective_builtin(image, m, None, interpolation, padding)
        assert torch.equal(a, b)
print("ok")
""",
        str(library),
    )
    assert out.strip() == "ok"
