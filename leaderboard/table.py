"""One leaderboard table, built once: its columns, and its rows of cells, each with the text it
shows, the flags that qualify it, the number a sort orders by and, for a metric, the mean, sd and
interval over seeds. The Markdown (``leaderboard.build``), the CSV and JSON
(``leaderboard.export``) and the site (``leaderboard.site``) only draw these cells, so the
three cannot disagree on a number, a word or a flag.

Rows are in rank order: the ranked rows by their rank group, then by mean; the rows that are
not ranked (degenerate, partly collapsed or timed under load on the ranking column) after them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from bench.errors import BenchError
from bench.metrics import Collapse
from bench.registry import TASKS
from bench.store.records import Column
from leaderboard.candidate import BOUNDS, SCALE, Candidate, nonzero
from leaderboard.legend import UNDER_LOAD, twins
from leaderboard.pairing import device
from leaderboard.sections import Section
from leaderboard.stats import MIN_SEEDS_FOR_INTERVAL, fmt, interval, mcnemar


@dataclass(frozen=True)
class Cell:
    """What one cell shows: ``text`` and its ``flags`` (each a whole "⚠ ..." phrase), ``sort``
    (None sorts with the missing: a flagged speed, an F_bias at chance) and, for a metric, its
    numbers in the units shown."""

    text: str = "–"
    flags: tuple[str, ...] = ()
    sort: float | None = None
    seeds: int = 0
    mean: float | None = None
    sd: float | None = None
    low: float | None = None
    high: float | None = None

    def __str__(self) -> str:
        return " ".join((self.text, *self.flags))


@dataclass(frozen=True)
class Col:
    key: str  # a metric's key, or one of the row's own: rank, method, sparsity, achieved, nonzero, seeds
    label: str
    higher_is_better: bool | None = None
    metric: Column | None = None


@dataclass
class Row:
    cells: dict[str, Cell]
    candidate: Candidate | None = None  # None: a published number (``bench.store.references``)


@dataclass
class Table:
    name: str  # "main", a details table's name ("ID", "OOD", "efficiency", ...), "kept" or "tests"
    title: str  # the line above it ("" for the main table)
    columns: list[Col]
    rows: list[Row] = field(default_factory=list)

    def text(self, row: Row, key: str) -> str:
        return str(row.cells.get(key, Cell("")))


def number(values: list[float | None], kind: str) -> Cell:
    """A metric over seeds, as ``stats.fmt`` shows it and with the numbers behind that text."""
    scale, digits = SCALE[kind]
    vals = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return Cell()
    ci = interval(vals, BOUNDS.get(kind))
    return Cell(fmt(vals, scale, digits, bounds=BOUNDS.get(kind)), sort=float(np.mean(vals)), seeds=len(vals),
                mean=float(np.mean(vals)) * scale, sd=float(np.std(vals, ddof=1)) * scale if len(vals) > 1 else None,
                low=ci[0] * scale if ci else None, high=ci[1] * scale if ci else None)


def at_chance(cand: Candidate, col: Column) -> list[int]:
    """The seeds whose F_bias means nothing: their ID accuracy is at chance (within a point of
    the majority class: the record's ``degenerate``), so D = (F_dev - F_ood) / F_dev is about 0
    and F_bias about 0 reads as 'unbiased'. Such a row is never ranked."""
    return cand.degenerate if col.key.startswith("f_bias/") else []


def labels(sec: Section) -> dict[str, list[str]]:
    """The names of the gold labels: the task's (``Task.labels``) for its test set and attacks,
    and each OOD set's own where its records name them (HANS's two)."""
    try:
        names = {"": list(TASKS.get(sec.task).labels)}
    except BenchError:  # a task whose plug-in is not installed here: its ids are shown
        names = {"": []}
    for r in sec.records:
        for name, got in (r.details.get("labels") or {}).items():
            names.setdefault(name, list(got))
    return names


def collapse(names: dict[str, list[str]] | None, on: str, how: Collapse) -> str:
    """A partial collapse on set ``on`` in words, its class by name (``labels``): the set's own
    names, the task's for its test set; an OOD set whose records name no labels keeps the id,
    since its labels need not be the task's."""
    got = (names or {}).get(on) or ((names or {}).get("") if on == "test" else None) or []
    return f"{got[how.cls] if 0 <= how.cls < len(got) else f'class {how.cls}'}: {100 * how.share:.1f} %"


