"""What can be checked before anything trains, once the plan is made: every job's device, every
build's method against its task and backbone (``Method.check_inputs``: a checkpoint's labels),
and every evaluation's suite parameters against its task's data (an attack sample larger than the
test split, a masked-LM head that the text at hand cannot train). A problem found here costs
seconds instead of the hours of training that come before the evaluation."""

from __future__ import annotations

from collections.abc import Iterable

from bench.core.runner import Runner, torch_device
from bench.model.backbone import resolve
from bench.registry import METHODS, SUITES
from bench.spec.plan import Job


def preflight(jobs: Iterable[Job], runner: Runner, check_devices: bool = True) -> None:
    """Raise the first problem as a one-line BenchError; reads (and caches) each task once."""
    seen: set[str] = set()
    for job in jobs:
        spec = job.spec
        if check_devices:
            torch_device(spec)
        if job.kind != "evaluate":
            key = f"{spec.method}|{spec.config().get('params')}|{spec.task}|{spec.backbone}|{spec.data_dir}"
            if key not in seen:
                seen.add(key)
                METHODS.get(spec.method).check_inputs(spec.params, runner.task_data(spec), resolve(spec.backbone))
            continue
        key = f"{spec.suite}|{spec.config()['suite_params']}|{spec.task}|{spec.data_dir}|{spec.max_examples}"
        if key not in seen:
            seen.add(key)
            SUITES.get(spec.suite).check(spec.suite_params, runner.task_data(spec), spec.data_path)
