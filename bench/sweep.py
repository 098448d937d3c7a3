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
import hashlib
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench.api import Suite
from bench.errors import BenchError
from bench.params import parse_params
from bench.registry import METHODS, SUITES, TASKS, did_you_mean
from bench.runner import Runner, RunSpec, canonical, expand, needed

RUN_KEYS = ("method", "suite", "task", "backbone", "sparsity", "seed", "params", "suite_params", "data_dir",
            "max_examples", "device", "precision")
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

    def of(self, task: str) -> Throughput:
        """The rates of ``task``'s own jobs (work that is not the task's keeps the spec's)."""
        return self.tasks.get(task, self)

    def describe(self, tasks: set[str]) -> str:
        """The rates a plan of these tasks assumes."""
        rate = f"{self.train_per_s:g} training / {self.eval_per_s:g} evaluation examples per second"
        return rate + "".join(f"; {t}: {r.train_per_s:g} / {r.eval_per_s:g}" for t, r in self.tasks.items() if t in tasks)


@dataclass(frozen=True)
class Reference:
    """A published number set, shown in the leaderboard as a labelled row, never averaged."""

    source: str
    task: str
    suite: str
    backbone: str
    label: str
    metrics: dict[str, float]
    sparsity: float | None = None
    note: str = ""


@dataclass
class SweepSpec:
    path: Path
    description: str
    groups: list[dict]
    throughput: Throughput = field(default_factory=Throughput)
    references: list[Reference] = field(default_factory=list)


@dataclass(frozen=True)
class Job:
    id: str
    kind: Literal["build", "evaluate"]
    spec: RunSpec
    deps: tuple[str, ...]

    @property
    def label(self) -> str:
        s = self.spec
        params = ",".join(f"{k}={v}" for k, v in sorted(s.params.items()))
        sp = "" if s.sparsity is None else f" @{s.sparsity:g}"
        what = f"{s.method}{f'({params})' if params else ''}{sp} {s.task} seed {s.seed}"
        return f"build {what}" if self.kind == "build" else f"evaluate {what} on {s.suite}"


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
    defaults, per_task = _defaults(path, raw.get("defaults", {}))
    groups = []
    for i, g in enumerate(raw.get("group", []), 1):
        _keys(path, f"group {i}", g, RUN_KEYS)
        for task in _as_list(g.get("task", defaults.get("task", "nli_synth"))):
            layers = (defaults, per_task.get(task, {}), g)  # a later layer wins, parameters add up
            merged = {k: v for layer in layers for k, v in layer.items()} | {"task": task}
            for k in ("params", "suite_params"):
                merged[k] = {p: v for layer in layers for p, v in layer.get(k, {}).items()}
            for k in ("method", "suite"):
                if k not in merged:
                    raise _fail(path, f"group {i} names no {k}")
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

    tasks = {k: v for k, v in est.items() if isinstance(v, dict)}
    for t in tasks:
        if t not in TASKS.names():
            raise _fail(path, f"[estimate.{t}]: unknown task{did_you_mean(t, TASKS.names())}")
    base = Throughput(**numbers("[estimate]", {k: v for k, v in est.items() if k not in tasks}))
    return dataclasses.replace(base, tasks={t: dataclasses.replace(base, **numbers(f"[estimate.{t}]", v))
                                            for t, v in tasks.items()})


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, list) else [value]


