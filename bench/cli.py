"""Command line: ``python -m bench run | sweep | ls | leaderboard``.

The whole flow in one place. ``run`` is a one-group sweep: its flags are resolved into typed
runs (``bench.spec.run.grid``), a ``sweep`` reads them from a spec file (``bench.spec.sweep``);
then both take the same path (``execute``): the job plan (``bench.spec.plan``), the checks
that need no training (``bench.core.preflight``), the jobs run by an executor
(``bench.core.executors``), each a ``Runner`` call (``bench.core.runner``) that builds or
reuses a candidate, judges it with a suite and writes a record (``bench.core.records``); then
the leaderboard from the records. Bad input ends with one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

DEFAULT_OUT = "runs"


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line too, like every other bad input."""

    def error(self, message: str):
        self.exit(2, f"bench: error: {message} (see 'bench {self.prog.split()[-1]} --help')\n")


def _executor_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", default="local", help="local (in this process), pool (local processes) or ray")
    p.add_argument("--workers", type=int, default=0,
                   help="parallel jobs (default: cores / cpus-per-job, at most the number of jobs)")
    p.add_argument("--cpus-per-job", type=int, default=0, help="torch threads (and Ray CPUs) per job")
    p.add_argument("--ray-address", help="an existing Ray cluster (default: start a local instance)")


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="bench", description="Robust compression bench for BERT-family models.")
    ap.add_argument("--debug", action="store_true", help="a failed job shows its whole traceback (BENCH_DEBUG=1)")
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
    run.add_argument("--data-dir", help="folder of the real data files (docs/data.md; default $BENCH_DATA, else ~/.local/share/robust-compression-bench/data)")
    run.add_argument("--out", default=DEFAULT_OUT, help="output directory for records, predictions, artifacts")
    run.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    run.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="bf16 autocast or fp32")
    run.add_argument("--compile", action="store_true", help="torch.compile the training forward (worth it on a GPU)")
    run.add_argument("--max-examples", type=int, help="cap every split at N examples (stratified, seeded)")
    run.add_argument("--force", action="store_true", help="evaluate again even if the record exists (cached models are reused; delete OUT/artifacts/... to retrain)")
    run.add_argument("--quiet", action="store_true", help="no progress bars or progress lines")
    _executor_flags(run)

    sw = sub.add_parser("sweep", help="run a spec file's grid of methods x params x sparsities x tasks x suites x seeds")
    sw.add_argument("spec", help="a TOML sweep spec (see sweeps/)")
    sw.add_argument("--out", default=DEFAULT_OUT, help="output directory (shared by every worker)")
    _executor_flags(sw)
    sw.add_argument("--device", choices=["cpu", "cuda"], help="run every job on this device (default: the spec's)")
    sw.add_argument("--compile", action="store_true", help="torch.compile every job's training forward")
    sw.add_argument("--dry-run", action="store_true", help="show the jobs, their dependencies and an estimate; run nothing")
    for key in ("method", "suite", "task"):
        sw.add_argument(f"--{key}", action="append", help=f"only the spec's runs of this {key} (repeatable)")
    sw.add_argument("--seed", action="append", type=int,
                    help="only the spec's runs of this seed (repeatable): a long study, seed by seed")
    sw.add_argument("--quiet", action="store_true", help="no progress output")

    ls = sub.add_parser("ls", help="list methods, suites and tasks with their parameters")
    ls.add_argument("--markdown", action="store_true", help="as the Markdown reference (docs/reference.md)")

    lb = sub.add_parser("leaderboard", help="regenerate the Markdown leaderboard from records")
    lb.add_argument("--out", action="append", help="output directory whose records/ to read (repeatable: one "
                    "table per task across studies; a folder with a studies.toml stands for the studies "
                    "it names; default runs/)")
    lb.add_argument("--output", help="Markdown file to write (default: OUT/LEADERBOARD.md)")

    rs = sub.add_parser("rescore", help="recompute every metric of every record from its predictions and the data")
    rs.add_argument("out", nargs="+", help="output directories whose records/ to check (for example results/*)")
    rs.add_argument("--data-dir", help="where the evaluation data is, if not where the runs found it")
    return ap


def cmd_ls(markdown: bool = False) -> None:
    from bench.registry import METHODS, SUITES, TASKS
    from bench.spec.params import describe

    if markdown:
        print(reference_markdown())
        return
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


