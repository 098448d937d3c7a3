"""Command line: ``python -m bench run | sweep | ls | leaderboard``.

The whole flow in one place: parse -> expand runs (sparsities x seeds) -> Runner.run each
(method builds or reuses a cached candidate; suite judges it; a record is written) ->
leaderboard regenerated from the records. ``sweep`` does the same for a spec file's grid:
plan the jobs (bench.sweep), run them with an executor (bench.executors), then the
leaderboard. Bad input ends with one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DEFAULT_OUT = "runs"


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line too, like every other bad input."""

    def error(self, message: str):
        self.exit(2, f"bench: error: {message} (see 'bench {self.prog.split()[-1]} --help')\n")


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="bench", description="Robust compression bench for BERT-family models.")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="build candidates with a method and judge them with a suite")
    run.add_argument("--method", required=True)
    run.add_argument("--suite", required=True)
    run.add_argument("--task", default="nli_synth")
    run.add_argument("--backbone", default="minilm", help="'minilm' (embedded), a local model directory or a hub id")
    run.add_argument("--sparsity", type=float, nargs="+", help="one or more target sparsities in [0, 1)")
    run.add_argument("--seed", type=int, nargs="+", default=[0])
    run.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="method parameter (see 'ls')")
    run.add_argument("--suite-param", action="append", default=[], metavar="KEY=VALUE", help="suite parameter (see 'ls')")
    run.add_argument("--data-dir", help="directory with local data files (for example ../shared/data)")
    run.add_argument("--out", default=DEFAULT_OUT, help="output directory for records, predictions, artifacts")
    run.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    run.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="bf16 autocast or fp32")
    run.add_argument("--max-examples", type=int, help="cap every split at N examples (stratified, seeded)")
    run.add_argument("--force", action="store_true", help="evaluate again even if the record exists (cached models are reused; delete OUT/artifacts/... to retrain)")
    run.add_argument("--quiet", action="store_true", help="no progress bars or progress lines")

    sw = sub.add_parser("sweep", help="run a spec file's grid of methods x params x sparsities x tasks x suites x seeds")
    sw.add_argument("spec", help="a TOML sweep spec (see sweeps/)")
    sw.add_argument("--out", default=DEFAULT_OUT, help="output directory (shared by every worker)")
    sw.add_argument("--executor", default="local", help="local (in this process), pool (local processes) or ray")
    sw.add_argument("--workers", type=int, default=0, help="parallel jobs (default: cores / cpus-per-job)")
    sw.add_argument("--cpus-per-job", type=int, default=0, help="torch threads (and Ray CPUs) per job")
    sw.add_argument("--ray-address", help="an existing Ray cluster (default: start a local instance)")
    sw.add_argument("--device", choices=["cpu", "cuda"], help="run every job on this device (default: the spec's)")
    sw.add_argument("--dry-run", action="store_true", help="show the jobs, their dependencies and an estimate; run nothing")
    for key in ("method", "suite", "task"):
        sw.add_argument(f"--{key}", action="append", help=f"only the spec's runs of this {key} (repeatable)")
    sw.add_argument("--quiet", action="store_true", help="no progress output")

    sub.add_parser("ls", help="list methods, suites and tasks with their parameters")

    lb = sub.add_parser("leaderboard", help="regenerate the Markdown leaderboard from records")
    lb.add_argument("--out", default=DEFAULT_OUT, help="output directory whose records/ to read")
    lb.add_argument("--output", help="Markdown file to write (default: OUT/LEADERBOARD.md)")
    return ap


def cmd_ls() -> None:
    from bench.params import describe
    from bench.registry import METHODS, SUITES, TASKS

    print("methods:")
    for name in METHODS.names():
        m = METHODS.get(name)
        print(f"  {name:<12} {m.description}{' [takes --sparsity]' if m.sparse else ''}")
        for pname, typ, default in describe(m.Params):
            print(f"      {pname} ({typ}) = {default}")
    print("suites:")
    for name in SUITES.names():
        suite = SUITES.get(name)
        print(f"  {name:<12} {suite.description}")
        for pname, typ, default in describe(suite.Params) if suite.Params else []:
            print(f"      {pname} ({typ}) = {default}")
    print("tasks:")
    for name in TASKS.names():
        print(f"  {name:<12} {TASKS.get(name).description}")


