"""The local process pool: worker processes of our own, each running one job at a time.

Not ``concurrent.futures``: a process pool whose worker dies is broken as a whole (every running
job fails, nothing more can start), while here a dead worker fails its own job only, named
with the signal, and is replaced."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from bench.core.job import Outcome, execute
from bench.spec.plan import Job


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


def run_pool(ready, sorter, jobs, out, threads, workers, ray_address, progress, forced, log) -> Iterator[Outcome]:
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
