"""Recipe conformance: every hyper-parameter a paper spec or a method default takes from a
paper, checked against the paper's value and where the paper writes it.

``sweeps/conformance.toml`` lists them, one ``[[check]]`` each: which runs of which spec (or a
method's default), the parameter, the paper's value, its source (table, section, equation) and,
where the harness differs on purpose, the reason. ``check`` fails on any difference that has no
reason, and on a reason whose difference is gone; ``bench conformance`` renders the table into
``docs/recipes.md``.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.store.atomic import write_atomic

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "sweeps" / "conformance.toml"
PAGE = ROOT / "docs" / "recipes.md"


@dataclass(frozen=True)
class Check:
    spec: str  # a sweeps/<spec>.toml stem, or "defaults" (the method's own default)
    method: str
    param: str
    paper: Any
    source: str
    task: str = ""
    when: dict = field(default_factory=dict)  # only runs whose parameters have these values
    deviation: str = ""  # why the harness differs on purpose; "" = it must not


@dataclass(frozen=True)
class Row:
    check: Check
    ours: list  # the value in every selected run (one for a default)
    problem: str  # "" when the check holds


def load(path: Path = TABLE) -> list[Check]:
    try:
        return [Check(**c) for c in tomllib.loads(path.read_text())["check"]]
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError) as e:
        raise BenchError(f"{path}: not a readable conformance table ({e})") from e


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    return a == b


def _values(c: Check, root: Path = ROOT) -> list:
    from bench.registry import METHODS
    from bench.spec.sweep import load_spec, runs

    if c.spec == "defaults":
        fields = {f.name: f.default for f in dataclasses.fields(METHODS.get(c.method).Params)}
        if c.param not in fields:
            raise BenchError(f"conformance: method '{c.method}' has no parameter '{c.param}'")
        return [fields[c.param]]
    out = []
    for r in runs(load_spec(root / "sweeps" / f"{c.spec}.toml"), check_backbones=False):
        if r.method != c.method or (c.task and r.task != c.task):
            continue
        if all(_same(getattr(r.params, k), v) for k, v in c.when.items()):
            out.append(getattr(r.params, c.param))
    return out


def check(checks: list[Check], root: Path = ROOT) -> list[Row]:
    rows = []
    for c in checks:
        ours = _values(c, root)
        differs = [v for v in ours if not _same(v, c.paper)]
        if not ours:
            problem = "no run of the spec matches"
        elif differs and not c.deviation:
            problem = f"{c.param} = {differs[0]!r}, the paper has {c.paper!r}, and no reason is declared"
        elif c.deviation and not differs:
            problem = "a deviation is declared but the value is the paper's"
        else:
            problem = ""
        rows.append(Row(c, sorted(set(ours), key=str), problem))
    return rows


def markdown(rows: list[Row]) -> str:
    out = ["# Recipes as published", "",
           "Every hyper-parameter that a paper spec (`sweeps/paper_*.toml`) or a method default takes from a paper, "
           "with the paper's value and where it is written. Generated from `sweeps/conformance.toml` by "
           "`bench conformance`; a test fails on any difference without a declared reason.", "",
           "| spec | method | runs | parameter | paper | ours | source | deliberate difference |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r.check
        sel = ", ".join([c.task] if c.task else []) + "".join(f" {k}={v}" for k, v in c.when.items())
        ours = ", ".join(map(str, r.ours))
        out.append(f"| {c.spec} | {c.method} | {sel.strip() or 'all'} | `{c.param}` | {c.paper} | {ours} | {c.source} | "
                   f"{c.deviation} |")
    return "\n".join(out) + "\n"


def write(root: Path = ROOT) -> list[Row]:
    """Render the table into ``root``'s docs/recipes.md (``bench conformance``, ``bench publish``);
    returns the failing rows, each said on stderr."""
    rows = check(load(root / "sweeps" / "conformance.toml"), root)
    write_atomic(root / "docs" / "recipes.md", markdown(rows))
    bad = [r for r in rows if r.problem]
    for r in bad:
        print(f"conformance: {r.check.spec} {r.check.method} {r.check.param}: {r.problem}", file=sys.stderr)
    return bad