def cell(cand: Candidate, col: Column, names: dict[str, list[str]] | None = None) -> Cell:
    """A candidate's value of one column over its seeds, flagged where a seed has partly
    collapsed on the column's set (the class by its name in ``names``, ``labels``), where a
    seed's speed was measured under load, and (F_bias) where a seed's ID accuracy is at chance; a
    flagged speed or F_bias sorts with the missing."""
    got = number(cand.values(col.key), col.kind)
    flags = []
    if collapsed := cand.collapsed_on(col.key, col.rows):
        flags.append("⚠ partial collapse (" + "; ".join(f"s{s} {collapse(names, on, how)}" for s, (on, how) in collapsed.items()) + ")")
    if loaded := cand.under_load(col.key):
        flags.append(f"⚠ {UNDER_LOAD} (seed {', '.join(map(str, loaded))})")
    if (chance := at_chance(cand, col)) and got.text != "–":
        flags.append(f"⚠ ID at chance (seed {', '.join(map(str, chance))}): no F_bias")
    sort = None if loaded or chance else got.sort
    return Cell(got.text, tuple(flags), sort, got.seeds, got.mean, got.sd, got.low, got.high)


def _ranks(sec: Section) -> dict[int, tuple[str, int]]:
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
        out[id(c)] = ((f"{lo}" if lo == hi else f"{lo}-{hi}") + (f" {marks[id(c)]}" if id(c) in marks else ""), lo)
    if sec.reference is not None:
        text, lo = out.get(id(sec.reference), ("—", 0))
        out[id(sec.reference)] = (text + " (ref)", lo)
    for mate in twins(sec):
        text, lo = out.get(id(mate), ("—", 0))
        out[id(mate)] = (text + f" (ref, {device(mate)})", lo)
    return out


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
    return {k: text for k, (text, _) in _ranks(sec).items()}


def order(sec: Section) -> list[Candidate]:
    """The rows in rank order: ranked rows by the first rank of their group, then by mean (as
    ``Section.ranked`` sorts them); the rest after them, as the section lists them."""
    at = {id(c): i for i, c in enumerate(sec.ranked)}
    lo = {k: v[1] for k, v in _ranks(sec).items()}
    return sorted(sec.candidates, key=lambda c: (id(c) not in at, lo.get(id(c), 0) if id(c) in at else 0, at.get(id(c), 0)))


def target(c: Candidate, full: int) -> str:
    """'dense', a target sparsity, or 'structured' for a smaller architecture (heads removed,
    fewer layers) that has no unstructured target."""
    if c.target is not None:
        return f"{c.target:.0%}"
    return "structured" if any(r.sparsity.get("total_params", full) < full for r in c.records) else "dense"


def _full(sec: Section) -> int:
    return max((r.sparsity.get("total_params", 0) for r in sec.records), default=0)


def _who(sec: Section, cand: Candidate) -> dict[str, Cell]:
    return {"method": Cell(cand.name), "sparsity": Cell(target(cand, _full(sec)), sort=cand.target or 0.0)}


def main(sec: Section) -> Table:
    cols = [c for c in sec.columns if c.table == "main"]
    rank, names = _ranks(sec), labels(sec)
    table = Table("main", "", [Col("rank", "rank"), Col("method", "method"), Col("sparsity", "sparsity")]
                  + [Col(c.key, c.label, c.higher_is_better, c) for c in cols]
                  + [Col("achieved", "sparsity % (achieved)"), Col("nonzero", "non-zero params (M)"), Col("seeds", "seeds")])
    for ref in sec.references:
        cells = {"rank": Cell(""), "method": Cell(f"published: {ref.label} ({ref.source})"),
                 "sparsity": Cell("dense" if ref.sparsity is None else f"{ref.sparsity:.0%}"),
                 "achieved": Cell(""), "nonzero": Cell(""), "seeds": Cell("published")}
        table.rows.append(Row(cells | {c.key: number([ref.metrics.get(c.key)], c.kind) for c in cols}))
    for cand in order(sec):
        text, lo = rank.get(id(cand), ("—" if sec.primary else "", 0))
        flags = (f"⚠ DEGENERATE (seed {', '.join(map(str, cand.degenerate))}: did not learn the task; not ranked)",) \
            if cand.degenerate else ()
        first = {s: next(r for r in cand.records if r.seed == s) for s in cand.seeds}
        cells = {"rank": Cell(text, sort=float(lo) if lo else None),
                 "method": Cell(cand.name, flags), "sparsity": _who(sec, cand)["sparsity"]}
        cells |= {c.key: cell(cand, c, names) for c in cols}
        cells["achieved"] = number([first[s].sparsity["sparsity"] for s in cand.seeds], "percent")
        cells["nonzero"] = _scaled([nonzero(first[s]) for s in cand.seeds], 1e-6, 2)
        cells["seeds"] = Cell(",".join(map(str, cand.seeds)), sort=len(cand.seeds))
        table.rows.append(Row(cells, cand))
    return table


