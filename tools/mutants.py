"""Mutation testing: how many one-line bugs in a package's kernels and Python wrappers its own
tests catch (issue 59, goal 5). universalmutator's rules, with tools/mutants.rules (rounding
modes), give the mutants; a seeded sample, stratified over files and mutation kinds, is built and
tested one at a time by `nox -s dev -- <package> -x -q`, each file restored byte for byte.

    python3 tools/mutants.py --package add_ext --count 40 --seed 0   # nox -s mutants -- add_ext
    python3 tools/mutants.py --all                                    # CUDA-only packages last

Verdicts: killed, timeout (counted as killed), survived, stillborn (does not build: outside the
rate), needs a GPU (.cu code, or a survivor of a CUDA-only package, on a machine without one).
Results: benchmarks/results/mutants/<date>-<commit>/; the same command resumes a stopped run.
It edits the checkout's sources: build nothing else from the same checkout while it runs (a
wheel built meanwhile, e.g. by `nox -s tests`, would carry the mutant into .nox/wheelhouse);
give it its own `git worktree`.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULES = Path(__file__).with_name("mutants.rules")
LANGUAGES = {".py": ["python"], ".cpp": ["c_like", "cpp"], ".h": ["c_like", "cpp"],
             ".cu": ["c_like", "cpp"], ".cuh": ["c_like", "cpp"]}  # fmt: skip
# Preprocessor plumbing is not mutated (the library skips #include only).
IGNORE = [r"^\s*#\s*(pragma|include|if|ifdef|ifndef|endif|else|elif)\b"]
# A mutant's kind, from its rule ("lhs ==> rhs"): the first pattern the rule matches.
KINDS = [("swap", r"\\1\\3,\\2\\4|\\1\\4=\\3"),
         ("off-by-one", r"\\2[+-]1|^(< ==> <=|<= ==> <|\(\[\^-\]\)> ==> \\1>=|>= ==> >)$"),
         ("constant", r"\\d\+|^True ==>"), ("compare", r"^(==|!=|<=|>=|<|\(\[\^-\]\)>) ==>"),
         ("condition", r"&&|\\\|\\\||^! ==>|\b(and|or|not|if|while)\b|0==1|1==1"),
         ("statement", r"break|continue|pass|return None|/\*|^else"),
         ("operator", r"^(\\\+|-|\\\*|\(\[\^\\\*/\]\)/|%|/|\(\[\^[&|]\]\))"),
         ("call", r"min|max|begin|end|_of\b|^at|inserter|element|accumulate|inner_product"),
         ("value", r"")]  # fmt: skip
STRING = re.compile(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'")
TOKEN = re.compile(r"\d[\w.]*|[A-Za-z_]\w*|\S")
NUMBER = re.compile(r"(0[xX][\da-fA-F]+|(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)[fFuUlLjJ]*")
OPERATORS = {"++", "--", "//", "**", "==", "!=", "<=", ">=", "<<", ">>", "+=", "-=", "*=", "/=",
             "%=", "=+", "=-", "->", "/*", "*/", "<<=", ">>="}  # fmt: skip
CALLS = {"min", "max", "begin", "end", "min_element", "max_element"}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=True).stdout.decode()


def config(package: str) -> dict:
    text = (ROOT / "packages" / package / "pyproject.toml").read_text()
    return tomllib.loads(text).get("tool", {}).get("shared_build", {})


def sources(package: str) -> list[Path]:
    """The tracked kernel and wrapper sources of a package, and of its common folder."""
    roots = [ROOT / "packages" / package / "csrc", ROOT / "packages" / package / "src"]
    if common := config(package).get("common"):
        roots += [ROOT / "packages" / package / common / d for d in ("csrc", "python")]
    listed = git("ls-files", "--", *map(str, roots)).split()
    return [ROOT / f for f in listed if Path(f).suffix in LANGUAGES]


def garbled(old: str, new: str) -> bool:
    """Whether a mutant cannot compile, and would only cost a build: it splits a name or a
    number (int64_t -> int(64-1)_t, empty_symint -> empty_symaxt), makes a template bracket or
    a declarator an operator (static_cast<T> -> static_cast>=T>, T* x -> T/ x: our binary
    operators are spaced, by clang-format and ruff), or unbalances brackets or operators."""
    p, ops, before = len(os.path.commonprefix([old, new])), r"[-+*/%=!<>]{2,}", TOKEN.findall(old)  # noqa: RUF071
    fresh = set(TOKEN.findall(new)) - set(before)
    names = [t for t in fresh if t[0].isalpha() or t[0] == "_"]
    bare = {re.sub(r"\d", "", t) for t in before if t[0].isalpha() or t[0] == "_"}
    checks = [
        re.match(r"\S[<>]", old[max(p - 2, 0) : p]) or re.match(r"\S[<>*&]", old[p - 1 : p + 1]),
        any(
            old.count(a) - old.count(b) != new.count(a) - new.count(b)
            for a, b in ("()", "[]", "{}")
        ),
        set(re.findall(ops, new)) - set(re.findall(ops, old)) - OPERATORS,
        any(t[0].isdigit() and not NUMBER.fullmatch(t) for t in fresh),
        any(re.sub(r"\d", "", t) in bare or any(t in b for b in before) for t in names),
        any(re.search("min|max|begin|end", t) and t not in CALLS for t in names),
        re.search(r"[\w.]\(\d+[+-]1\)|\(\d+[+-]1\)[\w.]", new),
    ]
    return any(checks)


def in_loop(lines: list[str], number: int) -> bool:
    """Whether the block around a line is a loop's (its opener: the nearest line indented less)."""
    depth = len(lines[number - 1]) - len(lines[number - 1].lstrip())
    for line in reversed(lines[: number - 1]):
        if line.strip() and len(line) - len(line.lstrip()) < depth:
            return re.match(r"\s*(for|while|do)\b", line) is not None
    return False


