"""Command line: ``python -m bench run | sweep | ls | rescore | conformance`` and the commands other
packages register (``leaderboard``, ``claims``, ``headline``, ``publish``).

The whole flow in one place. ``run`` is a one-group sweep: its flags are resolved into typed
runs (``bench.spec.run.grid``), a ``sweep`` reads them from a spec file (``bench.spec.sweep``);
then both take the same path (``bench.core.batch.run_batch``): the job plan, the checks that
need no training, the jobs run by an executor (``bench.core.executors``), each a ``Runner``
call (``bench.core.runner``) that builds or reuses a candidate, judges it with a suite and
writes a record (``bench.store.records``); then the leaderboard from the records. Bad input
ends with one line on stderr, exit 2.
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
        self.exit(2, f"bench: error: {message} (see '{self.prog} --help')\n")


def _executor_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", default="local", help="local (in this process), pool (local processes) or ray")
    p.add_argument("--workers", type=int, default=0,
                   help="parallel jobs (default: cores / cpus-per-job, at most the number of jobs)")
    p.add_argument("--cpus-per-job", type=int, default=0, help="torch threads (and Ray CPUs) per job")
    p.add_argument("--ray-address", help="an existing Ray cluster (default: start a local instance)")


def _run_fields(p: argparse.ArgumentParser) -> None:
    """``bench run``'s options, one per field of ``RunSpec`` (its metadata says how): a grid axis
    takes several values, a table of parameters is KEY=VALUE and repeatable."""
    from bench.spec.run import DEFAULTS, FIELDS

    for f in FIELDS:  # values stay text: resolve types them as a sweep spec's (bench.spec.run.check_field)
        kind, flag = f.metadata["kind"], "--" + f.name.replace("_", "-")
        shown = f" (default: {DEFAULTS[f.name]})" if kind != "flag" and DEFAULTS.get(f.name) not in (None, "") else ""
        if kind == "table":
            p.add_argument(flag.removesuffix("s"), dest=f.name, action="append", default=[], metavar="KEY=VALUE",
                           help=f.metadata["help"])
        elif kind == "flag":
            p.add_argument(flag, action="store_true", help=f.metadata["help"])
        else:
            choices = f.metadata["choices"]
            p.add_argument(flag, nargs="+" if f.metadata["axis"] else None, required=f.name not in DEFAULTS,
                           metavar="{" + ",".join(choices) + "}" if choices else None, help=f.metadata["help"] + shown)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="bench", description="Robust compression bench for BERT-family models.")
    ap.add_argument("--debug", action="store_true", help="a failed job shows its whole traceback (BENCH_DEBUG=1)")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="build candidates with a method and judge them with a suite")
    _run_fields(run)
    run.add_argument("--out", default=DEFAULT_OUT, help="output directory for records, predictions, artifacts")
    run.add_argument("--force", action="store_true", help="evaluate again even if the record exists "
                     "(cached models are reused; delete OUT/artifacts/... to retrain)")
    run.add_argument("--quiet", action="store_true", help="no progress bars or progress lines")
    run.add_argument("--dry-run", action="store_true", help="show the jobs, their dependencies and an estimate; run nothing")
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
    sw.add_argument("--seed", action="append",
                    help="only the spec's runs of this seed (repeatable): a long study, seed by seed")
    sw.add_argument("--sparsity", action="append",
                    help="only the spec's runs of this target sparsity (repeatable), with what they need")
    sw.add_argument("--param", action="append", metavar="KEY=VALUE",
                    help="only the spec's runs whose method parameter KEY is VALUE (KEY=a,b: either; repeatable), "
                         "with what they need")
    sw.add_argument("--quiet", action="store_true", help="no progress output")

    ls = sub.add_parser("ls", help="list methods, suites and tasks with their parameters")
    ls.add_argument("--markdown", action="store_true", help="as the Markdown reference (docs/reference.md)")

    rs = sub.add_parser("rescore", help="recompute every metric of every record from its predictions and the data")
    rs.add_argument("out", nargs="+", help="output directories whose records/ to check (for example results/*)")
    rs.add_argument("--data-dir", help="where the evaluation data is, if not where the runs found it")

    ex = sub.add_parser("export", help="save a candidate as a standard Hugging Face checkpoint directory")
    ex.add_argument("source", help="a run record (records/*.json) or a cached candidate's directory (artifacts/*)")
    ex.add_argument("--to", required=True, help="the new checkpoint directory")

    mg = sub.add_parser("migrate", help="rewrite records of an older schema as the current one, and write the clusters "
                        "their sets declare (docs/records.md)")
    mg.add_argument("out", nargs="+", help="output directories whose records/ to rewrite (for example results/*)")

    sub.add_parser("conformance", help="check every published hyper-parameter against its paper; write docs/recipes.md")

    data = sub.add_parser("data", help="the real evaluation files: list them, fetch them, verify a folder (docs/data.md)")
    data.add_argument("action", nargs="?", default="list", choices=["list", "fetch", "verify"])
    data.add_argument("names", nargs="*", help="files or folders (hans, fever_symmetric/v2_dev.jsonl, ...); default all")
    data.add_argument("--dir", help="the data folder (default $BENCH_DATA, else ~/.local/share/robust-compression-bench/data)")
    data.add_argument("--mirror", help="fetch from this address, which serves the data folder's layout, instead")
    data.add_argument("--plan", action="store_true", help="with fetch: list what would be downloaded, from where and how large")

    from bench.errors import BenchError
    from bench.registry import COMMANDS

    try:
        brought = COMMANDS.names()  # the commands other packages bring (the leaderboard's)
    except BenchError:  # none installed: the harness's own commands still work
        brought = []
    for name in brought:
        command = COMMANDS.get(name)
        command.arguments(sub.add_parser(name, help=command.help))
    return ap


def write_leaderboard(out: Path) -> tuple[Path, list[str]]:
    """``out``'s leaderboard, by the ``leaderboard`` command's package (found in the registry:
    the harness does not import the leaderboard); returns the file and the records left out."""
    from bench.registry import COMMANDS

    return COMMANDS.get("leaderboard").write(out)


def cmd_run(a: argparse.Namespace) -> None:
    from bench.core.batch import degenerate, records_of, run_batch
    from bench.spec.params import split_assignments
    from bench.spec.run import FIELDS, grid

    values = {f.name: getattr(a, f.name) for f in FIELDS if getattr(a, f.name) not in (None, [])}  # 0 is a value
    values |= {k: split_assignments(values[k]) for k in ("params", "suite_params") if k in values}
    runs = grid(check_backbone=not a.dry_run, **values)  # a dry run may plan for another machine, as sweep's
    out = Path(a.out)
    run_batch(runs, out, executor=a.executor, workers=a.workers, cpus_per_job=a.cpus_per_job,
              ray_address=a.ray_address, force=a.force, dry_run=a.dry_run, quiet=a.quiet, fail_fast=True)
    if a.dry_run:
        return
    records = records_of(runs, out)
    for record in records:
        shown = {k: v if v is None else round(v, 4) for k, v in record.metrics.items() if k.count("/") <= 1}
        print(f"{record.run_id}: {shown}")
    print(f"leaderboard: {write_leaderboard(out)[0]}")
    if warning := degenerate(records):
        print(f"bench: warning: {warning}", file=sys.stderr)


def cmd_sweep(a: argparse.Namespace) -> int:
    from bench.core.batch import degenerate, records_of, run_batch
    from bench.errors import BenchError
    from bench.spec.params import split_assignments
    from bench.spec.sweep import load_spec, runs
    from bench.store.references import write_references

    spec = load_spec(Path(a.spec))
    only = {k: getattr(a, k) for k in ("method", "suite", "task", "seed", "sparsity") if getattr(a, k)}
    out = Path(a.out)
    todo = runs(spec, only, check_backbones=not a.dry_run, device=a.device, compile=a.compile,
                params=split_assignments(a.param or []))
    outcomes = run_batch(todo, out, executor=a.executor, workers=a.workers, cpus_per_job=a.cpus_per_job,
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
    if failed_study := degenerate(records_of(todo, out)):  # a control that did not train fails its study
        print(f"bench: error: {failed_study}", file=sys.stderr)
        return 2
    return 0


def cmd_data(a: argparse.Namespace) -> int:
    """``bench data``: each file with its state in the data folder, its pinned checksum and
    where it comes from; ``fetch`` gets them from their official distributions (``--plan``: what
    it would download first); ``verify`` checks a folder and fails when a file is missing or
    not the one listed."""
    from bench.data.fetch import fetch, plan
    from bench.data.places import data_home
    from bench.data.sources import chosen, status

    folder = Path(a.dir).expanduser() if a.dir else data_home()
    files = chosen(a.names)
    if a.action == "fetch":
        if a.plan:
            print("\n".join(plan(files, folder)))
            return 0
        problems = fetch(files, folder, a.mirror or "", log=lambda line: print(line, file=sys.stderr))
        for line in problems:
            print(f"bench: error: {line}", file=sys.stderr)
        return 2 if problems else 0
    states = {f.path: status(f, folder) for f in files}
    print(f"data folder: {folder}")
    for f in files:
        if f.origin is None:
            how = f"by hand: {f.source}"
        else:
            how = f"fetch: {f.origin.url.split('/')[2]}" + (f" ({f.origin.member})" if f.origin.member else "")
        pin = f.sha256[:12] if f.sha256 else "(not pinned)"
        shown = f"{f.path} -> {f.official}" if states[f.path] == "official" else f.path
        print(f"  {states[f.path]:<8} {shown:<44} {pin:<12} {f.licence:<38} {how}")
    if a.action == "verify":
        differ = [p for p, s in states.items() if s == "differs"]
        missing = [p for p, s in states.items() if s == "missing"]
        print(f"{sum(s in ('ok', 'official') for s in states.values())} verified, {len(differ)} differ, {len(missing)} missing")
        for path in differ:
            print(f"bench: error: {folder / path} is not the file listed (its checksum differs)", file=sys.stderr)
        if missing:
            print(f"bench: error: {len(missing)} files missing from {folder}: bench data fetch {' '.join(missing)}",
                  file=sys.stderr)
        return 2 if differ or missing else 0
    return 0


def cmd_rescore(a: argparse.Namespace) -> int:
    from bench.core.rescore import rescore, summary
    from bench.store.records import study_folders

    bad, data = 0, {}  # the evaluation sets, built once for every folder that shares them
    folders = {f.resolve(): f for out in a.out for f in study_folders(Path(out))}  # studies.toml: its studies
    for out in folders.values():
        results = rescore(out, a.data_dir, data)
        print(summary(Path(out), results))
        bad += sum(r.status in ("mismatch", "unreadable") for r in results)
    if bad:
        print(f"bench: error: {bad} records do not re-score to their numbers or are unreadable", file=sys.stderr)
        return 2
    return 0


def cmd_migrate(a: argparse.Namespace) -> None:
    from bench import __version__
    from bench.core.upgrade import add_clusters, migrate
    from bench.store.records import study_folders

    for out in {f.resolve(): f for o in a.out for f in study_folders(Path(o))}.values():
        rewritten, current = migrate(out, __version__)
        written, problems = add_clusters(out)
        print(f"{out}: {rewritten} records rewritten, {current} already current"
              + (f"; clusters kept: {', '.join(p.name for p in written)}" if written else ""))
        for line in problems:
            print(f"bench: warning: clusters not checked for {line}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    a = _parser().parse_args(argv)
    if a.debug:
        os.environ["BENCH_DEBUG"] = "1"  # read by the jobs, in this process or in pool and Ray workers
    from bench.errors import BenchError

    try:
        if a.cmd == "ls":
            from bench.catalog import listing, reference_markdown

            if a.markdown:
                print(reference_markdown(), end="")
            else:
                listing()
        elif a.cmd == "sweep":
            return cmd_sweep(a)
        elif a.cmd == "rescore":
            return cmd_rescore(a)
        elif a.cmd == "data":
            return cmd_data(a)
        elif a.cmd == "migrate":
            cmd_migrate(a)
        elif a.cmd == "export":
            from bench.core.cache import export

            print(f"exported {export(Path(a.source), Path(a.to))} (labels: the task's; load it with transformers, "
                  f"or judge it with --method checkpoint --backbone {a.to})")
        elif a.cmd == "conformance":
            from bench.spec.conformance import write

            return 2 if write() else 0
        elif a.cmd != "run":
            from bench.registry import COMMANDS

            return COMMANDS.get(a.cmd).run(a)
        else:
            cmd_run(a)
    except BenchError as e:
        print(f"bench: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted; finished records are kept, rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as e:  # a full disk, a plug-in's check or Params, or the harness's own bug: one line (--debug: traceback)
        from bench.registry import failure

        print(f"bench: error: {failure(e)}", file=sys.stderr)
        return 2
    return 0
