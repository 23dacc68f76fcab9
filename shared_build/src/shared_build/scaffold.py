"""``python -m shared_build new NAME``: a working op package in every slot of the layout.

The templates hold one small op, ``mul_add(x, y, z) = x * y + z``, in every slot (see the
README): templates/op for the full ABI, templates/op_stable for the stable one."""

from __future__ import annotations

import importlib.util
import keyword
from pathlib import Path

from .errors import BuildError

_TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATES = {"full": _TEMPLATES_DIR / "op", "stable": _TEMPLATES_DIR / "op_stable"}
COMMON = _TEMPLATES_DIR / "common"  # written for either ABI: the op's declaration for the battery

RESERVED = {
    "shared_build": "this tool's own name: installing a package of that name would replace it",
    "torch": "torch's own name: pip cannot install a package of that name beside torch",
}

# torch's own op namespaces, known without importing torch: a package's op namespace is its
# name, and torch refuses a second TORCH_LIBRARY of one.
TORCH_NAMESPACES = frozenset(
    {"aten", "prim", "prims", "quantized", "sparse", "profiler", "inductor", "c10d", "mkldnn"}
)


def torch_namespaces() -> frozenset[str]:
    """TORCH_NAMESPACES, and every namespace torch registers when torch is importable."""
    if importlib.util.find_spec("torch") is None:
        return TORCH_NAMESPACES
    import torch

    names = {op.split("::")[0] for op in torch._C._dispatch_get_all_op_names()}
    return TORCH_NAMESPACES | names


def check_name(name: str, packages_dir: Path) -> None:
    """Refuse, with a sentence, a name that is not a fresh, lower-case Python identifier, or
    that is taken: by a folder, by a module Python imports already, or by torch."""
    if keyword.iskeyword(name) or not name.isidentifier():
        what = "a Python keyword" if keyword.iskeyword(name) else "not a Python identifier"
        raise BuildError(
            f"{name!r} is {what}; a package name is also its import name and its op namespace, "
            "e.g. my_op"
        )
    if name != name.lower():
        raise BuildError(f"{name!r} has capitals; use lower case, e.g. {name.lower()}")
    if name.startswith("_") or name.endswith("_"):  # PEP 508: a project name cannot
        raise BuildError(
            f"{name!r} starts or ends with an underscore, which a project name cannot (PEP "
            f"508); e.g. {name.strip('_') or 'my_op'}"
        )
    if (packages_dir / name).exists():
        raise BuildError(f"{packages_dir / name} exists already; choose another name")
    if name in RESERVED:
        raise BuildError(f"{name!r} is {RESERVED[name]}; choose another name")
    if (spec := importlib.util.find_spec(name)) is not None:
        where = spec.origin if spec.origin not in (None, "built-in", "frozen") else "built in"
        raise BuildError(
            f"{name!r} is the name of a module Python imports here already ({where}): a "
            "package of that name would shadow it or be shadowed by it; choose another name"
        )
    if name in torch_namespaces():
        raise BuildError(
            f"{name!r} is an op namespace of torch itself (torch.ops.{name}), and a package's "
            "op namespace is its name; choose another name"
        )


def render(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def new_package(name: str, packages_dir: Path, *, cuda: bool = False, abi: str = "full") -> Path:
    """Write packages_dir/name from the templates; return its folder."""
    if abi not in TEMPLATES:
        raise BuildError(f"--abi {abi!r} is not known; use full or stable")
    check_name(name, packages_dir)
    values = {
        "name": name,
        "cuda": "optional" if cuda else "none",
        "cuda_flag": " --cuda" if cuda else "",
        # A package without a CUDA kernel has no CUDA tests: on a GPU machine they would
        # fail (no kernel for the CUDA key), and here they would only skip.
        "battery_devices": '("cpu", "cuda")' if cuda else '("cpu",)',
    }
    target = packages_dir / name
    every = [(folder, t) for folder in (TEMPLATES[abi], COMMON) for t in folder.rglob("*.tmpl")]
    for folder, template in sorted(every, key=lambda pair: pair[1].relative_to(pair[0])):
        relative = template.relative_to(folder)
        if not cuda and "cuda" in relative.parts[:-1]:
            continue
        out = target / Path(*(part.replace("NAME", name) for part in relative.parts))
        out = out.with_name(out.name.removesuffix(".tmpl"))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render(template.read_text(encoding="utf-8"), values), encoding="utf-8")
    return target
