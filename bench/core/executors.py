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

import contextlib
import dataclasses
import graphlib
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from bench.errors import BenchError
from bench.spec.plan import Job

EXECUTORS = ("local", "pool", "ray")


@dataclass(frozen=True)
class Outcome:
    job: str
    ok: bool
    seconds: float
    message: str = ""  # the run id of an evaluation, or why the job failed
    label: str = ""  # the job's label, for messages


_RUNNERS: dict[str, object] = {}


def execute(job: Job, out: str, threads: int, progress: bool = False, force: bool = False,
            log: Callable[[str], None] | None = None) -> Outcome:
    """One job in this process (a pool or Ray worker calls it too); ``force`` evaluates again
    even when the record exists."""
    import torch

    from bench.core.runner import Runner

    t0 = time.time()
    if threads > 0:
        torch.set_num_threads(threads)
    runner = _RUNNERS.get(out)
    if runner is None:
        runner = _RUNNERS[out] = Runner(Path(out), progress=progress, log=lambda m: None)
    runner.progress, runner.log = progress, log or (lambda m: None)
    try:
        if job.kind == "build":
            runner.candidate(job.spec)  # loads, or builds and caches
            message = ""
        else:
            message = runner.run(job.spec, force=force).run_id  # skipped when its record exists
    except BenchError as e:
        return Outcome(job.id, False, time.time() - t0, str(e))
    except Exception as e:  # a bug in one job must not take the sweep's other jobs down with it
        return Outcome(job.id, False, time.time() - t0, failure(e))
    return Outcome(job.id, True, time.time() - t0, message)


def failure(e: Exception) -> str:
    """An exception that is not a BenchError, in one line: which plug-in raised it (its package
    and version) and where, or the harness's own code; ``BENCH_DEBUG=1`` (``--debug``) gives the
    whole traceback instead."""
    from bench.registry import plugin_of

    if os.environ.get("BENCH_DEBUG"):
        return "".join(traceback.format_exception(e)).rstrip()
    frame = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    who = plugin_of(e)
    return (f"{who} raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}{where}"
            if who else f"{type(e).__name__}: {e}{where} (a bug in the harness)") + "; --debug for the traceback"


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
    submit = {"local": _local, "pool": _pool, "ray": _ray}[executor]
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


def _exit_with_parent(parent: int) -> None:
    """A pool worker ends when the sweep that started it is gone (killed with SIGTERM or
    SIGKILL, which a process pool does not pass on): no orphan keeps training and writing."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _serve(conn: Connection, parent: int) -> None:
    """A pool worker: runs the jobs it is sent, one at a time, until told to stop. Ctrl-C is the
    sweep's to handle (it stops the workers): a job is never cut short by it half-way through."""
    import threading

    from tqdm import tqdm

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent(parent)
    tqdm.set_lock(threading.RLock())  # not its default process-shared semaphore, which a killed worker leaks
    with contextlib.suppress(EOFError, OSError):  # the sweep is gone
        while (task := conn.recv()) is not None:
            conn.send(execute(*task))


@dataclass(eq=False)
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection


def _died(process) -> str:
    process.join(5)
    code = process.exitcode
    how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 and -code in signal.valid_signals()
           else f"exit code {code}")
    return f"its worker process died ({how}{', out of memory?' if code == -signal.SIGKILL else ''}); rerun the sweep to retry it"


def _pool(ready, sorter, jobs, out, threads, workers, ray_address, progress, forced, log) -> Iterator[Outcome]:
    """Worker processes of our own rather than ``concurrent.futures``: a process pool whose worker
    dies is broken as a whole (every running job fails, nothing more can start), while here a
    dead worker fails its own job only and is replaced."""
    ctx = multiprocessing.get_context("spawn")  # no forked torch state
    idle: list[_Worker] = []
    busy: dict[_Worker, tuple[Job, float]] = {}

    def start() -> _Worker:
        mine, theirs = ctx.Pipe()
        process = ctx.Process(target=_serve, args=(theirs, os.getpid()), daemon=True)
        process.start()
        theirs.close()
        return _Worker(process, mine)

    try:
        while sorter.is_active():
            queue = ready()
            while queue and len(busy) < workers:  # the rest wait: a finished job may free a better one
                job = queue.pop(0)
                worker = idle.pop() if idle else start()
                try:
                    worker.conn.send((job, out, threads, False, job.id in forced))
                except OSError:  # it died while idle: its successor takes the job
                    worker.process.join(5)
                    worker = start()
                    worker.conn.send((job, out, threads, False, job.id in forced))
                busy[worker] = (job, time.time())
            if not busy:
                continue
            wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
            for worker in list(busy):
                if worker.conn.poll():  # its answer first: a worker may end right after sending it
                    try:
                        outcome = worker.conn.recv()
                    except (EOFError, OSError):
                        outcome = None
                elif not worker.process.is_alive():
                    outcome = None
                else:
                    continue
                job, t0 = busy.pop(worker)
                if outcome is None:
                    worker.conn.close()
                    outcome = Outcome(job.id, False, time.time() - t0, _died(worker.process))
                else:
                    idle.append(worker)
                yield outcome
    finally:
        for worker in idle:
            with contextlib.suppress(OSError):
                worker.conn.send(None)
        for worker in busy:  # interrupted: their jobs' finished files are whole, the rest is redone
            worker.process.terminate()
        for worker in [*idle, *busy]:
            worker.process.join(10)
            if worker.process.is_alive():
                worker.process.kill()


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
