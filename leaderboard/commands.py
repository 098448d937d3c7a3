"""The leaderboard's ``bench`` subcommands, registered through the ``bench.commands`` entry
points (the harness's command line knows them only through its registry):

- ``bench leaderboard``: a study's (or several studies') Markdown tables from their records;
- ``bench claims``: a study's claims table, spliced into its findings page;
- ``bench plan``: what a claims file's registered design can detect, from a pilot's records;
- ``bench headline``: the README's headline and studies tables;
- ``bench publish``: every published table at once (each study's leaderboard and claims, the
  cross-study table, the README's tables, the site, docs/recipes.md and docs/reference.md), as a reviewer
  regenerates them to compare with the committed copies.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.api import Command
from bench.errors import BenchError
from bench.registry import COMMANDS
from bench.store.atomic import write_atomic
from bench.store.records import STUDIES, study_folders

DEFAULT_OUT = "runs"


def write(out: Path | list[Path], output: Path | None = None) -> tuple[Path, list[str]]:
    """OUT/records (and OUT/references) -> Markdown; needs no torch. Several OUTs (studies)
    give one table per task and backbone with every candidate of them all. Only records that
    pass ``leaderboard.evidence.check`` are shown; returns the file and one line for each record
    left out (said on stderr here, so that the caller can exit non-zero once the rest is done)."""
    from bench.store.references import load_references
    from leaderboard.build import build  # pandas and plots: only when a table is written
    from leaderboard.evidence import check, merged

    given = list({o.resolve(): o for o in (out if isinstance(out, list) else [out])}.values())  # each folder once
    if len(given) > 1 and output is None:
        raise BenchError("several --out directories need --output FILE for their shared leaderboard")
    target = output or given[0] / "LEADERBOARD.md"
    outs = list({s.resolve(): s for o in given for s in study_folders(o)}.values())
    found = check([o / "records" for o in outs])
    for line in found.unverified:
        print(f"bench: warning: shown but not re-scored here: {line}", file=sys.stderr)
    for line in found.rejected:
        print(f"bench: error: left out of the leaderboard: {line}", file=sys.stderr)
    records = merged(found.records)
    write_atomic(target, build(records, where=target, references=[x for o in outs for x in load_references(o)]))
    return target, found.rejected


@COMMANDS.register("leaderboard")
class Leaderboard(Command):
    help = "regenerate the Markdown leaderboard from records"

    def arguments(self, p) -> None:
        p.add_argument("--out", action="append", help="output directory whose records/ to read (repeatable: one "
                       "table per task across studies; a folder with a studies.toml stands for the studies "
                       "it names; default runs/)")
        p.add_argument("--output", help="Markdown file to write (default: OUT/LEADERBOARD.md)")

    def write(self, out: Path | list[Path], output: Path | None = None) -> tuple[Path, list[str]]:
        return write(out, output)

    def run(self, a) -> int:
        path, left_out = write([Path(o) for o in a.out or [DEFAULT_OUT]], Path(a.output) if a.output else None)
        print(path.read_text())
        print(f"written to {path}", file=sys.stderr)
        if left_out:
            print(f"bench: error: {len(left_out)} records left out of the leaderboard (listed above)", file=sys.stderr)
            return 2
        return 0


@COMMANDS.register("claims")
class Claims(Command):
    help = "measure a study's claims (claims.toml) on its records and write the table into its findings.md"

    def arguments(self, p) -> None:
        p.add_argument("study", nargs="+", help="study folders (results/<study>)")
        p.add_argument("--bootstrap", action="store_true", help="also print each claim's interval by the two-way "
                       "bootstrap over seeds and example clusters beside the table's (a check; writes nothing)")

    def run(self, a) -> int:
        from leaderboard.claims import study_results
        from leaderboard.claims_table import bootstrap_check, write_table

        for study in a.study:
            if a.bootstrap:
                print(bootstrap_check(study_results(Path(study))))
            else:
                print(f"claims table written to {write_table(Path(study))}", file=sys.stderr)
        return 0


@COMMANDS.register("plan")
class Plan(Command):
    help = "what a claims file's registered design can detect (MDE at 80 %% power) from a pilot's records"

    def arguments(self, p) -> None:
        p.add_argument("claims", help="a claims.toml (or its study folder)")
        p.add_argument("--pilot", nargs="+", help="folders of pilot records (a study folder or its records/; default: "
                       "the claims file's own study, which makes the plan post hoc)")
        p.add_argument("--register", action="store_true", help="write the plan to plan.json beside the claims file "
                       "(commit it before the records: it registers the design)")

    def run(self, a) -> int:
        from leaderboard.plan import plan, register, render, summary

        path = Path(a.claims)
        path = path / "claims.toml" if path.is_dir() else path
        if not path.is_file():
            raise BenchError(f"no claims file {path}")
        pilot = [Path(x) for x in a.pilot] if a.pilot else [path.parent]
        for folder in pilot:
            if not folder.is_dir():
                raise BenchError(f"pilot folder {folder} does not exist")
        made = plan(path, pilot)
        print(render(*made[:2]))
        print(f"\n{summary(made[1])}")
        if a.register:
            print(f"plan registered in {register(path, pilot, made)}", file=sys.stderr)
        return 0


@COMMANDS.register("headline")
class Headline(Command):
    help = "regenerate the README's headline and studies tables from results/"

    def arguments(self, p) -> None:
        p.add_argument("--root", default=".", help="the project's root (README.md and results/)")

    def run(self, a) -> int:
        from leaderboard.headline import write_readme

        print(f"headline written to {write_readme(Path(a.root))}", file=sys.stderr)
        return 0


@COMMANDS.register("publish")
class Publish(Command):
    help = ("regenerate every published table: each study's leaderboard and claims, the README, docs/site/, "
            "docs/recipes.md, docs/reference.md, docs/schema/")

    def arguments(self, p) -> None:
        p.add_argument("--root", default=".", help="the project's root (README.md, results/, docs/, sweeps/)")

    def run(self, a) -> int:
        from bench.catalog import reference_markdown
        from bench.spec import conformance
        from bench.spec.schemas import write as write_schemas
        from leaderboard.claims_table import write_table
        from leaderboard.headline import write_readme
        from leaderboard.site import SITE, write_site

        root, left_out = Path(a.root), []
        for study in sorted(p.parent for p in (root / "results").glob("*/records")):
            if any((study / "records").glob("*.json")):  # a study registered before its first record has no table yet
                left_out += write(study)[1]
            if (study / "claims.toml").is_file():
                write_table(study)
        for group in sorted(p.parent for p in (root / "results").glob(f"*/{STUDIES}")):
            left_out += write(group)[1]
        write_readme(root)
        left_out += write_site(sorted({p.parent for p in (root / "results").glob("*/findings.md")}
                                      | {p.parent for p in (root / "results").glob(f"*/{STUDIES}")}), root / SITE, browse=False)[1]
        bad = conformance.write(root)
        write_atomic(root / "docs" / "reference.md", reference_markdown())
        write_schemas(root)
        print(f"published the tables under {root}", file=sys.stderr)
        if left_out or bad:
            raise BenchError(f"{len(left_out)} records left out and {len(bad)} recipe checks failing (listed above)")
        return 0
