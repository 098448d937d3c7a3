"""Build the leaderboard Markdown from run records (and nothing else; no torch).

One leaderboard per (task, backbone): a row per candidate (method, parameters, sparsity), every
suite's main columns side by side (clean ID, each OOD set, F_bias, Aua% and Suc% per attack
recipe, speed-up), then sparsity, non-zero parameters and seeds. Which metric goes in which
column, and how it is shown, is what each record's suite declared (``Column``); a metric no
record declares appears under its own name in "other metrics". Details tables follow (ID halves,
OOD cells, attacks, efficiency), the checkpoint each seed kept, then the paired tests against
the reference.

Numbers over seeds are labelled by ``leaderboard.stats``: mean ± sample std, with a t-interval
from 3 seeds (intersected with [0, 100] for a percentage, with [0, inf) for a non-negative
quantity: a latency, a size, a speed-up; BCa bootstrap from 10). Each candidate is compared with
the reference (the full standard-CE model of the same seed, linked from the records; for suites
that record no reference, such as an attack study, the dense ``finetune (ce)`` row with the
fewest settings) over the seeds both have, paired by seed, with the examples' sampling variance
in the standard error (``stats.crossed``), Holm-corrected across the tests with at least 3
paired seeds, and marks (▲ / ▼) a significant difference. Rows are ranked in groups on the
primary column: rows that no paired test separates share their ranks (``ranks``). A row any of
whose seeds did not learn its task (``degenerate``) is flagged and never ranked; a cell whose
seed has partly collapsed on the column's set (``bench.metrics.CollapseRule``) is flagged, and
never ranked when it is the ranking column; so is a speed a seed measured under load (its
record's ``timing.under_load``, ``bench.model.efficiency``).

Published numbers that a sweep spec carries are extra rows, labelled "published:", never
averaged.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.store.records import Record
from bench.store.references import Reference
from leaderboard.candidate import SCALE, shown, slug
from leaderboard.export import write as write_tables
from leaderboard.legend import against, header, legend, literal, md
from leaderboard.plot import heatmap, plot, radius
from leaderboard.sections import Section, sections
from leaderboard.table import Table, details, kept, main, target, tests


def frame(table: Table) -> pd.DataFrame:
    """A table's cells as Markdown text: every name a user gave (a label, a setting, a file, a
    column) escaped, so that it shows as text in any Markdown viewer, raw HTML included."""
    own = {"method", "sparsity"}
    return pd.DataFrame([{md(c.label): md(table.text(r, c.key)) if c.key in own else table.text(r, c.key)
                          for c in table.columns} for r in table.rows], columns=[md(c.label) for c in table.columns])


def markdown(table: Table) -> str:
    return frame(table).to_markdown(index=False, disable_numparse=True)


def build(records: list[Record], where: Path | None = None, references: list[Reference] = ()) -> str:
    """The leaderboard Markdown; with ``where`` (the file it will be written to), the sparsity
    plots are written to ``plots/`` beside it and linked, and every table as CSV and JSON to
    ``tables/`` (``leaderboard.export``). The paired tests read each record's predictions from
    where the record was read (records of several studies can share a table)."""
    out = [
        "# Leaderboard",
        "",
        f"Generated from {len(records)} run records by `python -m bench leaderboard` (the newest made "
        f"{md(max((r.created for r in records), default='-')[:10])}). Do not edit by hand.",
        "",
        "One table per task and backbone, a row per candidate. Percentages (F_bias, speed-ups: ratios; F_bias "
        "below 1 is less biased than the full standard-CE model of the same backbone, task and seed, below 0 "
        "better out of distribution than in it). Several "
        "seeds: mean ± sample std; from 3 seeds, [the 95 % t-interval of the mean, intersected with the "
        "metric's range: [0, 100] for a percentage, [0, inf) for a time, a size, a count or a speed-up] (from 10, "
        "the 95 % BCa bootstrap interval); fewer than 3 seeds have no interval; where a "
        "percentage's seeds spread by more than 10 points (sd), each seed's value follows. Sparsity counts the encoder's Q, K, V, "
        "attention-output and FFN matrices (docs/design.md section 3); non-zero parameters count every parameter "
        "less those zeros.",
        "",
    ]
    secs = sections(records, references)
    for sec in secs:
        out += [f"## {md(sec.task)} — backbone {literal(shown(sec.backbone))}", ""]
        if not sec.records:
            out += ["No runs yet, published numbers only.", "", markdown(main(sec)), ""]
            continue
        out += [*header(sec), "", markdown(main(sec)), "", legend(sec, md), ""]
        if where is not None:
            out += _plots(sec, where)
        for table in [*details(sec), kept(sec), tests(sec, against(sec) if sec.reference else "")]:
            if table is not None:
                out += [md(table.title), "",
                        markdown(table), ""]
    if where is not None:
        write_tables(secs, where.parent / "tables")
        out += ["Every table above as CSV and JSON (aggregated, and per seed): [tables/](tables/).", ""]
    return "\n".join(out)


def _plots(sec: Section, where: Path) -> list[str]:
    name = slug(sec.task, sec.backbone)
    full = max((r.sparsity.get("total_params", 0) for r in sec.records), default=0)
    rows = [(c.name, c.target, c.records) for c in sec.candidates if target(c, full) != "structured"]
    panels = [(c.label, c.key, SCALE[c.kind][0]) for c in sec.columns if c.table == "main"]
    out = []
    png = plot(rows, panels, where.parent / "plots" / f"{name}.png", f"{sec.task}, backbone {shown(sec.backbone)}")
    if png is not None:
        out += [f"![sparsity against the table's metrics, {md(sec.task)}](plots/{png.name})", ""]
    png = heatmap(rows, where.parent / "plots" / f"{name}_pattern.png", f"sparsity per layer and matrix, {sec.task}")
    if png is not None:
        out += [f"![sparsity pattern per layer and matrix, {md(sec.task)}](plots/{png.name})", ""]
    every = [(c.name, c.target, c.records) for c in sec.candidates]  # dense and structured rows have a curve too
    png = radius(every, where.parent / "plots" / f"{name}_radius.png", f"certified accuracy by radius, {sec.task}")
    if png is not None:
        out += [f"![certified accuracy against substituted words, {md(sec.task)}](plots/{png.name})", ""]
    return out
