"""A batch of runs, the one path of ``bench run`` and ``bench sweep``: the job plan
(``bench.spec.plan``), the checks that need no training (``preflight``), then the jobs, run by
an executor (``executors``), each a ``Runner`` call that builds or reuses a candidate, judges it
with a suite and writes a record."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench.core import provenance
from bench.core.estimate import describe_plan, finished, unnamed_builds
from bench.core.executors import check_installed, run_jobs
from bench.core.job import Outcome
from bench.core.preflight import preflight
from bench.core.runner import Runner
from bench.errors import BenchError
from bench.spec.plan import pending, plan
from bench.spec.run import RunSpec
from bench.spec.sweep import Throughput
from bench.store.records import Record, load_record, record_path


def writable(out: Path) -> None:
    try:  # a probe file of its own: a shared name races with another run on the same folder
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise BenchError(f"output directory {out} is not writable: {e.strerror}") from e


def run_batch(runs: list[RunSpec], out: Path, *, executor: str = "local", workers: int = 0, cpus_per_job: int = 0,
              ray_address: str | None = None, force: bool = False, dry_run: bool = False, quiet: bool = False,
              fail_fast: bool = False, throughput=None, what: str = "[bench] run") -> list[Outcome]:
    """Plan the runs' jobs, check what can be checked before anything trains, run what is not
    done, and return the outcomes (a dry run prints the plan and returns none)."""
    check_installed(executor)
    if workers < 0 or cpus_per_job < 0:
        raise BenchError("--workers and --cpus-per-job must be at least 0")
    jobs = plan(runs)
    runner = Runner(out, progress=False, log=lambda m: None)
    done, unknown = finished(jobs, runner)
    throughput = throughput or Throughput()
    if dry_run:
        print(describe_plan(jobs, done, unknown, runner, throughput))
        for line in unnamed_builds(jobs, pending(jobs, done), runs, runner, throughput):
            print(line)
        return []
    requested = {jid for jid, job in jobs.items() if job.kind == "evaluate" and job.spec in runs}
    if force:
        done -= requested
    todo = pending(jobs, done)
    preflight(todo.values(), runner, check_devices=not ray_address)  # a cluster's GPUs are its own business
    writable(out)
    log = (lambda m: None) if quiet else (lambda m: print(m, file=sys.stderr))
    log(f"{what}: {len(jobs)} jobs, {len(todo)} to run, {len(jobs) - len(todo)} done or not needed")
    for line in unnamed_builds(jobs, todo, runs, runner, throughput):  # said even when quiet: hours of training
        print(f"{what}: {line}", file=sys.stderr)
    if todo and (git := provenance.git_state())["dirty"]:  # said before hours of work, not found in the records after
        print(f"bench: warning: the code at {str(git['commit'])[:7]} has uncommitted changes: the records of this "
              "run will say so (provenance.git.dirty) and no commit will hold the code that made them", file=sys.stderr)
    return run_jobs(todo, out, executor, workers, cpus_per_job, ray_address, log=log,
                    progress=not quiet and executor == "local", force=requested if force else (),
                    fail_fast=fail_fast, runner_log=log)


def degenerate(records: list) -> str:
    """The candidates that did not learn their task, in one line ('' if none): their records
    stay, flagged, and the leaderboard shows them unranked."""
    bad = [r for r in records if r.degenerate]
    listed = "; ".join(f"{r.label} sparsity={r.sparsity.get('target')} seed={r.seed} on {r.task}: {r.degenerate}" for r in bad)
    return f"{len(bad)} of {len(records)} candidates did not learn the task (flagged degenerate, not ranked): {listed}" if bad else ""


def records_of(runs: list[RunSpec], out: Path) -> list[Record]:
    """The records ``out`` holds of ``runs`` (those that finished)."""
    runner = Runner(out, progress=False, log=lambda m: None)
    paths = [record_path(out, runner.run_id(spec)) for spec in runs]
    return [load_record(p) for p in paths if p.is_file()]
