"""One job of a plan, run in this process: a pool or Ray worker calls ``execute`` too. Its
outcome says what happened in one line, whoever raised what."""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.spec.plan import Job


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
