"""add_ext's op as the test battery sees it (shared_build.battery): samples, reference,
bad calls. The package's own tests add what only this op has (the direct entry, the
graph it skips, the CUDA stream and 2^31 elements)."""

from __future__ import annotations

import torch

import add_ext
from shared_build.battery import Bad, OpTest, Sample

# Sizes around the vector width, the CPU grain (32768) and the CUDA tail handling.
SIZES = (1, 7, 1000, 32769, 100_003)


def reference(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """alpha * x + y computed in float64 and rounded once to the inputs' dtype."""
    return (alpha * x.double() + y.double()).to(x.dtype)


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    # One rounding of the result plus, for reduced precision, the opmath (float32) steps.
    eps = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 1e-2}
    return {"atol": eps[dtype], "rtol": eps[dtype]}


def layouts(shape, dtype, device) -> dict[str, torch.Tensor]:
    """One tensor of the logical shape in each memory layout the kernels must take:
    contiguous, transposed, offset (a data pointer off 16-byte alignment), strided (every
    other element), channels_last."""
    rows, cols = shape
    return {
        "contiguous": torch.randn(shape, dtype=dtype, device=device),
        "transposed": torch.randn(cols, rows, dtype=dtype, device=device).t(),
        "offset": torch.randn(rows * cols + 1, dtype=dtype, device=device)[1:].view(shape),
        "strided": torch.randn(rows, 2 * cols, dtype=dtype, device=device)[:, ::2],
        "channels_last": torch.randn(2, 3, *shape, dtype=dtype, device=device).to(
            memory_format=torch.channels_last
        ),
    }


def samples(device: str, dtype: torch.dtype) -> list[Sample]:
    grad = dtype == torch.float64  # the float64 samples serve gradcheck too

    def pair(make):
        x, y = make(), make()
        return x.requires_grad_(grad), y.requires_grad_(grad)

    cases = []
    for n in SIZES if not grad else (1, 7, 33):
        x, y = pair(lambda n=n: torch.randn(n, dtype=dtype, device=device))
        cases.append(Sample((x, y, -2.5), name=f"n={n}"))
    for name in ("transposed", "offset", "strided", "channels_last"):
        x, y = (layouts((37, 41) if not grad else (5, 6), dtype, device)[name] for _ in range(2))
        cases.append(Sample((x.requires_grad_(grad), y.requires_grad_(grad), 3.0), name=name))
    for shape in ((0,), (3, 0, 5), ()):
        x, y = pair(lambda shape=shape: torch.randn(shape, dtype=dtype, device=device))
        cases.append(Sample((x, y, 2.0), name=f"shape={list(shape)}"))
    # alpha * x is exact in float32 for a float16 or bfloat16 x when alpha has few
    # significant bits: there a fused multiply-add and a product then a sum give the same
    # bits (OpTest.exact), so 1e-3 gives way to 2^-10 in those dtypes.
    small = 2**-10 if dtype in (torch.float16, torch.bfloat16) else 1e-3
    for alpha in (1.0, 0.0, -1.0, small):
        x, y = pair(lambda: torch.randn(513 if not grad else 9, dtype=dtype, device=device))
        cases.append(Sample((x, y, alpha), name=f"alpha={alpha}"))
    x, y = pair(lambda: torch.randn(10, dtype=dtype, device=device))
    cases.append(Sample((x, y), name="default alpha"))
    x = torch.randn(64 if not grad else 6, 48 if not grad else 5, dtype=dtype, device=device).t()
    y = torch.randn(x.shape, dtype=dtype, device=device)
    cases.append(
        Sample((x.requires_grad_(grad), y.requires_grad_(grad), 0.5), name="mixed layouts")
    )
    if not grad:  # special values propagate (no gradient to check through them)
        x = torch.tensor([float("inf"), float("nan"), 1.0, -0.0], dtype=dtype, device=device)
        y = torch.tensor([1.0, 1.0, float("-inf"), 0.0], dtype=dtype, device=device)
        cases.append(Sample((x, y), name="inf, nan, -0", special=True))
    return cases