def reference_markdown() -> str:
    """Every registered method, suite and task with its parameters: ``docs/reference.md``."""
    from bench.registry import METHODS, SUITES, TASKS
    from bench.spec.params import describe

    def params(cls, flag: str) -> list[str]:
        if cls is None:
            return ["No parameters.", ""]
        rows = [f"| `{n}` | {t.replace('|', ' or ')} | `{d!r}` |" for n, t, d in describe(cls)]
        return [f"| {flag} | type | default |", "|---|---|---|", *rows, ""]

    out = ["# Reference", "", "Every method, suite and task the harness has registered, with its parameters. "
           "Generated by `bench ls --markdown`; do not edit by hand (a test compares it with the registry).", ""]
    out += ["## Methods", ""]
    for name in METHODS.names():
        m = METHODS.get(name)
        kind = f"Sparse: takes `--sparsity` (default {m.default_sparsity:g})." if m.sparse else "Dense."
        out += [f"### `{name}`", "", f"{m.description}. {kind}", "", *params(m.Params, "`--param`")]
    out += ["## Suites", ""]
    for name in SUITES.names():
        s = SUITES.get(name)
        out += [f"### `{name}`", "", s.description + ".", "", *params(s.Params, "`--suite-param`")]
    out += ["## Tasks", "", "| task | what it is |", "|---|---|"]
    out += [f"| `{name}` | {TASKS.get(name).description.replace('|', '/')} |" for name in TASKS.names()]
    return "\n".join(out) + "\n"


STUDIES = "studies.toml"


def _studies(out: Path) -> list[Path]:
    """A folder with a ``studies.toml`` (``studies = ["../rmc", ...]``, relative to it) stands for
    those study folders: its LEADERBOARD.md is their shared table, one per task (issue 27, item
    5), and it rebuilds from them as a study's does from its records."""
    import tomllib

    from bench.errors import BenchError

    path = out / STUDIES
    if not path.is_file():
        return [out]
    try:
        names = tomllib.loads(path.read_text()).get("studies")
    except tomllib.TOMLDecodeError as e:
        raise BenchError(f"{path}: needs studies = [\"../<study>\", ...], a list of folders (not TOML: {e})") from None
    if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
        raise BenchError(f"{path}: needs studies = [\"../<study>\", ...], a list of folders")
    missing = [n for n in names if not (out / n / "records").is_dir()]
    if missing:
        raise BenchError(f"{path}: no records/ folder in {', '.join(missing)}")
    return [out / n for n in names]


def _dirty(record) -> bool:
    return record.provenance.get("git", {}).get("dirty") is not False


def write_leaderboard(out: Path | list[Path], output: Path | None = None) -> tuple[Path, list[str]]:
    """OUT/records (and OUT/references) -> Markdown; needs no torch. Several OUTs (studies)
    give one table per task and backbone with every candidate of them all. Only records that
    pass ``leaderboard.evidence.check`` are shown; returns the file and one line for each record
    left out (said on stderr here, so that the caller can exit non-zero once the rest is done)."""
    from bench.core.records import load_references, same_results, write_atomic
    from bench.errors import BenchError
    from leaderboard.build import build
    from leaderboard.evidence import check

    given = list({o.resolve(): o for o in (out if isinstance(out, list) else [out])}.values())  # each folder once
    if len(given) > 1 and output is None:
        raise BenchError("several --out directories need --output FILE for their shared leaderboard")
    target = output or given[0] / "LEADERBOARD.md"
    outs = list({s.resolve(): s for o in given for s in _studies(o)}.values())
    found = check([o / "records" for o in outs])
    for line in found.unverified:
        print(f"bench: warning: shown but not re-scored here: {line}", file=sys.stderr)
    for line in found.rejected:
        print(f"bench: error: left out of the leaderboard: {line}", file=sys.stderr)
    records = {}
    for r in found.records:
        seen = records.setdefault(r.run_id, r)
        if seen is r:
            continue
        if not same_results(seen, r):
            raise BenchError(f"run {r.run_id} is in {seen.where} and {r.where} with different results: keep one")
        if _dirty(seen) and not _dirty(r):  # one run in two studies: the copy made from a clean tree
            records[r.run_id] = r
    records = list(records.values())
    write_atomic(target, build(records, markdown=target, references=[x for o in outs for x in load_references(o)]))
    return target, found.rejected


def _writable(out: Path) -> None:
    from bench.errors import BenchError

    try:  # a probe file of its own: a shared name races with another run on the same folder
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise BenchError(f"output directory {out} is not writable: {e.strerror}") from e


def execute(runs: list, out: Path, *, executor: str = "local", workers: int = 0, cpus_per_job: int = 0,
            ray_address: str | None = None, force: bool = False, dry_run: bool = False, quiet: bool = False,
            fail_fast: bool = False, throughput=None, what: str = "[bench] run") -> list:
    """The one path of ``run`` and ``sweep``: plan the runs' jobs, check what can be checked
    before anything trains, run what is not done, and return the outcomes."""
    from bench.core.estimate import describe_plan, finished
    from bench.core.executors import check_installed, run_jobs
    from bench.core.preflight import preflight
    from bench.core.provenance import git_state
    from bench.core.runner import Runner
    from bench.errors import BenchError
    from bench.spec.plan import pending, plan

    check_installed(executor)
    if workers < 0 or cpus_per_job < 0:
        raise BenchError("--workers and --cpus-per-job must be at least 0")
    jobs = plan(runs)
    runner = Runner(out, progress=False, log=lambda m: None)
    done, unknown = finished(jobs, runner)
    if dry_run:
        print(describe_plan(jobs, done, unknown, runner, throughput))
        return []
    requested = {jid for jid, job in jobs.items() if job.kind == "evaluate" and job.spec in runs}
    if force:
        done -= requested
    todo = pending(jobs, done)
    preflight(todo.values(), runner, check_devices=not ray_address)  # a cluster's GPUs are its own business
    _writable(out)
    log = (lambda m: None) if quiet else (lambda m: print(m, file=sys.stderr))
    log(f"{what}: {len(jobs)} jobs, {len(todo)} to run, {len(jobs) - len(todo)} done or not needed")
    if todo and (git := git_state())["dirty"]:  # said before hours of work, not found in the records after
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


