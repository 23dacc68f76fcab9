"""The Python side of the example: save a model that calls warp_perspective as TorchScript
and as an AOTInductor package, and check both in a fresh process that loads only the op
library.

    python model.py save DIR           # TorchScript: DIR/model.pt, inputs.pt, python_output.pt
    python model.py export DIR         # torch.export + AOTInductor: DIR/model.pt2,
                                       # python_aoti_output.pt
    python model.py check DIR LIBRARY  # fresh process: torch.ops.load_library(LIBRARY), run
                                       # both, compare with the saved outputs and the C++
                                       # apps' (cpp_output.pt, cpp_aoti_output.pt)
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch

# TorchScript is deprecated from torch 2.14 on (in favour of torch.export + AOTInductor) but
# still runs; this example is about the TorchScript path, so silence the notice.
warnings.filterwarnings("ignore", message=r".*torch\.jit\.(script|load|save).*deprecated")
# Raised inside torch.export's pytree code (torch 2.13), nothing this example can change.
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")


def make_module() -> torch.nn.Module:
    import warp_perspective

    class Rectify(torch.nn.Module):
        """Warp each uint8 image of a batch by its homography to a fixed size, then scale and
        normalise per channel: preprocessing that ships inside the model."""

        def __init__(self, out_h: int, out_w: int) -> None:
            super().__init__()
            self.out_h = out_h
            self.out_w = out_w
            self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1))
            self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1))

        def forward(self, image: torch.Tensor, warp: torch.Tensor) -> torch.Tensor:
            # The typed Python wrapper is scriptable; the saved code calls the op by name.
            out = warp_perspective.warp_perspective(
                image, warp, [self.out_h, self.out_w], "bilinear", "zeros"
            )
            return (out.float() / 255 - self.mean) / self.std

    return Rectify(96, 128)


def example_inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    image = torch.randint(0, 256, (4, 3, 120, 160), generator=g, dtype=torch.uint8)
    warp = torch.eye(3, dtype=torch.float64).repeat(4, 1, 1)
    warp[:, :2, :2] += 0.05 * torch.randn(4, 2, 2, generator=g, dtype=torch.float64)
    warp[:, :2, 2] = torch.tensor([-16.0, -12.0]) + 3 * torch.randn(4, 2, generator=g)
    warp[:, 2, :2] = 1e-4 * torch.randn(4, 2, generator=g, dtype=torch.float64)
    return {"image": image, "warp": warp}


def summary(name: str, out: torch.Tensor) -> str:
    return (
        f"{name}: output shape {list(out.shape)}, dtype {out.dtype}, "
        f"sum {out.sum(dtype=torch.float64).item():.6f}"
    )


def save(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    model = torch.jit.script(make_module())
    model.save(str(folder / "model.pt"))
    inputs = example_inputs()
    torch.save(inputs, folder / "inputs.pt")
    with torch.no_grad():
        out = model(inputs["image"], inputs["warp"])
    torch.save(out, folder / "python_output.pt")
    print(summary("Python (package imported)", out))
    print(f"saved {folder / 'model.pt'}")


def export(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    inputs = example_inputs()
    batch = torch.export.Dim("batch", min=1, max=256)
    exported = torch.export.export(
        make_module(),
        (inputs["image"], inputs["warp"]),
        dynamic_shapes=({0: batch}, {0: batch}),
    )
    package = torch._inductor.aoti_compile_and_package(
        exported, package_path=str(folder / "model.pt2")
    )
    with torch.no_grad():
        out = torch._inductor.aoti_load_package(package)(inputs["image"], inputs["warp"])
    torch.save(out, folder / "python_aoti_output.pt")
    print(summary("Python AOTInductor (package imported)", out))
    print(f"saved {package}")


def _compare(folder: Path, out: torch.Tensor, names: tuple[str, ...]) -> int:
    failures = 0
    for name in names:
        path = folder / name
        if not path.exists():
            continue
        other = torch.load(path)
        same = other.shape == out.shape and torch.equal(other, out)
        print(f"{name}: {'identical' if same else 'DIFFERENT'} to this run")
        failures += not same
    return failures


def check(folder: Path, library: str) -> int:
    torch.ops.load_library(library)
    inputs = torch.load(folder / "inputs.pt")
    model = torch.jit.load(str(folder / "model.pt"))
    with torch.no_grad():
        out = model(inputs["image"], inputs["warp"])
    print(summary("Python TorchScript (fresh process, library only)", out))
    failures = _compare(folder, out, ("python_output.pt", "cpp_output.pt"))
    if (folder / "model.pt2").exists():
        runner = torch._inductor.aoti_load_package(str(folder / "model.pt2"))
        with torch.no_grad():
            aoti = runner(inputs["image"], inputs["warp"])
        print(summary("Python AOTInductor (fresh process, library only)", aoti))
        failures += _compare(folder, aoti, ("python_aoti_output.pt", "cpp_aoti_output.pt"))
        # Same op kernel; the normalisation is compiled code, so equal up to rounding.
        close = torch.allclose(aoti, out, rtol=1e-6, atol=1e-6)
        print(f"AOTInductor and TorchScript: {'equal' if close else 'DIFFERENT'} within 1e-6")
        failures += not close
    assert "warp_perspective" not in sys.modules, "this process must not import the package"
    return 1 if failures else 0


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] in ("save", "export"):
        (save if sys.argv[1] == "save" else export)(Path(sys.argv[2]))
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        return check(Path(sys.argv[2]), sys.argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
