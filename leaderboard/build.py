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

import math
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from bench.store.records import Column, Record
from bench.store.references import Reference
from leaderboard.legend import UNDER_LOAD, against, header, legend, twins
from leaderboard.pairing import device
from leaderboard.plot import heatmap, plot
from leaderboard.sections import (
    BOUNDS,
    SCALE,
    SHARE,
    Candidate,
    Section,
    nonzero,
    sections,
    slug,
)
from leaderboard.stats import MIN_SEEDS_FOR_INTERVAL, fmt, mcnemar


def _target(c: Candidate, full: int) -> str:
    """'dense', a target sparsity, or 'structured' for a smaller architecture (heads removed,
    fewer layers) that has no unstructured target."""
    if c.target is not None:
        return f"{c.target:.0%}"
    return "structured" if any(r.sparsity.get("total_params", full) < full for r in c.records) else "dense"


def _sparsity(c: Candidate) -> str:
    return f"{c.target:.0%}" if c.target is not None else "dense"


def _mean(c: Candidate, col: Column) -> float:
    vals = [v for v in c.values(col.key) if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return float(np.mean(vals)) if vals else math.nan


def ranks(sec: Section) -> dict[int, str]:
    """Rank groups on the primary column (direction as declared): each ranked row's rank runs
    from 1 + the rows the paired test finds significantly better than it to n - the rows it
    finds significantly worse (``pairing.pairwise``: the reference tests' paired test, Holm-
    corrected over every pair of the table's ranked rows), shown as "1" or "2-4": rows nothing
    separates share their ranks, never ordered by a mean the data cannot tell apart. ▲ / ▼ mark
    a significant difference from the reference on that column; the reference is 'ref'.
    Degenerate rows, and rows that have partly collapsed on the primary column's set in some
    seed, are never ranked: their number there is not the task's skill; nor is a row whose
    number there was measured under load in some seed."""
    col = sec.primary
    if col is None:
        return {}
    sign = -1.0 if col.higher_is_better is False else 1.0
    ranked = sec.ranked
    better: dict[int, int] = {id(c): 0 for c in ranked}  # how many rows are significantly better
    worse: dict[int, int] = {id(c): 0 for c in ranked}
    for t in sec.pairwise:
        if t.significant:
            top, bottom = (t.candidate, t.reference) if t.delta * sign > 0 else (t.reference, t.candidate)
            better[id(bottom)] += 1
            worse[id(top)] += 1
    marks = {id(t.candidate): ("▲" if t.delta * sign > 0 else "▼") for t in sec.tests
             if t.column.key == col.key and t.significant}
    out = {}
    for c in ranked:
        lo, hi = 1 + better[id(c)], len(ranked) - worse[id(c)]
        out[id(c)] = (f"{lo}" if lo == hi else f"{lo}-{hi}") + (f" {marks[id(c)]}" if id(c) in marks else "")
    if sec.reference is not None:
        out[id(sec.reference)] = out.get(id(sec.reference), "—") + " (ref)"
    for mate in twins(sec):
        out[id(mate)] = out.get(id(mate), "—") + f" (ref, {device(mate)})"
    return out


def cell(sec: Section, cand: Candidate, col: Column) -> str:
    """A candidate's value of one column over its seeds, flagged where a seed has partly
    collapsed on the column's set, where a seed's speed was measured under load, and (F_bias)
    where a seed's ID accuracy is at chance."""
    text = fmt(cand.values(col.key), *SCALE[col.kind], bounds=BOUNDS.get(col.kind))
    flagged = cand.collapsed(col.key, col.rows)
    if flagged:
        text += " ⚠ partial collapse (" + "; ".join(f"s{s} {how.short}" for s, how in flagged.items()) + ")"
    if loaded := cand.under_load(col.key):
        text += f" ⚠ {UNDER_LOAD} (seed {', '.join(map(str, loaded))})"
    if (chance := at_chance(cand, col)) and text != "–":
        text += f" ⚠ ID at chance (seed {', '.join(map(str, chance))}): no F_bias"
    return text


def at_chance(cand: Candidate, col: Column) -> list[int]:
    """The seeds whose F_bias means nothing: their ID accuracy is at chance (within a point of
    the majority class: the record's ``degenerate``), so D = (F_dev - F_ood) / F_dev is about 0
    and F_bias about 0 reads as 'unbiased'. Such a row is never ranked."""
    return cand.degenerate if col.key.startswith("f_bias/") else []


def main_table(sec: Section) -> pd.DataFrame:
    full = max((r.sparsity.get("total_params", 0) for r in sec.records), default=0)
    cols = [c for c in sec.columns if c.table == "main"]
    rank = ranks(sec)
    rows = []
    for ref in sec.references:
        row = {"rank": "", "method": f"published: {ref.label} ({ref.source})",
               "sparsity": "dense" if ref.sparsity is None else f"{ref.sparsity:.0%}"}
        for c in cols:
            row[c.label] = fmt([ref.metrics.get(c.key)], *SCALE[c.kind])
        rows.append(row | {"sparsity % (achieved)": "", "non-zero params (M)": "", "seeds": "published"})
    for cand in sec.candidates:
        flag = f" ⚠ DEGENERATE (seed {', '.join(map(str, cand.degenerate))}: did not learn the task; not ranked)" if cand.degenerate else ""
        row = {"rank": rank.get(id(cand), "—" if sec.primary else ""), "method": cand.name + flag,
               "sparsity": _target(cand, full)}
        for c in cols:
            row[c.label] = cell(sec, cand, c)
        first = {s: next(r for r in cand.records if r.seed == s) for s in cand.seeds}
        row["sparsity % (achieved)"] = fmt([first[s].sparsity["sparsity"] for s in cand.seeds], 100.0, 1, SHARE)
        row["non-zero params (M)"] = fmt([nonzero(first[s]) for s in cand.seeds], 1e-6, 2)
        row["seeds"] = ",".join(map(str, cand.seeds))
        rows.append(row)
    return pd.DataFrame(rows)


def details_tables(sec: Section) -> list[tuple[str, pd.DataFrame]]:
    names = list(dict.fromkeys(c.table for c in sec.columns if c.table != "main"))
    out = []
    for name in names:
        cols = [c for c in sec.columns if c.table == name]
        rows = []
        for cand in sec.candidates:
            cells = {c.label: cell(sec, cand, c) for c in cols}
            if any(v != "–" for v in cells.values()):
                rows.append({"method": cand.name, "sparsity": _sparsity(cand)} | cells)
        if rows:
            out.append((name, pd.DataFrame(rows)))
    return out


def kept_table(sec: Section) -> pd.DataFrame | None:
    """Which checkpoint each seed's model is, where its method kept the best on dev: step kept /
    steps run, for each stage the method names (``method_info["kept"]``). A model kept long
    before its training ended is that early model, whatever the recipe's epochs say; its
    robustness numbers describe it, so the step is shown beside them rather than judged by a
    threshold."""
    kept = {id(c): {s: {k[0]: k[1:] for k in next(r for r in c.records if r.seed == s).method_info.get("kept", [])}
                    for s in c.seeds} for c in sec.candidates}
    stages = list(dict.fromkeys(stage for by_seed in kept.values() for k in by_seed.values() for stage in k))
    rows = []
    for cand in sec.candidates:
        cells = {}
        for stage in stages:
            parts = [f"s{s} {k[stage][0]}/{k[stage][1]}" for s, k in kept[id(cand)].items() if stage in k]
            cells[f"{stage}: step kept / steps"] = ", ".join(parts) or "–"
        if any(v != "–" for v in cells.values()):
            rows.append({"method": cand.name, "sparsity": _sparsity(cand)} | cells)
    return pd.DataFrame(rows) if rows else None


def tests_table(sec: Section) -> pd.DataFrame | None:
    if not sec.tests:
        return None
    cols = list(dict.fromkeys(t.column.label for t in sec.tests))
    rows: dict[int, dict] = {}
    for t in sec.tests:
        row = rows.setdefault(id(t.candidate), {"method": t.candidate.name, "sparsity": _sparsity(t.candidate)})
        mark = " ✓" if t.significant else ""
        k, n = len(t.seed_deltas), len(t.pairing.example_deltas)
        if k >= MIN_SEEDS_FOR_INTERVAL:
            detail = f"p={t.p_holm:.2g}, k={k} seeds, {n} examples"
        elif t.result is not None:
            detail = f"p={t.result.p:.2g} uncorrected, k={k} seeds, {n} examples: no mark below 3 seeds"
        else:
            detail = f"two fixed models: McNemar p={mcnemar(t.pairing.b, t.pairing.c):.2g}, {t.pairing.n} pairs"
        row[t.column.label] = f"{100 * t.delta:+.1f} ({detail}){mark}"
    return pd.DataFrame([{k: r.get(k, "") for k in ["method", "sparsity", *cols]} for r in rows.values()])


def build(records: list[Record], markdown: Path | None = None, references: list[Reference] = ()) -> str:
    """The leaderboard Markdown; with ``markdown`` (where it will be written), the sparsity
    plots are written to ``plots/`` beside it and linked, and every table as CSV and JSON to
    ``tables/`` (``leaderboard.export``). The paired tests read each record's predictions from
    where the record was read (records of several studies can share a table)."""
    out = [
        "# Leaderboard",
        "",
        f"Generated from {len(records)} run records by `python -m bench leaderboard` on "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC. Do not edit by hand.",
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
        out += [f"## {sec.task} — backbone `{sec.backbone}`", ""]
        if not sec.records:
            out += ["No runs yet, published numbers only.", "", main_table(sec).to_markdown(index=False, disable_numparse=True), ""]
            continue
        out += [*header(sec), "", main_table(sec).to_markdown(index=False, disable_numparse=True), "", legend(sec), ""]
        if markdown is not None:
            out += _plots(sec, markdown)
        for name, df in details_tables(sec):
            out += [f"{name}, {sec.task}:", "", df.to_markdown(index=False, disable_numparse=True), ""]
        kept = kept_table(sec)
        if kept is not None:
            out += [f"Checkpoints kept (best on dev), {sec.task}: step kept / steps run, per seed:", "",
                    kept.to_markdown(index=False, disable_numparse=True), ""]
        tests = tests_table(sec)
        if tests is not None:
            out += [f"Paired tests against {against(sec)}, {sec.task}: mean per-seed difference, points (Holm-adjusted "
                    "p of the test over k seeds and the examples; ✓ p < 0.05 with k ≥ 3; one seed: the exact McNemar "
                    "test of the two fixed models, no mark):", "",
                    tests.to_markdown(index=False, disable_numparse=True), ""]
    if markdown is not None:
        from leaderboard.export import write as write_tables  # it reads this module's ranks
        write_tables(secs, markdown.parent / "tables")
        out += ["Every table above as CSV and JSON (aggregated, and per seed): [tables/](tables/).", ""]
    return "\n".join(out)


def _plots(sec: Section, markdown: Path) -> list[str]:
    name = slug(sec.task, sec.backbone)
    full = max((r.sparsity.get("total_params", 0) for r in sec.records), default=0)
    rows = [(c.name, c.target, c.records) for c in sec.candidates if _target(c, full) != "structured"]
    panels = [(c.label, c.key, SCALE[c.kind][0]) for c in sec.columns if c.table == "main"]
    out = []
    png = plot(rows, panels, markdown.parent / "plots" / f"{name}.png", f"{sec.task}, backbone {sec.backbone}")
    if png is not None:
        out += [f"![sparsity against the table's metrics, {sec.task}](plots/{png.name})", ""]
    png = heatmap(rows, markdown.parent / "plots" / f"{name}_pattern.png", f"sparsity per layer and matrix, {sec.task}")
    if png is not None:
        out += [f"![sparsity pattern per layer and matrix, {sec.task}](plots/{png.name})", ""]
    return out
