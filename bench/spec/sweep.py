"""Sweeps: a paper table's whole grid from one TOML file, planned as a graph of jobs.

A spec names groups of runs (methods x params x sparsities x tasks x suites x seeds, each key
a value or a list) and, optionally, published reference numbers. ``plan`` expands it into
jobs: one ``build`` per distinct candidate (its lineage: method, params, task, backbone, seed,
sparsity) and one ``evaluate`` per record (a candidate judged by a suite). A build depends on
the candidates its method declares in ``Method.requires`` (fine-tune once, prune many times);
an evaluation depends on its candidate and on the full standard-CE model's record its F_bias
is measured against. Everything is validated, cycles included, before anything runs.

Spec format (``sweeps/smoke.toml`` is a complete example)::

    description = "..."
    [defaults]                      # any run key; a group's own keys win
    seed = [0, 1, 2]
    [defaults.sst2]                 # a task's own run keys, where they differ
    max_examples = 1000
    [estimate]                      # assumed throughput for --dry-run (examples/s)
    train_per_s = 10.0
    eval_per_s = 45.0
    [estimate.mnli]                 # a task's own rates, where they differ
    train_per_s = 6.0
    [[group]]
    method = "srnet"                # or a list
    suite = ["ood"]
    task = "nli_synth"
    sparsity = [0.5, 0.7]
    params = { loss = ["ce", "poe"], epochs = 1 }   # a list is a grid axis
    suite_params = { n = 20 }
    [[reference]]                   # published numbers, shown as labelled leaderboard rows
    source = "Liu et al. 2022, Table 1"
    ...
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.registry import METHODS, SUITES, TASKS, did_you_mean
from bench.spec.params import convert
from bench.spec.run import DEFAULTS, FIELD_NAMES, FIELDS, RunSpec, as_list, check_field, grid, param_values
from bench.store.references import Reference

RUN_KEYS = FIELD_NAMES
SPEC_KEYS = ("description", "defaults", "estimate", "group", "reference")
REFERENCE_KEYS = ("source", "task", "suite", "backbone", "label", "sparsity", "metrics", "note")


@dataclass(frozen=True)
class Throughput:
    """Examples per second assumed for estimates (defaults: MiniLM on 2 CPU cores, length 128).
    ``tasks`` overrides them per task: one rate for a whole spec was off by 1.7x on MNLI's long
    pairs and 2x on the short synthetic ones at the same ``max_length``."""

    train_per_s: float = 10.0
    eval_per_s: float = 45.0
    tasks: dict[str, Throughput] = field(default_factory=dict, hash=False)
    source: str = ""  # where the rates come from ("measured on ...", docs/performance.md)

    def of(self, task: str) -> Throughput:
        """The rates of ``task``'s own jobs (work that is not the task's keeps the spec's)."""
        return self.tasks.get(task, self)

    def describe(self, tasks: set[str]) -> str:
        """The rates a plan of these tasks assumes."""
        rate = f"{self.train_per_s:g} training / {self.eval_per_s:g} evaluation examples per second"
        rate += "".join(f"; {t}: {r.train_per_s:g} / {r.eval_per_s:g}" for t, r in self.tasks.items() if t in tasks)
        return rate + (f" ({self.source})" if self.source else "")


@dataclass
class SweepSpec:
    path: Path
    description: str
    groups: list[dict]
    throughput: Throughput = field(default_factory=Throughput)
    references: list[Reference] = field(default_factory=list)


def _fail(path: Path, msg: str) -> BenchError:
    return BenchError(f"sweep spec {path}: {msg}")


def _keys(path: Path, where: str, got: dict, allowed: tuple[str, ...]) -> None:
    for k in got:
        if k not in allowed:
            raise _fail(path, f"unknown key '{k}' in {where}{did_you_mean(k, list(allowed))}")


