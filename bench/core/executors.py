"""Run a sweep's jobs: in this process, in a local process pool, or as Ray tasks.

All three walk the same plan with the standard library's ``graphlib.TopologicalSorter``: a job
starts once everything it needs is done, a failed job's dependents are skipped (their
failure names it), and every other job goes on. A worker process that dies (killed, out of
memory) fails the one job it was running, named with the signal; the pool starts another
worker and Ray schedules the rest, so the sweep finishes, writes its leaderboard and lists its
failures, and a rerun does only what is missing. Each job is an ordinary ``Runner`` call, so
its artifacts and record land under the sweep's output directory exactly as ``bench run``
writes them: atomically, once, whichever worker finishes first (a candidate built twice by a
race keeps the first copy; a record is one file named by its run id). With Ray the output
directory must be a path every node sees.
"""

from __future__ import annotations

import dataclasses
import graphlib
import os
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from bench.core.job import Outcome, execute
from bench.core.pool import run_pool
from bench.errors import BenchError
from bench.spec.plan import Job

EXECUTORS = ("local", "pool", "ray")


def check_installed(executor: str) -> None:
    """Before anything runs: the executor exists and its engine is importable."""
    if executor not in EXECUTORS:
        from bench.registry import did_you_mean

        raise BenchError(f"unknown executor '{executor}'{did_you_mean(executor, list(EXECUTORS))}")
    if executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise BenchError("executor 'ray' is not installed: pip install -e '.[ray]'") from None


def run_jobs(jobs: dict[str, Job], out: Path, executor: str = "local", workers: int = 0, cpus_per_job: int = 0,
             ray_address: str | None = None, log: Callable[[str], None] = print, progress: bool = False,
             force: Collection[str] = (), fail_fast: bool = False,
             runner_log: Callable[[str], None] | None = None) -> list[Outcome]:
    """Run every job after its dependencies; returns one outcome per job, in finishing order.
    The evaluations whose ids are in ``force`` run again even when their record exists.
    ``fail_fast`` raises the first failure's message as a BenchError (``bench run``), instead of
    going on with the jobs that do not need it (``bench sweep``)."""
    check_installed(executor)
    cores = os.cpu_count() or 1
    # one thread per job scales better than two threads per job on small CPUs (MiniLM on 2 cores:
    # 0.79 s/step with 1 thread, 0.74 with 2; two 1-thread jobs side by side 0.83-0.89 s/step each)
    workers = workers or (1 if executor == "local" else
                          max(1, min(cores // max(cpus_per_job, 1) if cpus_per_job else cores, len(jobs))))
    threads = cpus_per_job or max(1, cores // workers)
    submit = {"local": _local, "pool": run_pool, "ray": _ray}[executor]
    sorter = graphlib.TopologicalSorter({jid: [d for d in job.deps if d in jobs] for jid, job in jobs.items()})
    sorter.prepare()
    failed: dict[str, str] = {}
    outcomes: list[Outcome] = []

    planned = {jid: i for i, jid in enumerate(jobs)}
    waiting: list[Job] = []

    def ready() -> list[Job]:
        """Every job whose dependencies are done, best first: seed by seed, and within a seed a
        record before another build, so that a long sweep stopped part-way leaves complete seeds
        and finished records rather than a pile of cached models. Jobs that need a failed job
        fail at once. The caller takes what it can run now from the front."""
        for jid in sorter.get_ready():
            bad = [d for d in jobs[jid].deps if d in failed]
            if bad:
                finish(Outcome(jid, False, 0.0, f"skipped: needs '{jobs[bad[0]].label}', which failed"))
            else:
                waiting.append(jobs[jid])
        waiting.sort(key=lambda j: (j.spec.seed, j.kind != "evaluate", planned[j.id]))
        return waiting

    def finish(o: Outcome) -> None:
        o = dataclasses.replace(o, label=jobs[o.job].label)
        if not o.ok and fail_fast:
            raise BenchError(o.message)
        if not o.ok:
            failed[o.job] = o.message
        outcomes.append(o)
        sorter.done(o.job)
        state = "done" if o.ok else f"FAILED: {o.message}"
        log(f"[sweep] {len(outcomes)}/{len(jobs)} {jobs[o.job].label} ({o.seconds:.0f} s) {state}")

    forced = frozenset(force)
    for o in submit(ready, sorter, jobs, str(out), threads, workers, ray_address, progress, forced, runner_log):
        finish(o)
    return outcomes


def _local(ready, sorter, jobs, out, threads, workers, ray_address, progress, forced, log) -> Iterator[Outcome]:
    while sorter.is_active():
        queue = ready()
        if queue:  # else skipped jobs were finished inside ready(); their dependents come next
            job = queue.pop(0)
            yield execute(job, out, threads, progress, job.id in forced, log)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _ray(ready, sorter, jobs, out, threads, workers, ray_address, progress, forced, log) -> Iterator[Outcome]:
    import ray

    started = not ray.is_initialized()
    if started:
        kwargs = {"address": ray_address} if ray_address else {"num_cpus": threads * workers}
        try:
            ray.init(include_dashboard=False, log_to_driver=False, **kwargs)
        except (ConnectionError, RuntimeError) as e:
            hint = ("; a cluster started with `ray start` (Ray 2.59 and later) asks for its token: set RAY_AUTH_MODE=token "
                    "(the token is read from ~/.ray/auth_token) or RAY_AUTH_TOKEN, or on its head node pass --ray-address auto "
                    "with RAY_ADDRESS unset"
                    if ray_address and ray_address != "auto" and "RAY_AUTH_MODE" not in os.environ else "")
            where = f"the Ray cluster at {ray_address}" if ray_address else "a local Ray instance"
            raise BenchError(f"cannot start or connect to {where}: {_first_line(e)[:200]}{hint}") from e
    remote = ray.remote(execute)
    try:
        running: dict = {}
        while sorter.is_active():
            queue = ready()
            while queue:  # all of them, best first: Ray's scheduler places them on the cluster
                job = queue.pop(0)
                gpus = 1 if job.spec.device == "cuda" else 0
                ref = remote.options(num_cpus=threads, num_gpus=gpus, max_retries=0).remote(job, out, threads, False, job.id in forced)
                running[ref] = job
            if not running:
                continue
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                job = running.pop(ref)
                try:
                    yield ray.get(ref)
                except ray.exceptions.RayError as e:
                    yield Outcome(job.id, False, 0.0, f"ray: {type(e).__name__}: {_first_line(e)}")
    finally:
        if started:
            ray.shutdown()