def python_shape(text: str) -> str:
    """The AST without docstrings or pass, strings emptied; SyntaxError if it cannot compile."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a SyntaxWarning is for the tests to find
        compile(text, "<mutant>", "exec")
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
        for field in ("body", "orelse", "finalbody"):  # a docstring or a pass does nothing
            if isinstance(body := getattr(node, field, None), list):
                setattr(node, field, [s for s in body if not isinstance(s, ast.Pass) and not (
                    isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))])  # fmt: skip
    return ast.dump(tree)


def skip(lines: list[str], number: int, new: str, rule: str, shape: str | None) -> bool:
    """Whether a mutant touches a string (strings are not mutated: the library's default) or
    changes only spacing, or cannot compile (a break outside a loop, half a statement gone)."""
    old, jump = lines[number - 1].rstrip("\n"), re.search(r"break;|continue;", rule)
    p = len(os.path.commonprefix([old, new]))  # noqa: RUF071 (characters, not paths)
    q = len(os.path.commonprefix([old[p:][::-1], new[p:][::-1]]))  # noqa: RUF071
    spans = [m.span() for m in STRING.finditer(old)]
    in_string = any(a < max(len(old) - q, p + 1) and p < b for a, b in spans)
    if in_string or re.search("[\"']", new[p : len(new) - q]):
        return True
    if "".join(old.split()) == "".join(new.split()) or garbled(old, new):
        return True
    if ("/*" in rule or jump) and not old.endswith(";"):
        return True
    if shape is None:
        return bool(jump) and not in_loop(lines, number)
    try:
        return python_shape("".join([*lines[: number - 1], new + "\n", *lines[number:]])) == shape
    except SyntaxError:  # the library drops these too
        return True


def candidates(path: Path) -> list[dict]:
    """Every mutant of a file that is worth a build, with its kind."""
    from universalmutator import mutator

    lines = path.read_text().splitlines(keepends=True)
    shape = python_shape("".join(lines)) if path.suffix == ".py" else None
    rules = ["universal", *LANGUAGES[path.suffix], str(RULES)]
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):  # it prints as it goes
        found = mutator.mutants_regexp(lines, rules, ignorePatterns=IGNORE, ignoreStringOnly=True)
    out = []
    for number, text, (rule, origin), _ in found:
        new = text.rstrip("\n")
        if not skip(lines, number, new, rule, shape):
            kinds = [k for k, pattern in KINDS if re.search(pattern, rule.strip())]
            kind = "rounding" if origin.startswith(str(RULES)) else kinds[0]
            old, file = lines[number - 1].rstrip("\n"), str(path.relative_to(ROOT))
            out.append(dict(file=file, line=number, original=old, mutated=new, kind=kind))
    return out


def sample(found: list[dict], count: int, seed: int) -> list[dict]:
    """count mutants: each file's share in proportion to its mutants (systematic sampling from
    a random start), and within a file the kinds in turn, so that no kind crowds out another."""
    rng, keyed, groups = random.Random(seed), [], {}
    for m in found:
        groups.setdefault(m["file"], {}).setdefault(m["kind"], []).append(m)
    for file, kinds in sorted(groups.items()):
        queues = [rng.sample(group, len(group)) for _, group in sorted(kinds.items())]
        rng.shuffle(queues)
        order = []
        while any(queues):
            order += [q.pop() for q in queues if q]
        start = rng.random()
        keyed += [((i + start) / len(order), file, i, m) for i, m in enumerate(order)]
    return [m for *_, m in sorted(keyed, key=lambda k: k[:3])[:count]]


@contextlib.contextmanager
def applied(mutant: dict):
    """The source tree with this mutant in it (on its line, or on the one line that reads as
    its line did, if lines moved); the file's exact bytes back on the way out."""
    path = ROOT / mutant["file"]
    original = path.read_bytes()
    lines = original.decode().splitlines(keepends=True)
    same = [i for i, line in enumerate(lines) if line.rstrip("\r\n") == mutant["original"]]
    if mutant["line"] - 1 not in same and len(same) != 1:
        raise RuntimeError(f"{mutant['file']}:{mutant['line']} changed since it was sampled")
    number = mutant["line"] - 1 if mutant["line"] - 1 in same else same[0]
    lines[number] = mutant["mutated"] + lines[number][len(mutant["original"]) :]
    try:
        path.write_text("".join(lines))
        yield
    finally:
        path.write_bytes(original)


