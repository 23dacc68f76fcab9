"""Property tests: every op against its plain-PyTorch reference on inputs hypothesis draws.

The package suites check hand-picked cases; these draw what a user may pass: sizes 0, 1,
odd sizes past a vector width, transposed, sliced and expanded views, every dtype an op
accepts. The "ci" profile (root conftest.py) runs 200 examples per test, the same ones on
every run; ``--hypothesis-profile=thorough`` draws 2000 new ones. A failure hypothesis
shrinks becomes an ordinary regression test at the end of this file.

``nox -s sanitize`` runs this file against ASan/UBSan builds, once per CPU level
(WARP_PERSPECTIVE_NO_AVX512, WARP_PERSPECTIVE_NO_AVX2, ADD_EXT_NO_F16C), so that every
kernel path reads and writes only inside its tensors.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("hypothesis")
from hypothesis import given, note
from hypothesis import strategies as st

# The LLTM reference lives once, in lltm_common/tests (the lltm packages' suites use it too).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lltm_common" / "tests"))
from lltm_common.reference import TOLERANCES, assert_close_scaled, lltm_forward, lltm_gradients

# The warp_perspective reference lives once, beside its package's suite.
sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / "packages" / "warp_perspective" / "tests")
)
from warp_reference import reference_and_ties as warp_reference

SKIPPED = dict(
    item.split("=", 1)
    for item in os.environ.get("REPO_SKIPPED_PACKAGES", "").split(",")
    if "=" in item  # a reason may hold commas: only name=reason items start an entry
)
FLOATING = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
# Relative rounding of one result per dtype (a few ulp), for results scaled to about 1.
EPS = {torch.float64: 1e-12, torch.float32: 4e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def package(name: str):
    if name in SKIPPED:
        pytest.skip(f"{name} not built here: {SKIPPED[name]}")
    return importlib.import_module(name)


# ---- inputs ---------------------------------------------------------------------------

# Sizes: 0, 1, small odd ones, and ones just past the vector widths (8, 16, 32 floats).
SIDES = st.one_of(
    st.sampled_from([0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65]),
    st.integers(0, 70),
)
VIEWS = ["contiguous", "transposed", "sliced", "expanded"]


def random_values(shape, dtype, generator, device="cpu") -> torch.Tensor:
    """Standard normal values drawn in float64 (uint8: 0..255), converted to dtype."""
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, generator=generator, dtype=dtype).to(device)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype)


def as_view(t: torch.Tensor, view: str, generator: torch.Generator) -> torch.Tensor:
    """The values of t (expanded: of a broadcast part of t) in the memory layout view."""
    shape = tuple(t.shape)
    if view == "transposed" and t.dim() >= 2:
        return t.permute(*reversed(range(t.dim()))).contiguous().permute(*reversed(range(t.dim())))
    if view == "sliced" and t.dim() >= 1:
        # Every other element of the last dimension, after one leading row: a storage
        # offset and a stride of 2.
        wide = torch.zeros((*shape[:-1], 2 * shape[-1] + 1), dtype=t.dtype, device=t.device)
        wide[..., 1::2] = t
        return wide[..., 1::2]
    if view == "expanded" and t.dim() >= 1:
        # Stride 0 along the dimensions of size > 1 that the draw collapses.
        keep = [s if i % 2 == 0 else 1 for i, s in enumerate(shape)]
        base = t[tuple(slice(0, k) for k in keep)].clone()
        return base.expand(*shape)
    return t


# ---- add_ext --------------------------------------------------------------------------


@st.composite
def add_cases(draw):
    dims = draw(st.integers(0, 3))
    shape = tuple(draw(SIDES) for _ in range(dims))
    if draw(st.integers(0, 9)) == 0:  # now and then, enough elements for several threads
        shape = (draw(st.integers(32768, 70001)),)
    return {
        "shape": shape,
        "dtype": draw(st.sampled_from(FLOATING)),
        "views": (draw(st.sampled_from(VIEWS)), draw(st.sampled_from(VIEWS))),
        "alpha": draw(
            st.one_of(st.sampled_from([0.0, 1.0, -1.0]), st.floats(-8, 8, allow_nan=False))
        ),
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


@pytest.mark.parametrize("device", DEVICES)
@given(case=add_cases())
def test_add_ext_add(device, case):
    add_ext = package("add_ext")
    g = torch.Generator().manual_seed(case["seed"])
    dtype = case["dtype"]
    x, y = (
        as_view(random_values(case["shape"], dtype, g, device), view, g) for view in case["views"]
    )
    note(f"x {x.shape} strides {x.stride()}, y strides {y.stride()}")
    out = add_ext.add(x, y, case["alpha"])
    expected = case["alpha"] * x.double() + y.double()
    assert out.shape == x.shape and out.dtype == dtype and out.device == x.device
    assert out.is_contiguous()
    scale = (
        max(1.0, (abs(case["alpha"]) * x.double().abs() + y.double().abs()).max().item())
        if (x.numel())
        else 1.0
    )
    torch.testing.assert_close(
        out.double(), expected.to(dtype).double(), rtol=EPS[dtype], atol=EPS[dtype] * scale
    )
    # The same result through torch.ops (the boxed path) and with autograd recording.
    assert torch.equal(torch.ops.add_ext.add(x, y, case["alpha"]), out)
    if dtype == torch.float64 and x.numel() <= 4096:
        xg, yg = x.detach().requires_grad_(), y.detach().requires_grad_()
        grad = torch.randn(out.shape, generator=g, dtype=dtype).to(device)
        add_ext.add(xg, yg, case["alpha"]).backward(grad)
        torch.testing.assert_close(xg.grad, case["alpha"] * grad)
        torch.testing.assert_close(yg.grad, grad)


# ---- gc_cpp ---------------------------------------------------------------------------


@st.composite
def graph_cases(draw):
    layout = draw(st.sampled_from(["dense", "coo", "csr"]))
    # Sparse products exist for float32 and float64 on the CPU; dense for every dtype.
    dtypes = FLOATING if layout == "dense" else [torch.float32, torch.float64]
    return {
        "n": draw(st.one_of(st.integers(0, 40), st.sampled_from([1, 17, 33]))),
        "f_in": draw(st.integers(0, 20)),
        "f_out": draw(st.integers(0, 20)),
        "density": draw(st.sampled_from([0.0, 0.05, 0.3, 1.0])),
        "layout": layout,
        "dtype": draw(st.sampled_from(dtypes)),
        "bias": draw(st.booleans()),
        "x_view": draw(st.sampled_from(["contiguous", "transposed", "sliced"])),
        "w_view": draw(st.sampled_from(["contiguous", "transposed", "sliced"])),
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


def make_adjacency(n, density, layout, dtype, g) -> tuple[torch.Tensor, torch.Tensor]:
    """(adj in layout, its dense float64 values)."""
    dense = torch.rand(n, n, generator=g, dtype=torch.float64)
    dense = torch.where(
        torch.rand(n, n, generator=g, dtype=torch.float64) < density, dense, 0.0
    ).to(dtype)
    adj = {
        "dense": lambda: dense,
        "coo": lambda: dense.to_sparse().coalesce(),
        "csr": dense.to_sparse_csr,
    }[layout]()
    return adj, dense.double()


@given(case=graph_cases())
def test_gc_cpp_graph_conv_and_weight_grad(case):
    gc_cpp = package("gc_cpp")
    g = torch.Generator().manual_seed(case["seed"])
    n, f_in, f_out, dtype = case["n"], case["f_in"], case["f_out"], case["dtype"]
    adj, a = make_adjacency(n, case["density"], case["layout"], dtype, g)
    x = as_view(random_values((n, f_in), dtype, g), case["x_view"], g)
    w = as_view(random_values((f_in, f_out), dtype, g), case["w_view"], g)
    b = random_values((f_out,), dtype, g) if case["bias"] else None
    out = gc_cpp.graph_conv(adj, x, w, b)
    expected = a @ x.double() @ w.double() + (b.double() if b is not None else 0)
    assert out.shape == (n, f_out) and out.dtype == dtype
    # Rounding grows with the length of the sums: scale by the sum of |terms|.
    scale = a.abs() @ x.double().abs() @ w.double().abs()
    scale = max(1.0, scale.max().item() if scale.numel() else 1.0)
    tol = (
        EPS[dtype] * max(1, f_in, n) ** 0.5 * (4 if dtype in (torch.float16, torch.bfloat16) else 1)
    )
    torch.testing.assert_close(out.double(), expected, rtol=tol, atol=tol * scale)

    grad = random_values((n, f_out), dtype, g)
    dw = gc_cpp.weight_grad(adj, x, grad)
    dw_expected = (a @ x.double()).T @ grad.double()
    scale = (a.abs() @ x.double().abs()).T @ grad.double().abs()
    scale = max(1.0, scale.max().item() if scale.numel() else 1.0)
    torch.testing.assert_close(dw.double(), dw_expected, rtol=tol, atol=tol * scale)

    if dtype == torch.float64 and n * max(f_in, f_out) <= 400:
        leaves = [x.detach().requires_grad_(), w.detach().requires_grad_()]
        if b is not None:
            leaves.append(b.detach().requires_grad_())
        gc_cpp.graph_conv(adj, *leaves[:2], *leaves[2:]).backward(grad)
        ref_leaves = [t.detach().clone().requires_grad_() for t in leaves]
        (a @ ref_leaves[0] @ ref_leaves[1] + (ref_leaves[2] if b is not None else 0)).backward(grad)
        for ours, ref in zip(leaves, ref_leaves, strict=True):
            torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-10, atol=1e-10)


@given(
    n_rows=st.integers(0, 40),
    n_cols=st.integers(0, 40),
    density=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    index_dtype=st.sampled_from([torch.int32, torch.int64]),
    dtype=st.sampled_from(FLOATING),
    seed=st.integers(0, 2**31 - 1),
)
def test_gc_cpp_csr_transpose(n_rows, n_cols, density, index_dtype, dtype, seed):
    package("gc_cpp")
    g = torch.Generator().manual_seed(seed)
    dense = torch.rand(n_rows, n_cols, generator=g, dtype=torch.float64)
    dense = torch.where(torch.rand(n_rows, n_cols, generator=g) < density, dense, 0.0).to(dtype)
    csr = dense.to_sparse_csr()
    crow, col = csr.crow_indices().to(index_dtype), csr.col_indices().to(index_dtype)
    t_crow, t_col, t_values = torch.ops.gc_cpp._csr_transpose(crow, col, csr.values(), n_cols)
    expected = dense.T.contiguous().to_sparse_csr()
    assert t_crow.dtype == t_col.dtype == index_dtype and t_values.dtype == dtype
    assert torch.equal(t_crow.long(), expected.crow_indices())
    assert torch.equal(t_col.long(), expected.col_indices())
    assert torch.equal(t_values, expected.values())


# ---- lltm_cpu and lltm_cuda -----------------------------------------------------------

LLTM_IMPLS = [
    pytest.param("lltm_cpu", "cpu", id="lltm_cpu"),
    pytest.param("lltm_cuda", "cuda", id="lltm_cuda", marks=pytest.mark.cuda),
]


@st.composite
def lltm_cases(draw):
    return {
        "batch": draw(st.one_of(st.integers(0, 9), st.sampled_from([17, 33]))),
        "features": draw(st.integers(0, 20)),
        "state": draw(st.one_of(st.integers(1, 20), st.sampled_from([8, 15, 16, 17, 33, 65]))),
        "dtype": draw(st.sampled_from(FLOATING)),
        "views": [draw(st.sampled_from(["contiguous", "transposed", "sliced"])) for _ in range(5)],
        "gate_scale": draw(st.sampled_from([1.0, 8.0])),
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


@pytest.mark.parametrize(("name", "device"), LLTM_IMPLS)
@given(case=lltm_cases())
def test_lltm_forward_and_backward(name, device, case):
    package(name)
    ops = getattr(torch.ops, name)
    g = torch.Generator().manual_seed(case["seed"])
    b, f, s, dtype = case["batch"], case["features"], case["state"], case["dtype"]
    bound = case["gate_scale"] / s**0.5
    drawn = [
        torch.randn(b, f, generator=g, dtype=torch.float64),
        (torch.rand(3 * s, f + s, generator=g, dtype=torch.float64) * 2 - 1) * bound,
        (torch.rand(3 * s, generator=g, dtype=torch.float64) * 2 - 1) * bound,
        torch.randn(b, s, generator=g, dtype=torch.float64),
        torch.randn(b, s, generator=g, dtype=torch.float64),
    ]
    inputs = [
        as_view(t.to(device, dtype), view, g) for t, view in zip(drawn, case["views"], strict=True)
    ]
    outs = ops.forward(*inputs)
    expected = lltm_forward(*[t.double() for t in inputs])
    for name_, ours, ref in zip(("new_h", "new_cell"), outs[:2], expected[:2], strict=True):
        assert ours.shape == ref.shape and ours.dtype == dtype
        assert_close_scaled(ours, ref, dtype, name_)

    grad_h, grad_cell = (
        torch.randn(b, s, generator=g, dtype=torch.float64).to(device, dtype) for _ in range(2)
    )
    d_old_h, d_input, d_weights, d_bias, d_old_cell = ops.backward(
        grad_h.contiguous(), grad_cell.contiguous(), *outs[1:], inputs[1]
    )
    ref = lltm_gradients(inputs, grad_h, grad_cell)
    # The gradients sum over the batch and features: allow for the longer sums.
    long = max(1, b, f + s) ** 0.5
    for got, key in zip(
        (d_old_h, d_input, d_weights, d_bias, d_old_cell),
        ("d_old_h", "d_input", "d_weights", "d_bias", "d_old_cell"),
        strict=True,
    ):
        want = ref[key]
        assert got.shape == want.shape, key
        tol = TOLERANCES[dtype] * long
        scale = max(1.0, want.abs().max().item()) if want.numel() else 1.0
        torch.testing.assert_close(
            got.double().cpu(),
            want.cpu(),
            atol=tol * scale * 2,
            rtol=tol,
            msg=lambda m, k=key: f"{k}: {m}",
        )


# ---- warp_perspective -----------------------------------------------------------------


@st.composite
def homographies(draw, h: int, w: int) -> torch.Tensor:
    """Invertible by construction: about the image centre, a rotation, scales in [0.3, 3]
    (negative: a mirror), a shear, a shift, and a mild perspective that keeps w > 0.8 over
    the output."""
    angle = draw(st.floats(-3.2, 3.2))
    sx, sy = (draw(st.floats(0.3, 3.0)) * draw(st.sampled_from([1, 1, 1, -1])) for _ in range(2))
    shear = draw(st.floats(-0.3, 0.3))
    tx, ty = draw(st.floats(-10, 10)), draw(st.floats(-10, 10))
    px, py = draw(st.floats(-2e-3, 2e-3)), draw(st.floats(-2e-3, 2e-3))
    a = torch.tensor(angle, dtype=torch.float64)
    rot = torch.tensor([[a.cos(), -a.sin(), 0], [a.sin(), a.cos(), 0], [0, 0, 1]])
    lin = torch.tensor([[sx, shear, 0], [0, sy, 0], [0, 0, 1]], dtype=torch.float64)
    c = torch.tensor([[1.0, 0, (w - 1) / 2], [0, 1, (h - 1) / 2], [0, 0, 1]], dtype=torch.float64)
    shift = torch.tensor([[1.0, 0, tx], [0, 1, ty], [0, 0, 1]], dtype=torch.float64)
    persp = torch.tensor([[1.0, 0, 0], [0, 1, 0], [px, py, 1]], dtype=torch.float64)
    if draw(st.integers(0, 4)) == 0:  # plain shifts: the kernels' window loads
        return shift
    return persp @ shift @ c @ rot @ lin @ torch.linalg.inv(c)


@st.composite
def warp_cases(draw):
    rank = draw(st.sampled_from([2, 3, 4]))
    h = draw(st.one_of(st.integers(1, 24), st.sampled_from([1, 2, 31, 33])))
    w = draw(st.one_of(st.integers(1, 40), st.sampled_from([1, 15, 16, 17, 32, 33, 65, 70])))
    lead = {
        2: (),
        3: (draw(st.integers(1, 3)),),
        4: (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
    }
    shape = (*lead[rank], h, w)
    batch = shape[0] if rank == 4 else 1
    per_image = rank == 4 and draw(st.booleans())
    mats = [draw(homographies(h, w)) for _ in range(batch if per_image else 1)]
    dsize = draw(st.one_of(st.none(), st.tuples(st.integers(1, 30), st.integers(1, 70))))
    return {
        "shape": shape,
        "matrix": torch.stack(mats) if per_image else mats[0],
        "dsize": dsize,
        "dtype": draw(st.sampled_from([torch.float32, torch.float64, torch.uint8])),
        "interpolation": draw(st.sampled_from(["bilinear", "nearest"])),
        "padding_mode": draw(st.sampled_from(["zeros", "border"])),
        "view": draw(st.sampled_from(["contiguous", "transposed", "sliced"])),
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


WARP_KINDS = [
    pytest.param("public", "cpu", id="public-cpu"),  # the build's default: built-in unless =1
    pytest.param("builtin", "cpu", id="builtin-cpu"),
    pytest.param("opencv", "cpu", id="opencv-cpu"),  # backend="opencv", where the build has it
    pytest.param("public", "cuda", id="public-cuda", marks=pytest.mark.cuda),
]


@pytest.mark.parametrize(("kind", "device"), WARP_KINDS)
@given(case=warp_cases())
def test_warp_perspective(kind, device, case):
    warp_perspective = package("warp_perspective")
    if kind == "opencv" and warp_perspective.backend() != "opencv":
        pytest.skip("this build has no OpenCV backend")
    op = {
        "public": torch.ops.warp_perspective.warp_perspective,
        "builtin": torch.ops.warp_perspective._warp_perspective_builtin,
        "opencv": torch.ops.warp_perspective._warp_perspective_opencv,
    }[kind]
    g = torch.Generator().manual_seed(case["seed"])
    dtype = case["dtype"]
    image = as_view(random_values(case["shape"], dtype, g, device), case["view"], g)
    matrix = case["matrix"].to(device, torch.float64 if dtype == torch.uint8 else dtype)
    modes = case["interpolation"], case["padding_mode"]
    out = op(image, matrix, case["dsize"], *modes)
    expected, ties = warp_reference(image, matrix, case["dsize"], *modes)
    assert out.shape == expected.shape and out.dtype == dtype
    diff = (out.cpu().double() - expected.double()).abs().masked_fill(ties, 0)
    r = 255.0 if dtype == torch.uint8 else max(1.0, image.double().abs().max().item())
    opencv_default = warp_perspective.build_config()["cpu_default"] == "opencv"
    opencv = (
        (kind == "opencv" or (kind == "public" and opencv_default))
        and device == "cpu"
        and dtype != torch.float64
    )
    if case["interpolation"] == "nearest":
        # Every backend rounds the same double coordinate half to even: equal but for ties.
        assert diff.max().item() == 0 if diff.numel() else True
        return
    if opencv:  # coordinates rounded to 1/32 pixel (OpenCV < 4.11, see the package tests)
        bound = r / 32 * (1 + max(1.0, matrix.double().abs().max().item()) / 8) + 1
    else:
        bound = {torch.float64: 1e-9, torch.float32: 2e-5, torch.uint8: 1.0}[dtype] * r
    if diff.numel():
        assert diff.max().item() <= bound, (diff.max().item(), bound)
    if kind == "builtin" and dtype == torch.float64 and image.numel() <= 2000:
        # The adjoint: the gradient w.r.t. image against autograd through the reference.
        leaf = image.detach().requires_grad_()
        grad = torch.randn(out.shape, generator=g, dtype=dtype)
        torch.ops.warp_perspective.warp_perspective(leaf, matrix, case["dsize"], *modes).backward(
            grad
        )
        ref_leaf = image.detach().clone().requires_grad_()
        warp_reference(ref_leaf, matrix, case["dsize"], *modes)[0].backward(grad)
        torch.testing.assert_close(leaf.grad, ref_leaf.grad, rtol=1e-9, atol=1e-9)


def test_warp_perspective_runs_the_cpu_level_asked_for():
    """nox -s sanitize reruns this file with WARP_PERSPECTIVE_NO_AVX512 / _NO_AVX2: make
    sure the kernels it then checks are the lower ones."""
    warp_perspective = package("warp_perspective")
    level = warp_perspective.build_config()["cpu_level"]
    if os.environ.get("WARP_PERSPECTIVE_NO_AVX2") == "1":
        assert level == "portable"
    elif os.environ.get("WARP_PERSPECTIVE_NO_AVX512") == "1":
        assert level in ("avx2", "portable")
