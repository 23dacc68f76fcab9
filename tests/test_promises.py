"""Every behaviour a package's README or docstrings promise for an edge input (empty, zero,
negative, NaN or inf, None, a degenerate or singular matrix, a padding mode at the border,
a default) has a test that holds the package to it.

PROMISES lists them: where each is written, a phrase of it (the promise as written), and
the tests or battery samples that check it ("path::test_name", a test function, or
"path::'text'", text of a declaration: a sample's name, a bad call's sentence).
test_each_promise_is_still_written_and_its_tests_exist fails when a phrase is no longer
in its file (reword the entry with the text) or a test it names is gone.
test_every_promise_about_an_edge_input_is_listed scans the READMEs (but their install,
benchmark, test and build sections) and the docstrings of the packages' public Python for
sentences about edge inputs (EDGE): each must hold a phrase of PROMISES, or of NOT_EDGE
with the reason it promises nothing about an input. A new promise without a test fails
there. Text only: no package is imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.once  # the files, not torch

ROOT = Path(__file__).resolve().parents[1]
ADD, GC, LLTM, WARP = (
    f"packages/{p}" for p in ("add_ext", "gc_cpp", "lltm_cpu", "warp_perspective")
)
LLTM_CUDA, COMMON = "packages/lltm_cuda", "lltm_common/tests/lltm_common"
WARP_TESTS = f"{WARP}/tests/test_warp_perspective.py"
WARP_BATTERY = f"{WARP}/tests/warp_perspective_battery.py"
GC_TESTS = f"{GC}/tests/test_gc_cpp.py"
GC_BATTERY = f"{GC}/tests/gc_cpp_battery.py"

# (where it is written, a phrase of it, the tests that check it)
PROMISES = [
    # add_ext
    (f"{ADD}/README.md", "Empty and 0-d tensors work", [f"{ADD}/tests/add_ext_battery.py::'((0,), (3, 0, 5), ())'"]),
    (f"{ADD}/README.md", "same shape (no broadcasting)", [f"{ADD}/tests/add_ext_battery.py::'same shape .* got x \\[3\\] and y \\[1\\]'"]),
    # gc_cpp
    (f"{GC}/README.md", "`graph_conv(adj, x, weight, bias=None)`", [f"{GC_BATTERY}::', no bias'"]),
    (f"{GC}/README.md", "`bias` `(F_out,)` or None", [f"{GC_BATTERY}::', no bias'", f"{GC_TESTS}::test_graph_conv_module_without_bias"]),
    (f"{GC}/src/gc_cpp/ops.py", "``bias`` ``(F_out,)`` or None", [f"{GC_BATTERY}::', no bias'"]),
    (f"{GC}/README.md", "`GraphConv(in_features, out_features, bias=True", [f"{GC_TESTS}::test_graph_conv_module_without_bias", f"{GC_TESTS}::test_graph_conv_module"]),
    (f"{GC}/README.md", "`bias` (zeros)", [f"{GC_TESTS}::test_graph_conv_module"]),
    (f"{GC}/src/gc_cpp/modules.py", "the bias at zero", [f"{GC_TESTS}::test_graph_conv_module"]),
    (f"{GC}/README.md", "a node with no positive degree gets scale 0", [f"{GC_TESTS}::test_normalize_adjacency_scale_of_a_node_whose_degree_is_not_positive"]),
    (f"{GC}/src/gc_cpp/ops.py", "a node whose degree is not positive gets scale 0 instead of inf", [f"{GC_TESTS}::test_normalize_adjacency_scale_of_a_node_whose_degree_is_not_positive", f"{GC_TESTS}::test_normalize_adjacency_gradcheck"]),
    (f"{GC}/src/gc_cpp/ops.py", "adds to a self-loop that is already there", [f"{GC_TESTS}::'an existing self-loop: A + I adds to it'"]),
    # lltm_cpu, lltm_cuda (one battery declaration, lltm_common's)
    (f"{LLTM}/README.md", "any batch and state size (zero included)", [f"{COMMON}/battery.py::'(3, 0, 4), (0, 3, 4), (40, 24, 700),\n    (3, 4, 0),'"]),
    (f"{LLTM_CUDA}/README.md", "any batch and state size (zero included)", [f"{COMMON}/battery.py::'(3, 0, 4), (0, 3, 4), (40, 24, 700),\n    (3, 4, 0),'"]),
    (f"{LLTM}/README.md", "Nothing is broadcast.", [f"{COMMON}/battery.py::'\"old_cell-broadcast\"'"]),
    (f"{LLTM}/README.md", "*, device=None, dtype=None)`", [f"{COMMON}/suite.py::test_module_factory_kwargs_and_bad_sizes"]),
    (f"{LLTM_CUDA}/README.md", "*, device=None, dtype=None)`", [f"{COMMON}/suite.py::test_module_factory_kwargs_and_bad_sizes"]),
    # warp_perspective
    (f"{WARP}/README.md", "a built-in kernel by default", [f"{WARP_TESTS}::test_default_backend_is_the_builtin_kernel"]),
    (f"{WARP}/README.md", 'dsize=None, interpolation="bilinear", padding_mode="zeros")', [f"{WARP_BATTERY}::'add(\"a warp per image\", images, mats)'"]),
    (f"{WARP}/README.md", "default the image's `(H, W)`", [f"{WARP_BATTERY}::'for dsize, modes in itertools.product(([19, 40], None), MODES)'"]),
    (f"{WARP}/src/warp_perspective/ops.py", "default the image's (H, W)", [f"{WARP_BATTERY}::'for dsize, modes in itertools.product(([19, 40], None), MODES)'"]),
    (f"{WARP}/README.md", "Must be invertible (on CUDA a singular one gives zeros, see Errors)", [f"{WARP_BATTERY}::'second of a batch'", f"{WARP_TESTS}::test_singular_or_non_finite_warp_gives_zeros_on_cuda_without_a_sync"]),
    (f"{WARP}/src/warp_perspective/ops.py", "on the CPU a singular or non-finite matrix raises; on CUDA its image comes out as zeros", [f"{WARP_BATTERY}::'second of a batch'", f"{WARP_TESTS}::test_singular_or_non_finite_warp_gives_zeros_on_cuda_without_a_sync"]),
    (f"{WARP}/README.md", "or non-finite matrix raises naming its index", [f"{WARP_BATTERY}::'second of a batch'", f"{WARP_BATTERY}::'1e-4 zoom, not singular'"]),
    (f"{WARP}/README.md", "such a matrix gives **zeros** for its image (and a zero gradient), no error", [f"{WARP_TESTS}::test_singular_or_non_finite_warp_gives_zeros_on_cuda_without_a_sync"]),
    (f"{WARP}/README.md", "Check the matrices where you make them if they can degenerate", [f"{WARP_TESTS}::test_cuda_forward_and_backward_never_synchronise"]),
    (f"{WARP}/README.md", "(rounds half to even, like OpenCV)", [f"{WARP_TESTS}::test_nearest_rounds_half_to_even_like_cv2", f"{WARP_TESTS}::test_cuda_nearest_picks_the_cpu_pixel_at_exact_ties"]),
    (f"{WARP}/README.md", '`"zeros"` (cv2 `BORDER_CONSTANT`, value 0) or `"border"` (`BORDER_REPLICATE`)', [f"{WARP_TESTS}::test_identity_and_integer_shift_are_exact"]),
    (f"{WARP}/src/warp_perspective/ops.py", '"zeros" (cv2.BORDER_CONSTANT with 0) or "border" (cv2.BORDER_REPLICATE)', [f"{WARP_TESTS}::test_identity_and_integer_shift_are_exact"]),
    (f"{WARP}/README.md", "whose homogeneous coordinate `w` is exactly 0 samples source `(0, 0)`", [f"{WARP_BATTERY}::'w = 0 on column 5'"]),
    (f"{WARP}/README.md", "so an inf or NaN pixel cannot leak into the padding", [f"{WARP_BATTERY}::'inf and NaN pixels, every tap outside'"]),
    (f"{WARP}/README.md", "pixels next to the border are recomputed from their inside taps", [f"{WARP_BATTERY}::'strong warps, dsize'", f"{WARP_TESTS}::test_cpu_levels_agree"]),
    (f"{WARP}/README.md", "the default; float64, sources over 32000 px and every backward under any backend", [f"{WARP_TESTS}::test_opencv_backend_hands_what_it_cannot_take_to_the_builtin_kernel", f"{WARP_TESTS}::test_backend_per_call"]),
    (f"{WARP}/README.md", 'or by default in a `WARP_PERSPECTIVE_OPENCV=1` build', [f"{WARP_TESTS}::test_backend_reports_the_build", f"{WARP_TESTS}::test_backend_per_call"]),
    (f"{WARP}/src/warp_perspective/ops.py", "None (default) takes the build's default", [f"{WARP_TESTS}::test_default_backend_is_the_builtin_kernel"]),
    (f"{WARP}/src/warp_perspective/ops.py", "float64 and sources over 32000 px still take the built-in kernel", [f"{WARP_TESTS}::test_opencv_backend_hands_what_it_cannot_take_to_the_builtin_kernel"]),
    (f"{WARP}/src/warp_perspective/ops.py", "CUDA tensors take None.", [f"{WARP_TESTS}::test_cuda_tensors_take_the_cuda_kernel_whatever_the_backend_says_is_cpu_only"]),
]  # fmt: skip

# Sentences the scan flags that promise nothing about an edge input, with why.
NOT_EDGE = {
    "On the machine below (2 cores shared with another job": "a measurement of the portable loops' speed",
    "The AVX2 and AVX-512 builds are unchanged by the portable one": "how the table kernels are built; their border pixels are the promise listed above",
    "shown to every user by default": "a warning torch raises on TorchScript, not the op's behaviour",
    "`cv2.warpPerspective` as a PyTorch custom op: batched, differentiable": "the package's one-line summary; its default backend is listed",
}  # fmt: skip

EDGE = re.compile(
    r"\b(empty|zeros?|0-d|negative|NaN|inf|infinite|non-finite|degenerate|singular|"
    r"invertible|border|padding|None|not positive|no positive|half to even|exactly 0|"
    r"self-loops?|outside|broadcast\w*|default|one pixel)\b",
    re.IGNORECASE,
)
# README sections that describe the build, the tests or measurements, not the ops.
NOT_CONTRACT = ("Install", "Benchmark", "Tests", "How it is built", "On a GPU")
NOT_CONTRACT_PREFIX = ("Per-call cost", "Accuracy against cv2")


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _contract_text(path: Path) -> str:
    """A README without its build, test and measurement sections and code blocks, or the
    docstrings of a module's public functions and classes."""
    text = path.read_text()
    if path.suffix == ".py":
        tree = ast.parse(text)
        return "\n".join(
            ast.get_docstring(node) or ""
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")
        )
    head, *sections = re.split(r"\n#{2,3} ", text)
    kept = [head] + [
        s for s in sections
        if s.split("\n", 1)[0].strip() not in NOT_CONTRACT
        and not s.startswith(NOT_CONTRACT_PREFIX)
    ]  # fmt: skip
    return re.sub(r"```.*?```", "", "\n".join(kept), flags=re.S)


