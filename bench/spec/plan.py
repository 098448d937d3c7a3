"""The job plan: every run of ``bench run`` or ``bench sweep`` expanded into a graph of jobs.

One ``build`` per distinct candidate (its lineage: method, params, task, backbone, seed,
sparsity) and one ``evaluate`` per record (a candidate judged by a suite). A build depends on
the candidates its method declares (``bench.spec.requires.needed``: fine-tune once, prune many
times); an evaluation depends on its candidate, on the record of the reference run its suite
compares with (``reference_of``) and on its baseline's evaluation by the same suite, whose
rows loyalty compares with (``baseline_run``). Cycles are a one-line error, found before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bench.errors import BenchError
from bench.spec.requires import baseline_run, needed, reference_of
from bench.spec.run import DEFAULTS, RunSpec, digest


@dataclass(frozen=True)
class Job:
    id: str
    kind: Literal["build", "evaluate"]
    spec: RunSpec
    deps: tuple[str, ...]

    @property
    def label(self) -> str:
        s = self.spec
        params = ",".join(f"{k}={v}" for k, v in sorted(s.config()["params"].items()))
        sp = "" if s.sparsity is None else f" @{s.sparsity:g}"
        on = "" if s.backbone == DEFAULTS["backbone"] else f" [{s.backbone}]"  # a checkpoint is its backbone
        what = f"{s.method}{f'({params})' if params else ''}{sp}{on} {s.task} seed {s.seed}"
        return f"build {what}" if self.kind == "build" else f"evaluate {what} on {s.suite}"


def _id(kind: str, spec: RunSpec) -> str:
    return f"{kind}-{spec.method}-{digest(spec.config())[:10]}"


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
        if kind == "build":
            deps = [visit("build", n) for n in needed(spec)]
        else:
            deps = [visit("build", spec.candidate())]
            for ref in (reference_of(spec), baseline_run(spec)):  # F_bias; loyalty (the baseline's rows)
                if ref is not None and ref != spec and _id("evaluate", ref) not in deps:
                    deps.append(visit("evaluate", ref))
        path.pop()
        jobs[jid] = Job(jid, kind, spec, tuple(deps))
        return jid

    for spec in run_specs:
        visit("evaluate", spec)
    return jobs


def reasons(jobs: dict[str, Job]) -> dict[str, list[str]]:
    """Why each build is in the plan beside being a requested candidate, by job id: the F_bias
    reference, the baseline whose rows loyalty compares with, or what a method requires."""
    why: dict[str, list[str]] = {}

    def add(spec: RunSpec, reason: str) -> None:
        found = why.setdefault(_id("build", spec.candidate()), [])
        if reason not in found:
            found.append(reason)

    for job in jobs.values():
        if job.kind == "build":
            for n in needed(job.spec):
                add(n, f"required by {job.spec.method}")
            continue
        ref, base = reference_of(job.spec), baseline_run(job.spec)
        if ref is not None and ref != job.spec:
            add(ref, "F_bias reference")
        if base is not None:
            add(base, "baseline")
    return why


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


