"""The README's generated tables: ``bench headline``.

The headline is the main table of ``results/quickstart`` (README command 1's comparison on the
embedded default), without timing columns, whose values vary from machine to machine. The
studies table has one row per ``results/<study>`` folder: its findings page, how many records
it holds over which seeds and the verdicts of its claims table (``leaderboard.claims``); every
record counted has its per-example predictions, checked against their checksum. A test fails when the README's
copies differ from what the records give, so no verdict or count is typed by hand.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from bench.errors import BenchError
from bench.store.atomic import write_atomic
from leaderboard.build import frame
from leaderboard.candidate import shown
from leaderboard.claims import RULE, Result, measure
from leaderboard.claims_file import PLAN, load_claims, read_plan
from leaderboard.evidence import checked_records
from leaderboard.legend import literal
from leaderboard.sections import sections
from leaderboard.table import main

START, END = "<!-- headline:start -->", "<!-- headline:end -->"
STUDIES_START, STUDIES_END = "<!-- studies:start -->", "<!-- studies:end -->"
STUDY = "quickstart"
TIMED = ("ex/s", "speed-up", "ms bs1")
LEFT_OUT = ("sparsity % (achieved)", "seeds")  # the full table has them; here the header line says the seeds


def render(results: Path) -> str:
    records = checked_records(results / STUDY / "records")
    sec = sections(records)[0]
    df = frame(main(sec))
    df = df[[c for c in df.columns if not c.startswith(TIMED) and c not in LEFT_OUT]]
    task = records[0].task if records else "?"
    seeds = ",".join(map(str, sorted({r.seed for r in records})))
    backbone = literal(shown(records[0].backbone)) if records else "?"
    return (f"Task {literal(task)}, backbone {backbone}, {len(records)} records, seeds {seeds} "
            f"([full table](results/{STUDY}/LEADERBOARD.md), [findings](results/{STUDY}/findings.md)):\n\n"
            + df.to_markdown(index=False, disable_numparse=True))


def _group(result: Result) -> str:
    """A verdict without its per-claim detail: the rule's row name ("not tested: <why>",
    "inconclusive (k seeds)" and "underpowered (MDE x pts)" grouped by their row)."""
    return RULE[result.row - 1][1]


def _verdicts(study: Path, records) -> str:
    if not (study / "claims.toml").is_file():
        return "no claims table yet"
    plan = read_plan(study / PLAN)
    counts = Counter(_group(r) for r in measure(load_claims(study / "claims.toml"), records, plan))
    return "; ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def render_studies(results: Path) -> str:
    lines = ["| study | findings | records | seeds | claims |", "|---|---|---|---|---|"]
    for study in sorted(p for p in results.iterdir() if (p / "findings.md").is_file()):
        records = checked_records(study / "records") if (study / "records").is_dir() else []
        title = (study / "findings.md").read_text().partition("\n")[0].removeprefix("# ").strip()
        seeds = ",".join(str(s) for s in sorted({r.seed for r in records})) or "–"
        lines.append(f"| {study.name} | [{title}](results/{study.name}/findings.md) | {len(records)} | {seeds} | "
                     f"{_verdicts(study, records)} |")
    return "\n".join(lines)


def splice(readme: str, text: str, start: str = START, end: str = END) -> str:
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pattern.search(readme):
        raise BenchError(f"README.md has no {start} ... {end} block")
    return pattern.sub(lambda m: f"{start}\n{text}\n{end}", readme)


def generate(readme: str, results: Path) -> str:
    """The README with both generated blocks rewritten from ``results``."""
    readme = splice(readme, render(results))
    return splice(readme, render_studies(results), STUDIES_START, STUDIES_END)


def write_readme(root: Path) -> Path:
    """Rewrite the generated blocks of ``root``'s README from its results (``bench headline``)."""
    readme = root / "README.md"
    write_atomic(readme, generate(readme.read_text(), root / "results"))
    return readme