PYTEST_STARTED = re.compile(r"nox > (\S+ -m )?pytest ")  # nox's line as it starts the tests


def measure(command: list[str], test_limit: float, build_limit: float = 1800) -> tuple[str, str]:
    """One `nox -s dev`: (verdict, the first failure or the last line). test_limit's clock
    starts when nox starts pytest; a build that fails never gets there (stillborn)."""
    with tempfile.NamedTemporaryFile("w") as log:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        begin, started, timeout = time.monotonic(), 0.0, False
        try:
            while proc.poll() is None and not timeout:
                time.sleep(0.5)
                if not started and PYTEST_STARTED.search(Path(log.name).read_text()):
                    started = time.monotonic()
                limit = test_limit if started else build_limit
                timeout = time.monotonic() - (started or begin) > limit
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        text = Path(log.name).read_text()
    # A run that ends between two polls (or before its output is flushed) is judged on its log.
    started = started or bool(PYTEST_STARTED.search(text))
    failed = re.search(r"^(FAILED|ERROR) .*", text, re.M)
    why = (failed.group(0) if failed else (text.strip().splitlines() or [""])[-1])[:300]
    if timeout or proc.returncode == 0:
        return ("timeout", why) if timeout else ("survived", "")
    return ("killed" if started else "stillborn"), why


def run_package(package: str, args: argparse.Namespace, results: dict, save) -> None:
    cuda_only, gpu = config(package).get("cuda") == "required", bool(shutil.which("nvidia-smi"))
    matrix = (ROOT / "requirements" / "torch-matrix.txt").read_text()
    torch = ["--torch", re.search(r"^torch==(\S+).*#.*CUDA", matrix, re.M)[1]] if cuda_only else []
    nox = [args.nox_python, "-m", "nox", "-s", "dev", "--", package, *torch, "-x", "-q"]
    entry = results.setdefault(package, {"seed": args.seed, "mutants": []})
    if "baseline_s" not in entry:  # the unmutated suite must pass; its time sets the limit
        start, (verdict, why) = time.monotonic(), measure(nox, 7200)
        if verdict != "survived":
            sys.exit(f"{package}: the unmutated tests do not pass ({verdict}: {why})")
        entry["baseline_s"] = round(time.monotonic() - start, 1)
    found = [m for path in sources(package) for m in candidates(path)]
    entry["candidates"] = len(found)
    done = {(m["file"], m["line"], m["mutated"]) for m in entry["mutants"]}
    chosen = sample(found, args.count, args.seed)
    if args.replay:  # the mutants of an earlier run (those with the verdicts in --only)
        earlier = json.loads(args.replay.read_text())[package]["mutants"]
        keys = ("file", "line", "original", "mutated", "kind")
        wanted = [m for m in earlier if not args.only or m["verdict"] in args.only]
        chosen = [{k: m[k] for k in keys} for m in wanted]
    for number, mutant in enumerate(chosen, 1):
        if (mutant["file"], mutant["line"], mutant["mutated"]) in done:
            continue
        start, verdict, why = time.monotonic(), "needs a GPU", "not run: CUDA code, no GPU here"
        if gpu or Path(mutant["file"]).suffix not in (".cu", ".cuh"):
            with applied(mutant):
                verdict, why = measure(nox, 3 * entry["baseline_s"])
            if verdict == "survived" and cuda_only and not gpu:
                verdict, why = "needs a GPU", "survived the tests that run without a GPU"
        mutant.update(verdict=verdict, why=why, seconds=round(time.monotonic() - start, 1))
        entry["mutants"].append(mutant)
        save()
        where = f"{mutant['file']}:{mutant['line']}: {mutant['mutated'].strip()}"
        print(f"[{package} {number}/{len(chosen)}] {verdict} in {mutant['seconds']:.0f} s  {where}")