def _sentences(text: str) -> list[str]:
    """Sentences, list items and table cells."""
    parts = re.split(r"(?<=[.;:])\s+(?=[A-Z`(\"*])|\n\s*-\s+|\s\|\s|\n\|", text)
    return [_flat(p).strip() for p in parts if p.strip()]


def _documents() -> list[Path]:
    readmes = sorted(ROOT.glob("packages/*/README.md"))
    modules = [
        p
        for p in sorted(ROOT.glob("packages/*/src/*/*.py"))
        + sorted(ROOT.glob("lltm_common/python/*.py"))
        if not p.name.startswith("_")
    ]
    return readmes + modules


def _exists(locator: str) -> bool:
    path, _, what = locator.partition("::")
    text = (ROOT / path).read_text()
    if what.startswith("'"):
        return what.strip("'") in text
    return re.search(rf"^def {re.escape(what)}\(", text, re.M) is not None


@pytest.mark.parametrize(("where", "says", "tests"), PROMISES, ids=lambda v: str(v)[:60])
def test_each_promise_is_still_written_and_its_tests_exist(where, says, tests):
    assert _flat(says) in _flat((ROOT / where).read_text()), (
        f"{where} no longer says {says!r}: update PROMISES with what it says now"
    )
    assert tests, f"{where}: {says!r} has no test"
    missing = [t for t in tests if not _exists(t)]
    assert not missing, f"{where}: {says!r}: these tests are gone: {missing}"