def _scaled(values: list[float], scale: float, digits: int) -> Cell:
    vals = [float(v) for v in values]
    return Cell(fmt(vals, scale, digits), sort=float(np.mean(vals)) * scale if vals else None)


STORED = (" (eff/nonzero_m: the non-zero values of the weights as the model holds them, so a weight that quantization "
          "rounds to zero counts as zero; the main table's non-zero params count what pruning zeroed)")


def details(sec: Section) -> list[Table]:
    """A table per details group the suites declared (ID halves, OOD cells, attacks,
    efficiency, other metrics), with the rows that have a number in it."""
    out, names = [], labels(sec)
    for name in dict.fromkeys(c.table for c in sec.columns if c.table != "main"):
        cols = [c for c in sec.columns if c.table == name]
        note = STORED if any(c.key == "eff/nonzero_m" for c in cols) else ""
        table = Table(name, f"{name}, {sec.task}{note}:", [Col("method", "method"), Col("sparsity", "sparsity")]
                      + [Col(c.key, c.label, c.higher_is_better, c) for c in cols])
        for cand in order(sec):
            cells = {c.key: cell(cand, c, names) for c in cols}
            if any(v.text != "–" for v in cells.values()):
                table.rows.append(Row(_who(sec, cand) | cells, cand))
        if table.rows:
            out.append(table)
    return out


def kept(sec: Section) -> Table | None:
    """Which checkpoint each seed's model is, where its method kept the best on dev: step kept /
    steps run, for each stage the method names (``method_info["kept"]``). A model kept long
    before its training ended is that early model, whatever the recipe's epochs say; its
    robustness numbers describe it, so the step is shown beside them rather than judged by a
    threshold."""
    steps = {id(c): {s: {k[0]: k[1:] for k in next(r for r in c.records if r.seed == s).method_info.get("kept", [])}
                     for s in c.seeds} for c in sec.candidates}
    stages = list(dict.fromkeys(stage for by_seed in steps.values() for k in by_seed.values() for stage in k))
    table = Table("kept", f"Checkpoints kept (best on dev), {sec.task}: step kept / steps run, per seed:",
                  [Col("method", "method"), Col("sparsity", "sparsity")] + [Col(s, f"{s}: step kept / steps") for s in stages])
    for cand in order(sec):
        cells = {stage: Cell(", ".join(f"s{s} {k[stage][0]}/{k[stage][1]}" for s, k in steps[id(cand)].items()
                                       if stage in k) or "–") for stage in stages}
        if any(v.text != "–" for v in cells.values()):
            table.rows.append(Row(_who(sec, cand) | cells, cand))
    return table if table.rows else None


def tests(sec: Section, against: str) -> Table | None:
    """The paired tests against the reference: mean per-seed difference in points, with the
    Holm-adjusted p over k seeds and the examples (one seed: McNemar on two fixed models)."""
    if not sec.tests:
        return None
    labels = list(dict.fromkeys(t.column.label for t in sec.tests))
    table = Table("tests", f"Paired tests against {against}, {sec.task}: mean per-seed difference, points (Holm-adjusted "
                  "p of the test over k seeds and the examples; ✓ p < 0.05 with k ≥ 3; one seed: the exact McNemar "
                  "test of the two fixed models, no mark):",
                  [Col("method", "method"), Col("sparsity", "sparsity")] + [Col(f"test:{lab}", lab) for lab in labels])
    rows: dict[int, Row] = {}
    for t in sec.tests:
        row = rows.setdefault(id(t.candidate), Row(_who(sec, t.candidate), t.candidate))
        k, n = len(t.seed_deltas), len(t.pairing.example_deltas)
        if k >= MIN_SEEDS_FOR_INTERVAL:
            detail = f"p={t.p_holm:.2g}, k={k} seeds, {n} examples"
        elif t.result is not None:
            detail = f"p={t.result.p:.2g} uncorrected, k={k} seeds, {n} examples: no mark below 3 seeds"
        else:
            detail = f"two fixed models: McNemar p={mcnemar(t.pairing.b, t.pairing.c):.2g}, {t.pairing.n} pairs"
        row.cells[f"test:{t.column.label}"] = Cell(f"{100 * t.delta:+.1f} ({detail})" + (" ✓" if t.significant else ""),
                                                   sort=100 * t.delta)
    at = {id(c): i for i, c in enumerate(order(sec))}
    table.rows = [Row({c.key: r.cells.get(c.key, Cell("")) for c in table.columns}, r.candidate)
                  for r in sorted(rows.values(), key=lambda r: at[id(r.candidate)])]
    return table