def report(results: dict, commit: str) -> str:
    """The kill rate per package and every survivor, in markdown."""
    verdicts = ("killed", "timeout", "survived", "stillborn", "needs a GPU")
    lines = [f"# Mutation testing at {commit}", "",
             "Kill rate: (killed + timeout) / (killed + timeout + survived); stillborn mutants (they "
             "do not build) and those that need a GPU are outside it. Rerun: `nox -s mutants -- --all`.",
             "", f"| package | sampled | {' | '.join(verdicts)} | kill rate | s per mutant run |",
             "|---" * 9 + "|"]  # fmt: skip
    survivors = ["", "## Survivors", ""]
    for package, entry in results.items():
        n = {v: sum(m["verdict"] == v for m in entry["mutants"]) for v in verdicts}
        dead = n["killed"] + n["timeout"]
        ran = [m["seconds"] for m in entry["mutants"] if m["seconds"]]
        rate = f"{100 * dead / (dead + n['survived']):.0f} %" if dead + n["survived"] else "n/a"
        counts = " | ".join(map(str, n.values()))
        mean = f"{sum(ran) / len(ran):.0f}" if ran else "-"
        lines.append(f"| {package} | {len(entry['mutants'])} | {counts} | {rate} | {mean} |")
        survivors += [f"- {package} `{m['file']}:{m['line']}` ({m['kind']}): `{m['original'].strip()}` -> "
                      f"`{m['mutated'].strip()}`" for m in entry["mutants"] if m["verdict"] == "survived"]  # fmt: skip
    return "\n".join(lines + survivors) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="packages (or --package, or --all)")
    parser.add_argument("--package", action="append", default=[])
    parser.add_argument("--all", action="store_true", help="every package, CUDA-only last")
    parser.add_argument("--count", type=int, default=40, help="mutants sampled per package")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nox-python", default="python3", help="the Python that has nox")
    parser.add_argument("--replay", type=Path, help="run the mutants of this mutants.json again")
    parser.add_argument("--only", action="append", help="with --replay: those with this verdict")
    args = parser.parse_args()
    names = args.package + args.names
    if args.all:
        found = [p.parent.name for p in (ROOT / "packages").glob("*/pyproject.toml")]
        names = sorted(found, key=lambda n: (config(n).get("cuda") == "required", n))
    if not names:
        parser.error("name a package, or --all")
    if dirty := git("status", "--porcelain", "--", *(str(p) for n in names for p in sources(n))):
        sys.exit(f"sources differ from HEAD (a mutant left by a killed run?):\n{dirty}")
    # The commit measured: the last one that changed more than these results (committing
    # part of a run's results does not start another run).
    base = ROOT / "benchmarks" / "results" / "mutants"
    commit = git("log", "-1", "--format=%h", "--", ".", f":!{base.relative_to(ROOT)}").strip()
    out = max(base.glob(f"*-{commit}"), default=base / f"{time.strftime('%Y-%m-%d')}-{commit}")
    out.mkdir(parents=True, exist_ok=True)
    store, marker = out / "mutants.json", "<!-- analysis by hand below: kept when rewritten -->"
    results = json.loads(store.read_text()) if store.exists() else {}

    def save() -> None:
        store.write_text(json.dumps(results, indent=1) + "\n")
        old = (out / "report.md").read_text() if (out / "report.md").exists() else ""
        by_hand = old.partition(marker)[2]
        (out / "report.md").write_text(f"{report(results, commit)}\n{marker}{by_hand}")

    # SIGTERM and SIGHUP unwind like Ctrl-C, through the restore of the mutated file.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _: sys.exit(128 + signum))
    for package in names:
        run_package(package, args, results, save)
    print(f"results: {out.relative_to(ROOT)}/report.md")


if __name__ == "__main__":
    main()