def _records(runs: list, out: Path) -> list:
    from bench.core.records import load_record, record_path
    from bench.core.runner import Runner

    runner = Runner(out, progress=False, log=lambda m: None)
    paths = [record_path(out, runner.run_id(spec)) for spec in runs]
    return [load_record(p) for p in paths if p.is_file()]


def cmd_run(a: argparse.Namespace) -> None:
    from bench.spec.params import split_assignments
    from bench.spec.run import grid

    runs = grid(a.method, a.suite, a.sparsity, a.seed, task=a.task, backbone=a.backbone,
                params=split_assignments(a.param), suite_params=split_assignments(a.suite_param),
                data_dir=a.data_dir, max_examples=a.max_examples, device=a.device, precision=a.precision,
                compile=a.compile)
    out = Path(a.out)
    execute(runs, out, executor=a.executor, workers=a.workers, cpus_per_job=a.cpus_per_job,
            ray_address=a.ray_address, force=a.force, quiet=a.quiet, fail_fast=True)
    records = _records(runs, out)
    for record in records:
        shown = {k: v if v is None else round(v, 4) for k, v in record.metrics.items() if k.count("/") <= 1}
        print(f"{record.run_id}: {shown}")
    print(f"leaderboard: {write_leaderboard(out)[0]}")
    if warning := degenerate(records):
        print(f"bench: warning: {warning}", file=sys.stderr)


def cmd_sweep(a: argparse.Namespace) -> int:
    from bench.core.records import write_references
    from bench.errors import BenchError
    from bench.spec.sweep import load_spec, runs

    spec = load_spec(Path(a.spec))
    only = {k: getattr(a, k) for k in ("method", "suite", "task", "seed") if getattr(a, k)}
    out = Path(a.out)
    todo = runs(spec, only, check_backbones=not a.dry_run, device=a.device, compile=a.compile)
    outcomes = execute(todo, out, executor=a.executor, workers=a.workers, cpus_per_job=a.cpus_per_job,
                       ray_address=a.ray_address, dry_run=a.dry_run, quiet=a.quiet, throughput=spec.throughput,
                       what=f"[sweep] {spec.path}")
    if a.dry_run:
        return 0
    write_references(out, spec.path.stem, spec.references)
    table_failed = False
    if (out / "records").is_dir():
        try:  # a table that cannot be written must not hide which jobs failed
            path, left_out = write_leaderboard(out)
            print(f"leaderboard: {path}")
            table_failed = bool(left_out)
        except BenchError as e:
            print(f"bench: error: no leaderboard: {e}", file=sys.stderr)
            table_failed = True
    failed = [o for o in outcomes if not o.ok]
    if failed:
        first = next((o for o in failed if not o.message.startswith("skipped")), failed[0])
        print(f"bench: error: {len(failed)} of {len(outcomes)} jobs failed; first: {first.label}: {first.message}",
              file=sys.stderr)
        return 2
    if table_failed:
        return 2
    if failed_study := degenerate(_records(todo, out)):  # a control that did not train fails its study
        print(f"bench: error: {failed_study}", file=sys.stderr)
        return 2
    return 0


def cmd_rescore(a: argparse.Namespace) -> int:
    from bench.core.rescore import rescore, summary

    bad = 0
    for out in a.out:
        results = rescore(Path(out), a.data_dir)
        print(summary(Path(out), results))
        bad += sum(r.status in ("mismatch", "unreadable") for r in results)
    if bad:
        print(f"bench: error: {bad} records do not re-score to their numbers or are unreadable", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    a = _parser().parse_args(argv)
    if a.debug:
        os.environ["BENCH_DEBUG"] = "1"  # read by the jobs, in this process or in pool and Ray workers
    from bench.errors import BenchError

    try:
        if a.cmd == "ls":
            cmd_ls(a.markdown)
        elif a.cmd == "sweep":
            return cmd_sweep(a)
        elif a.cmd == "rescore":
            return cmd_rescore(a)
        elif a.cmd == "leaderboard":
            path, left_out = write_leaderboard([Path(o) for o in a.out or [DEFAULT_OUT]], Path(a.output) if a.output else None)
            print(path.read_text())
            print(f"written to {path}", file=sys.stderr)
            if left_out:
                print(f"bench: error: {len(left_out)} records left out of the leaderboard (listed above)", file=sys.stderr)
                return 2
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