def load_spec(path: Path) -> SweepSpec:
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BenchError(f"no sweep spec {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BenchError(f"sweep spec {path} is unreadable: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise _fail(path, f"not valid TOML ({e})") from None
    _keys(path, "the spec", raw, SPEC_KEYS)
    for key, kind, what in (("description", str, "a string"), ("defaults", dict, "a table ([defaults])"),
                            ("estimate", dict, "a table ([estimate])"), ("group", list, "a list of [[group]] tables"),
                            ("reference", list, "a list of [[reference]] tables")):
        if key in raw and not isinstance(raw[key], kind) or kind is list and not all(
                isinstance(t, dict) for t in raw.get(key, [])):
            raise _fail(path, f"{key} must be {what}, got {raw[key]!r}")
    defaults, per_task = _defaults(path, raw.get("defaults", {}))
    groups = []
    for i, g in enumerate(raw.get("group", []), 1):
        _keys(path, f"group {i}", g, RUN_KEYS)
        for task in as_list(g.get("task", defaults.get("task", DEFAULTS["task"]))):
            layers = (defaults, per_task.get(task, {}), g)  # a later layer wins, parameters add up
            merged = {k: v for layer in layers for k, v in layer.items()} | {"task": task}
            for k in ("params", "suite_params"):
                if bad := next((layer[k] for layer in layers if not isinstance(layer.get(k, {}), dict)), None):
                    raise _fail(path, f"group {i}: {k} must be a table such as {{ epochs = 1 }}, got {bad!r}")
                merged[k] = {p: v for layer in layers for p, v in layer.get(k, {}).items()}
            for k in ("method", "suite"):
                if k not in merged:
                    raise _fail(path, f"group {i} names no {k}")
            _check_types(path, f"group {i}", merged)
            groups.append(merged)
    if not groups:
        raise _fail(path, "no [[group]] of runs")
    est = raw.get("estimate", {})
    refs = []
    for i, r in enumerate(raw.get("reference", []), 1):
        _keys(path, f"reference {i}", r, REFERENCE_KEYS)
        missing = [k for k in ("source", "task", "suite", "backbone", "label", "metrics") if k not in r]
        if missing:
            raise _fail(path, f"reference {i} lacks {', '.join(missing)}")
        refs.append(Reference(**r))
    return SweepSpec(path=path, description=str(raw.get("description", "")), groups=groups,
                     throughput=_throughput(path, est), references=refs)


AXES = {f.name for f in FIELDS if f.metadata["axis"]}


def _check_types(path: Path, where: str, run: dict) -> None:
    """Every run key of a group is of its declared type (a list of them where the key is a grid
    axis), and so is every method and suite parameter, by the command line's check
    (``check_field``, ``convert``) but with nothing coerced, before anything runs: ``seed =
    "zero"``, ``seed = 1.5``, ``max_examples = 0``, ``params = { epochs = true }`` or ``{ batch_size
    = 16.7 }`` are one line naming the key, the type and the value."""
    try:
        for key, value in run.items():
            if key in ("params", "suite_params"):
                if not isinstance(value, dict):
                    raise BenchError(f"{key} must be a table such as {{ epochs = 1 }}, got {value!r}")
                for name, v in value.items():
                    if v == [] or not all(isinstance(x, str | int | float | bool) for x in as_list(v)):
                        raise BenchError(f"{key}.{name} must be a string, number or true/false or a list of them, "
                                         f"got {v!r}")
                continue
            if key in AXES and value == []:
                raise BenchError(f"{key} is an empty list")
            for v in (value if key in AXES and isinstance(value, list) else [value]):
                check_field(key, v, parse=False)
        for key, owner, registry in (("params", "method", METHODS), ("suite_params", "suite", SUITES)):
            for name in as_list(run[owner]):
                _check_params(getattr(registry.get(name), "Params", None), run.get(key, {}))
    except BenchError as e:
        raise _fail(path, f"{where}: {e}") from None


def _check_params(cls: type | None, values: dict) -> None:
    """The values a spec gives the parameters that ``cls`` declares, each of its type (unknown
    names are ``resolve``'s to refuse, with a suggestion)."""
    if cls is None:
        return
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        for v in param_values(values[f.name]) if f.name in values else []:
            convert(v, hints[f.name], f"parameter '{f.name}'", parse=False)


def _defaults(path: Path, table: dict) -> tuple[dict, dict[str, dict]]:
    """``[defaults]``'s run keys, and its ``[defaults.<task>]`` tables: the keys of one task's
    runs where they differ (SST-2's CPU-sized training subset beside a small embedded task)."""
    per_task = {k: v for k, v in table.items() if k not in RUN_KEYS and isinstance(v, dict)}
    defaults = {k: v for k, v in table.items() if k not in per_task}
    _keys(path, "[defaults]", defaults, RUN_KEYS)
    for t, keys in per_task.items():
        if t not in TASKS.names():
            raise _fail(path, f"[defaults.{t}]: unknown task{did_you_mean(t, TASKS.names())}")
        _keys(path, f"[defaults.{t}]", keys, tuple(k for k in RUN_KEYS if k != "task"))
    return defaults, per_task


def _throughput(path: Path, est: dict) -> Throughput:
    """``[estimate]``'s rates, and its ``[estimate.<task>]`` tables, each a task's own rates
    (what it leaves out is the spec's)."""
    rates = ("train_per_s", "eval_per_s")

    def numbers(where: str, table: dict) -> dict[str, float]:
        _keys(path, where, table, rates)
        for k, v in table.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
                raise _fail(path, f"{where} {k} = {v!r}: a rate must be a positive number of examples per second")
        return {k: float(v) for k, v in table.items()}

    source = est.get("source", "")
    if not isinstance(source, str):
        raise _fail(path, f"[estimate] source = {source!r}: say in words where the rates come from")
    est = {k: v for k, v in est.items() if k != "source"}
    tasks = {k: v for k, v in est.items() if isinstance(v, dict)}
    for t in tasks:
        if t not in TASKS.names():
            raise _fail(path, f"[estimate.{t}]: unknown task{did_you_mean(t, TASKS.names())}")
    base = Throughput(**numbers("[estimate]", {k: v for k, v in est.items() if k not in tasks}), source=source)
    return dataclasses.replace(base, tasks={t: dataclasses.replace(base, **numbers(f"[estimate.{t}]", v))
                                            for t, v in tasks.items()})


def runs(spec: SweepSpec, only: dict[str, list] | None = None, check_backbones: bool = True,
         device: str | None = None, compile: bool = False, params: dict[str, str] | None = None) -> list[RunSpec]:
    """Every run (method, suite, task, ...) of the spec, validated; ``only`` keeps the runs whose
    method / suite / task / seed / target sparsity is listed and ``params`` those whose method
    parameter has one of the given values ("a,b"): a tox slice, a study seed by seed, one
    sparsity or one variant at a time (hard movement without soft), what they need planned with
    them. ``device`` overrides the spec's (the smoke spec on a GPU) and ``compile`` turns
    torch.compile on for every run. Backbone availability is checked unless a dry run plans for
    another machine."""
    only, params = {k: [_option(k, v) for v in values] for k, values in (only or {}).items()}, params or {}
    out: list[RunSpec] = []
    known: set[str] = set()
    for g in spec.groups:
        g = {**g, "device": device} if device else g
        g = {**g, "compile": True} if compile else g
        found = grid(check_backbone=check_backbones, **{k: v for k, v in g.items() if v is not None and v != ""})
        known |= {f.name for r in found if r.params is not None for f in dataclasses.fields(r.params)}
        out += [r for r in found if all(getattr(r, k) in v for k, v in only.items()) and _has(r, params)]
    for k in params:
        if k not in known:
            raise BenchError(f"--param {k}: no method of {spec.path} has this parameter{did_you_mean(k, sorted(known))}")
    for k, values in only.items():
        if k in ("seed", "sparsity"):
            continue
        names = {"method": METHODS, "suite": SUITES, "task": TASKS}[k].names()
        for v in values:
            if v not in names:
                raise BenchError(f"--{k} {v}: unknown {k}{did_you_mean(v, names)}")
    if not out:
        raise BenchError(f"sweep spec {spec.path}: no run matches {only | params}")
    return out


def _option(key: str, value: Any) -> Any:
    """A ``--seed`` / ``--sparsity`` / ``--method`` ... option's value, typed as its run field."""
    try:
        return check_field(key, value)
    except BenchError as e:
        raise BenchError(f"--{key} {value}: {e}") from None


def _has(run: RunSpec, params: dict[str, str]) -> bool:
    """Whether the run's method parameters take one of the listed values, each read as that
    parameter's type ("false" is False for a flag, "0.05" 0.05 for a rate)."""
    if not params:
        return True
    if run.params is None:
        return False
    hints = typing.get_type_hints(type(run.params))
    for k, values in params.items():
        if k not in hints:
            return False
        try:
            wanted = [convert(v.strip(), hints[k], f"parameter '{k}'") for v in values.split(",")]
        except BenchError as e:  # a value the parameter's type cannot read: say which option gave it
            raise BenchError(f"--param {k}={values}: {e}") from None
        if getattr(run.params, k) not in wanted:
            return False
    return True


