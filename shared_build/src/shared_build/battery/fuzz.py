"""The battery's fuzzer: every tensor argument of a valid call broken one way at a time,
in a child process, each call required to raise an exception that names the argument."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from typing import Any

from . import OpTest, Sample
from .checks import _detach, _samples

# Generic ways to break a tensor argument, as Python expressions over its value v.
BREAKAGES = {
    "rank+1": "v.unsqueeze(0)",
    "rank-1": "(v.reshape(-1) if v.dim() != 1 else v.reshape(1, -1))",
    "size+1": "torch.cat([v, v.narrow(-1, 0, 1)], -1)",
    "int64": "v.long()",
    "bool": "v.bool()",
    "complex": "v.to(torch.complex64)",
    "other_float": "(v.double() if v.dtype != torch.float64 else v.float())",
    "meta": "v.to('meta')",
    "none": "None",
    "sparse_coo": "v.to_sparse()",
}

# Gaps every op has, with why: an op with no sparse kernel is refused by the dispatcher
# before any check of ours runs, in a sentence that names the op and the layout but not
# the argument.
GAPS = {r":sparse_coo$": r"Could not run '\w+::\w+' with arguments from the 'Sparse\w*' backend"}

_FUZZ_CHILD = textwrap.dedent(
    """
    import json, sys, torch
    import {package}
    op = torch.ops.{qualified}
    args, kwargs = torch.load(sys.argv[1])
    names = [a.name for a in op._schema.arguments]
    for label, arg, expression in json.loads(sys.argv[2]):
        call = dict(zip(names, args)) | kwargs
        try:  # a value torch itself refuses to build is no test of the op
            call[arg] = eval(expression, {{"torch": torch, "v": call[arg], **call}})
        except Exception as error:
            print(json.dumps({{"label": label, "type": "unbuildable"}}), flush=True)
            continue
        print("CALL", label, file=sys.stderr, flush=True)
        try:
            result = op(**call)
        except Exception as error:
            out = {{"label": label, "type": type(error).__name__, "message": str(error)}}
        else:
            out = {{"label": label, "type": None, "message": repr(result)[:200]}}
        print(json.dumps(out), flush=True)
    """
)


def fuzz_cases(op: OpTest, sample: Sample) -> list[tuple[str, str, str]]:
    """(label, argument, expression) for every generic breakage of each tensor argument of
    the sample, and the op's extra ones."""
    import torch

    names = [a.name for a in op.op._schema.arguments]
    values = dict(zip(names, sample.args, strict=False)) | sample.kwargs
    cases = []
    for arg, value in values.items():
        if isinstance(value, torch.Tensor):
            cases += [
                (f"{arg}:{label}", arg, e)
                for label, e in BREAKAGES.items()
                if (arg, label) not in op.fuzz_valid
            ]
    cases += [(f"{arg}:extra{i}", arg, e) for i, (arg, e) in enumerate(op.fuzz_extra)]
    return cases


def check_fuzz(op: OpTest, device: str, dtype: Any) -> None:
    import tempfile

    import torch

    float_dtype = torch.float32 if "float32" in op.dtypes else getattr(torch, op.dtypes[-1])
    sample = _samples(op, "cpu", float_dtype)[0]
    cases = fuzz_cases(op, sample)
    qualified = f"{op.op._schema.name.replace('::', '.')}.{op.op._overloadname}"
    with tempfile.TemporaryDirectory() as folder:
        saved = os.path.join(folder, "call.pt")
        torch.save((_detach(sample.args), sample.kwargs), saved)
        child = _FUZZ_CHILD.format(package=op.package(), qualified=qualified)
        done = subprocess.run([sys.executable, "-c", child, saved, json.dumps(cases)],
                              capture_output=True, text=True, timeout=600)  # fmt: skip
    results = {r["label"]: r for r in map(json.loads, done.stdout.splitlines())}
    problems = []
    if done.returncode != 0:
        started = [line[5:] for line in done.stderr.splitlines() if line.startswith("CALL ")]
        problems.append(
            f"the child died (status {done.returncode}) in {started[-1] if started else 'setup'}:\n{done.stderr[-2000:]}"
        )
    for label, arg, expression in cases:
        result = results.get(label)
        if result is None or result["type"] == "unbuildable":
            continue
        if any(
            re.search(k, label) and re.search(m, result["message"] or "")
            for k, m in {**GAPS, **op.fuzz_gaps}.items()
        ):
            continue
        call = f"{op.name} with {arg} = {expression}"
        if result["type"] is None:
            problems.append(f"{label}: {call} returned {result['message']} instead of raising")
        elif not re.search(rf"(?<![\w.]){re.escape(arg)}(?!\w)", result["message"]):
            problems.append(
                f"{label}: {call} raised {result['type']} not naming {arg!r}: {result['message'].splitlines()[0][:300]}"
            )
    assert not problems, f"{len(problems)} of {len(cases)} broken calls:\n" + "\n".join(problems)
