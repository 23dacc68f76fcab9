"""``python -m shared_build new NAME``: a working op package in every slot of the layout.

The templates hold one small elementwise op, ``mul_add(x, y, z) = x * y + z``, with its
schema, argument checks written once, a CPU kernel, optionally a CUDA kernel, a Python
wrapper with autograd, tests against a plain-PyTorch reference and a benchmark against eager
PyTorch. templates/op is the full ABI (checks in C++, serving the real and the Meta kernel;
the wheel is for the torch it was built against); templates/op_stable is LibTorch's stable
ABI (``--abi stable``: checks, fake kernel and autograd in Python, one abi3 wheel for
every torch from the target release on, a CUDA kernel in a second library).
"""

from __future__ import annotations

import keyword
from pathlib import Path

from .errors import BuildError

TEMPLATES = {
    "full": Path(__file__).resolve().parent / "templates" / "op",
    "stable": Path(__file__).resolve().parent / "templates" / "op_stable",
}
ABIS = tuple(TEMPLATES)


def check_name(name: str, packages_dir: Path) -> None:
    """Refuse, with a sentence, a name that is not a fresh Python identifier."""
    if not name.isidentifier() or keyword.iskeyword(name):
        raise BuildError(
            f"{name!r} is not a Python identifier; a package name is also its import name and "
            "its op namespace, e.g. my_op"
        )
    if name != name.lower():
        raise BuildError(f"{name!r} has capitals; use lower case, e.g. {name.lower()}")
    if (packages_dir / name).exists():
        raise BuildError(f"{packages_dir / name} exists already; choose another name")


def render(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def new_package(name: str, packages_dir: Path, *, cuda: bool = False, abi: str = "full") -> Path:
    """Write packages_dir/name from the templates; return its folder."""
    if abi not in ABIS:
        raise BuildError(f"--abi {abi!r} is not known; use full or stable")
    check_name(name, packages_dir)
    from .setup_helpers import STABLE_TARGET

    values = {
        "name": name,
        "cuda": "optional" if cuda else "none",
        "cuda_flag": " --cuda" if cuda else "",
        # A package without a CUDA kernel has no CUDA tests: on a GPU machine they would
        # fail (no kernel for the CUDA key), and here they would only skip.
        "devices": (
            '["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]'
            if cuda
            else '["cpu"]  # `shared_build new NAME --cuda` adds a CUDA kernel and its tests'
        ),
        "stable_target": STABLE_TARGET,
        "stable_build_torch": f"{STABLE_TARGET}.0",
    }
    templates = TEMPLATES[abi]
    target = packages_dir / name
    written = []
    for template in sorted(templates.rglob("*.tmpl")):
        relative = template.relative_to(templates)
        if not cuda and "cuda" in relative.parts[:-1]:
            continue
        out = target / Path(*(part.replace("NAME", name) for part in relative.parts))
        out = out.with_name(out.name.removesuffix(".tmpl"))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render(template.read_text(encoding="utf-8"), values), encoding="utf-8")
        written.append(out)
    return target