def write_leaderboard(out: Path, output: Path | None = None) -> Path:
    from bench.records import load_records, write_atomic
    from bench.sweep import load_references
    from leaderboard.build import build

    target = output or out / "LEADERBOARD.md"
    write_atomic(target, build(load_records(out / "records"), markdown=target, references=load_references(out)))
    return target


def cmd_run(a: argparse.Namespace) -> None:
    from bench.errors import BenchError
    from bench.params import split_assignments
    from bench.runner import Runner, expand

    specs = expand(
        a.method, a.suite, a.sparsity, a.seed, task=a.task, backbone=a.backbone,
        params=split_assignments(a.param), suite_params=split_assignments(a.suite_param), data_dir=a.data_dir, max_examples=a.max_examples,
        device=a.device, precision=a.precision,
    )
    out = Path(a.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / ".write-test").touch()
        (out / ".write-test").unlink()
    except OSError as e:
        raise BenchError(f"output directory {out} is not writable: {e.strerror}") from e
    log = (lambda m: None) if a.quiet else (lambda m: print(m, file=sys.stderr))
    runner = Runner(out, progress=not a.quiet, log=log)
    for spec in specs:
        record = runner.run(spec, force=a.force)
        shown = {k: v if v is None else round(v, 4) for k, v in record.metrics.items() if k.count("/") <= 1}
        print(f"{record.run_id}: {shown}")
    print(f"leaderboard: {write_leaderboard(out)}")


def cmd_sweep(a: argparse.Namespace) -> int:
    from bench.errors import BenchError
    from bench.executors import check_installed, run_jobs
    from bench.runner import Runner
    from bench.sweep import (
        describe_plan,
        finished,
        load_spec,
        pending,
        plan,
        runs,
        write_references,
    )

    spec = load_spec(Path(a.spec))
    check_installed(a.executor)
    if a.workers < 0 or a.cpus_per_job < 0:
        raise BenchError("--workers and --cpus-per-job must be at least 0")
    only = {k: getattr(a, k) for k in ("method", "suite", "task") if getattr(a, k)}
    jobs = plan(runs(spec, only, check_backbones=not a.dry_run, device=a.device))
    if not a.dry_run and not a.ray_address:  # a cluster's GPUs are its own business
        for job in jobs.values():
            Runner.device(job.spec)
    out = Path(a.out)
    runner = Runner(out, progress=False, log=lambda m: None)
    done, unknown = finished(jobs, runner)
    if a.dry_run:
        print(describe_plan(jobs, done, unknown, runner, spec.throughput))
        return 0
    todo = pending(jobs, done)
    log = (lambda m: None) if a.quiet else (lambda m: print(m, file=sys.stderr))
    log(f"[sweep] {spec.path}: {len(jobs)} jobs, {len(todo)} to run, {len(jobs) - len(todo)} done or not needed")
    outcomes = run_jobs(todo, out, a.executor, a.workers, a.cpus_per_job, a.ray_address, log=log,
                        progress=not a.quiet and a.executor == "local")
    write_references(out, spec)
    if (out / "records").is_dir():
        print(f"leaderboard: {write_leaderboard(out)}")
    failed = [o for o in outcomes if not o.ok]
    if failed:
        first = next((o for o in failed if not o.message.startswith("skipped")), failed[0])
        print(f"bench: error: {len(failed)} of {len(todo)} jobs failed; first: {todo[first.job].label}: {first.message}",
              file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    a = _parser().parse_args(argv)
    from bench.errors import BenchError

    try:
        if a.cmd == "ls":
            cmd_ls()
        elif a.cmd == "sweep":
            return cmd_sweep(a)
        elif a.cmd == "leaderboard":
            path = write_leaderboard(Path(a.out), Path(a.output) if a.output else None)
            print(path.read_text())
            print(f"written to {path}", file=sys.stderr)
        else:
            cmd_run(a)
    except BenchError as e:
        print(f"bench: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # disk full, permissions: the environment, not a bug
        print(f"bench: error: {e.strerror or e}: {e.filename or ''}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted; finished records are kept, rerun the same command to resume", file=sys.stderr)
        return 130
    return 0
