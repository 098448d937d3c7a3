"""One job of a plan, run in this process: a pool or Ray worker calls ``execute`` too. Its
outcome says what happened in one line, whoever raised what."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.registry import failure
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
