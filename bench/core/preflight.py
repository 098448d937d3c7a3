"""What can be checked before anything trains, once the plan is made: every job's device, and
every evaluation's suite parameters against its task's data (an attack sample larger than the
test split, a masked-LM head that the text at hand cannot train). A problem found here costs
seconds instead of the hours of training that come before the evaluation."""

from __future__ import annotations

from collections.abc import Iterable

from bench.core.runner import Runner, torch_device
from bench.registry import SUITES
from bench.spec.plan import Job


def preflight(jobs: Iterable[Job], runner: Runner, check_devices: bool = True) -> None:
    """Raise the first problem as a one-line BenchError; reads (and caches) each task once."""
    seen: set[str] = set()
    for job in jobs:
        spec = job.spec
        if check_devices:
            torch_device(spec)
        if job.kind != "evaluate":
            continue
        key = f"{spec.suite}|{spec.config()['suite_params']}|{spec.task}|{spec.data_dir}|{spec.max_examples}"
        if key not in seen:
            seen.add(key)
            SUITES.get(spec.suite).check(spec.suite_params, runner.task_data(spec), spec.data_path)