def test_every_promise_about_an_edge_input_is_listed():
    listed = [_flat(says) for _, says, _ in PROMISES] + [_flat(s) for s in NOT_EDGE]
    unlisted = []
    for path in _documents():
        for sentence in _sentences(_contract_text(path)):
            if EDGE.search(sentence) and not any(phrase in sentence for phrase in listed):
                unlisted.append(f"{path.relative_to(ROOT)}: {sentence[:200]}")
    assert not unlisted, (
        "promises about edge inputs without a test: add each to PROMISES with the tests "
        "that check it (or to NOT_EDGE with why it promises nothing):\n" + "\n".join(unlisted)
    )


def test_the_scan_finds_a_promise_when_one_is_written(tmp_path):
    """The scan itself: a new sentence about an edge input, in a README's contract or a
    docstring, is flagged; the same in its benchmark section is not."""
    readme = tmp_path / "README.md"
    readme.write_text(
        "# pkg\n\n## Contract\n\n- A NaN input gives NaN. Shapes must match.\n\n"
        "## Benchmark\n\nAn empty run took 3 s.\n"
    )
    flagged = [s for s in _sentences(_contract_text(readme)) if EDGE.search(s)]
    assert flagged == ["A NaN input gives NaN."]
    module = tmp_path / "ops.py"
    module.write_text('def f(x):\n    """Return x; empty x gives an empty result."""\n')
    assert [s for s in _sentences(_contract_text(module)) if EDGE.search(s)] == [
        "Return x; empty x gives an empty result."
    ]
