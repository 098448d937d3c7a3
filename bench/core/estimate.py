"""What a plan costs and what of it is done: records and cached candidates already on disk,
split sizes, and estimated seconds per job for ``bench sweep --dry-run``."""

from __future__ import annotations

from bench.core.runner import Runner
from bench.errors import BenchError
from bench.registry import METHODS, SUITES, TASKS
from bench.spec.plan import Job, pending, reasons
from bench.spec.requires import trains_itself
from bench.spec.run import RunSpec
from bench.spec.sweep import Throughput
from bench.store import records


def finished(jobs: dict[str, Job], runner: Runner) -> tuple[set[str], set[str]]:
    """(done, unknown): records that exist with their predictions, candidates already cached;
    ``unknown`` where the data or backbone is not on this machine (a dry run of a paper-scale spec)."""
    done: set[str] = set()
    unknown: set[str] = set()
    for jid, job in jobs.items():
        try:
            if job.kind == "evaluate":
                hit = records.finished(runner.out, runner.run_id(job.spec))
            else:
                hit = (runner.artifact(job.spec)[0] / "candidate.json").is_file()
        except BenchError:
            unknown.add(jid)
            continue
        if hit:
            done.add(jid)
    return done, unknown


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
        params = job.spec.params
        return (method.epochs(params, job.spec.sparsity) * (n["train"] / own.train_per_s + 2 * n["dev"] / own.eval_per_s)
                + method.fixed_examples(params) / throughput.train_per_s)  # task-agnostic: the spec's rate
    return SUITES.get(job.spec.suite).examples(n, job.spec.suite_params) / own.eval_per_s


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


def unnamed_builds(jobs: dict[str, Job], todo: dict[str, Job], runs: list[RunSpec], runner: Runner,
                   throughput: Throughput) -> list[str]:
    """One line for each build still to run that trains and that ``runs`` do not name (the F_bias
    reference of a fine-tuned or pruned model, the model a method starts from): what, why and
    about how long, said before the first job starts, so that hours of training nobody asked for
    by name are never a surprise (an F_bias reference fine-tuned on all of SST-2 takes hours on a CPU)."""
    named = {r.candidate() for r in runs}
    why = reasons(jobs)
    out = []
    for jid, job in todo.items():
        if job.kind != "build" or job.spec in named or not trains_itself(job.spec):
            continue
        secs = estimate(job, runner, throughput)
        cost = f"about {_duration(secs)}" if secs is not None else "time unknown (the task has no known size)"
        rate = throughput.of(job.spec.task).train_per_s
        out.append(f"builds {job.label.removeprefix('build ')} ({', '.join(why.get(jid, ['a dependency']))}), "
                   f"not asked for by name: {cost} at an assumed {rate:g} training examples per second")
    return out


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