def bad() -> list[Bad]:
    return [
        Bad((torch.randn(3, 4), torch.randn(4, 3)), r"same shape .* got x \[3, 4\] and y \[4, 3\]"),
        Bad((torch.randn(3), torch.randn(1)), r"same shape .* got x \[3\] and y \[1\]"),
        Bad(
            (torch.randn(3), torch.randn(3, dtype=torch.float64)),
            "same dtype, got x Float and y Double",
        ),
        Bad(
            (torch.ones(3, dtype=torch.int64), torch.ones(3, dtype=torch.int64)),
            "dtype must be float16, bfloat16, float32 or float64, got Long",
        ),
        Bad((torch.ones(3, dtype=torch.bool),) * 2, "got Bool"),
        Bad((torch.ones(3, dtype=torch.complex64),) * 2, "got ComplexFloat"),
        # The fake (meta) kernel repeats the C++ checks: runs without a GPU.
        Bad(
            (torch.randn(3), torch.randn(3, device="meta")),
            "same device, got x on cpu and y on meta",
        ),
        Bad(
            (torch.randn(3, 3).to_sparse(),) * 2,
            r"must be dense \(strided\) tensors, got x Sparse and y Sparse",
        ),
        Bad(
            (torch.nested.nested_tensor([torch.randn(2), torch.randn(3)]),) * 2,
            r"must be dense \(strided\) tensors, got x nested and y nested",
        ),
    ]


def properties(device: str):
    """Shapes of rank 0 to 3 (now and then one long enough for several threads), every
    float dtype, any two layouts, any alpha."""
    from hypothesis import strategies as st

    from shared_build import battery

    @st.composite
    def draw(draw):
        shape = tuple(draw(battery.sides()) for _ in range(draw(st.integers(0, 3))))
        if draw(st.integers(0, 9)) == 0:
            shape = (draw(st.integers(32768, 70001)),)
        dtype = draw(st.sampled_from([torch.float16, torch.bfloat16, torch.float32, torch.float64]))
        x, y = (draw(battery.tensors(shape, dtype, device)) for _ in range(2))
        alpha = draw(st.one_of(st.sampled_from([0.0, 1.0, -1.0]), st.floats(-8, 8)))
        name = f"x {list(x.shape)} strides {x.stride()}, y strides {y.stride()}, alpha {alpha}"
        return Sample((x, y, alpha), name=name)

    return draw()


def check(sample: Sample, got: torch.Tensor, expected: torch.Tensor) -> None:
    """Within a few roundings of the largest term: alpha * x and y may cancel."""
    x, y, alpha = sample.args
    assert got.shape == x.shape and got.dtype == x.dtype and got.is_contiguous()
    terms = (abs(alpha) * x.double().abs() + y.double().abs()) if x.numel() else torch.ones(1)
    eps = tolerance(x.dtype)["rtol"]
    scale = max(1.0, terms.max().item())
    torch.testing.assert_close(got.double(), expected.double(), rtol=eps, atol=eps * scale)


OPS = [
    OpTest(
        name="add_ext.add",
        fn=add_ext.add,
        op=torch.ops.add_ext.add.default,
        samples=samples,
        reference=reference,
        tolerance=tolerance,
        # In float16 and bfloat16 the kernels compute alpha * x + y in float32 and round
        # once to nearest even, as torch.add's vector loop does: with the samples' alphas
        # (exact products) that is the exact value rounded once, the reference, to the bit.
        # (torch.add's scalar loop, for its last elements, rounds alpha * x to the dtype
        # first: 3 of 7 float16 elements 1 ulp off, so it is not the yardstick.)
        exact=reference,
        ulps=(0,),
        gradgrad=True,
        memory_dtype="float16",  # the F16C conversions' path (tests/test_robustness.py's)
        bad=bad,
        fuzz_extra=(
            ("alpha", "'two'"),
            ("x", "torch.randn(4, 1)"),  # no broadcasting
            ("y", "torch.randn(33)"),
            ("x", "x.half()"),  # float16 x with float32 y
            ("y", "y.bfloat16()"),
        ),
        properties=properties,
        check=check,
    )
]