def runs(spec: SweepSpec, only: dict[str, list[str]] | None = None, check_backbones: bool = True,
         device: str | None = None) -> list[RunSpec]:
    """Every run (method, suite, task, ...) of the spec, validated; ``only`` keeps the runs whose
    method / suite / task is listed (a tox slice); ``device`` overrides the spec's (the smoke
    spec on a GPU). Backbone availability is checked unless a dry run plans for another machine."""
    only = only or {}
    out: list[RunSpec] = []
    for g in spec.groups:
        g = {**g, "device": device} if device else g
        for method in _as_list(g["method"]):
            for suite in _as_list(g["suite"]):
                for task in _as_list(g.get("task", "nli_synth")):
                    for backbone in _as_list(g.get("backbone", "minilm")):
                        sp = g.get("sparsity")
                        found = expand(
                            method, suite, None if sp is None else [float(s) for s in _as_list(sp)],
                            [int(s) for s in _as_list(g.get("seed", 0))], task=task, backbone=backbone,
                            params=dict(g.get("params", {})), suite_params=dict(g.get("suite_params", {})),
                            data_dir=g.get("data_dir") or None, max_examples=g.get("max_examples"),
                            device=g.get("device", "cpu"), precision=g.get("precision", "fp32"),
                            check_backbone=check_backbones,
                        )
                        out += [r for r in found if all(getattr(r, k) in v for k, v in only.items())]
    for k, values in only.items():
        names = {"method": METHODS, "suite": SUITES, "task": TASKS}[k].names()
        for v in values:
            if v not in names:
                raise BenchError(f"--{k} {v}: unknown {k}{did_you_mean(v, names)}")
    if not out:
        raise BenchError(f"sweep spec {spec.path}: no run matches {only}")
    return out


def _id(kind: str, spec: RunSpec) -> str:
    blob = json.dumps(dataclasses.asdict(spec), sort_keys=True, default=str)
    return f"{kind}-{spec.method}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"


def plan(run_specs: list[RunSpec]) -> dict[str, Job]:
    """Jobs keyed by id, each after its dependencies (a topological order); a dependency
    cycle is a one-line error."""
    jobs: dict[str, Job] = {}
    path: list[tuple[str, str]] = []  # (id, label) of the jobs being expanded

    def visit(kind: Literal["build", "evaluate"], spec: RunSpec) -> str:
        jid = _id(kind, spec)
        if jid in jobs:
            return jid
        ids = [j for j, _ in path]
        if jid in ids:
            loop = [label for _, label in path[ids.index(jid):]]
            raise BenchError(f"dependency cycle: {' -> '.join(loop + [loop[0]])}")
        path.append((jid, Job(jid, kind, spec, ()).label))
        deps = tuple(_build_deps(spec) if kind == "build" else _eval_deps(spec))
        path.pop()
        jobs[jid] = Job(jid, kind, spec, deps)
        return jid

    def _build_deps(spec: RunSpec) -> list[str]:
        return [visit("build", n) for n in needed(spec)]

    def _eval_deps(spec: RunSpec) -> list[str]:
        deps = [visit("build", dataclasses.replace(spec, suite="", suite_params={}))]
        if type(SUITES.get(spec.suite)).compare is not Suite.compare:  # F_bias: the full CE model's record
            method = METHODS.get(spec.method)
            ref = Runner.reference_spec(spec, parse_params(method.Params, spec.params, f"method '{spec.method}'"))
            if ref != spec:
                deps.append(visit("evaluate", ref))
        return deps

    for spec in run_specs:
        visit("evaluate", dataclasses.replace(spec, params=canonical(METHODS.get(spec.method), spec.params)))
    return jobs


def record_path(runner: Runner, spec: RunSpec) -> Path:
    return runner.out / "records" / f"{runner.run_id(spec)}.json"


def finished(jobs: dict[str, Job], runner: Runner) -> tuple[set[str], set[str]]:
    """(done, unknown): records that exist, candidates already cached; ``unknown`` where the
    data or backbone is not on this machine (a dry run of a paper-scale spec)."""
    done: set[str] = set()
    unknown: set[str] = set()
    for jid, job in jobs.items():
        try:
            if job.kind == "evaluate":
                hit = record_path(runner, job.spec).is_file()
            else:
                hit = (runner.artifact(job.spec)[0] / "candidate.json").is_file()
        except BenchError:
            unknown.add(jid)
            continue
        if hit:
            done.add(jid)
    return done, unknown


def pending(jobs: dict[str, Job], done: set[str]) -> dict[str, Job]:
    """The jobs still to run: every evaluation without a record, and what it needs that is not
    done (a cached candidate needs nothing more; neither does an existing record)."""
    keep: set[str] = set()

    def need(jid: str) -> None:
        if jid in done or jid in keep:
            return
        keep.add(jid)
        for d in jobs[jid].deps:
            need(d)

    for jid, job in jobs.items():
        if job.kind == "evaluate":
            need(jid)
    return {jid: job for jid, job in jobs.items() if jid in keep}


def sizes(runner: Runner, spec: RunSpec) -> dict[str, int] | None:
    """Split sizes of the run's task: counted from the data when it is here, else the task's
    published sizes (capped by --max-examples), else None."""
    try:
        task = runner.task_data(spec)
        out = {"train": len(task.train), "dev": len(task.dev), "test": len(task.test)}
        return out | {f"ood/{k}": len(v.examples) for k, v in task.ood.items()}
    except BenchError:
        nominal = dict(TASKS.get(spec.task).sizes)
        if not nominal:
            return None
        cap = spec.max_examples
        return {k: min(n, cap) if cap else n for k, n in nominal.items()}


def estimate(job: Job, runner: Runner, throughput: Throughput) -> float | None:
    """Seconds a job should take at the assumed throughput: its own training passes (with ID-dev
    evaluations twice an epoch) or its suite's forward passes; requirements are their own jobs."""
    n = sizes(runner, job.spec)
    if n is None:
        return None
    own = throughput.of(job.spec.task)
    if job.kind == "build":
        method = METHODS.get(job.spec.method)
        params = parse_params(method.Params, job.spec.params, f"method '{job.spec.method}'")
        return (method.epochs(params) * (n["train"] / own.train_per_s + 2 * n["dev"] / own.eval_per_s)
                + method.fixed_examples(params) / throughput.train_per_s)  # task-agnostic: the spec's rate
    suite = SUITES.get(job.spec.suite)
    params = parse_params(suite.Params, job.spec.suite_params, f"suite '{suite.name}'") if suite.Params else None
    return suite.examples(n, params) / own.eval_per_s


def describe_plan(jobs: dict[str, Job], done: set[str], unknown: set[str], runner: Runner,
                  throughput: Throughput) -> str:
    """The plan as a table: every job, what it needs, whether it is done, and its estimate."""
    from tabulate import tabulate

    number = {jid: i for i, jid in enumerate(jobs, 1)}
    todo = pending(jobs, done)
    rows, total, unknown_cost = [], 0.0, 0
    for jid, job in jobs.items():
        status = "done" if jid in done else "?" if jid in unknown and jid not in todo else "to run" if jid in todo else "not needed"
        secs = estimate(job, runner, throughput) if jid in todo else None
        if jid in todo:
            if secs is None:
                unknown_cost += 1
            else:
                total += secs
        rows.append([number[jid], job.label, ",".join(str(number[d]) for d in job.deps) or "-", status,
                     _duration(secs) if secs is not None else ("?" if jid in todo else "")])
    head = (f"{len(jobs)} jobs, {len(todo)} to run, {len(done)} done; estimated {_duration(total)} of compute at "
            f"{throughput.describe({j.spec.task for j in todo.values()})}"
            + (f" ({unknown_cost} jobs without an estimate: their task has no known size)" if unknown_cost else ""))
    return head + "\n" + tabulate(rows, headers=["#", "job", "needs", "status", "estimate"])


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def write_references(out: Path, spec: SweepSpec) -> None:
    """The spec's published numbers beside the records, for every later leaderboard."""
    from bench.records import write_atomic

    if spec.references:
        write_atomic(out / "references" / f"{spec.path.stem}.json",
                     json.dumps([dataclasses.asdict(r) for r in spec.references], indent=1))


def load_references(out: Path) -> list[Reference]:
    refs = []
    for p in sorted((out / "references").glob("*.json")):
        try:
            refs += [Reference(**r) for r in json.loads(p.read_text())]
        except (OSError, ValueError, TypeError) as e:
            raise BenchError(f"{p}: not a readable list of published references ({e})") from e
    return refs
