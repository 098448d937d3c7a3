"""Build the leaderboard Markdown from run records (and nothing else; no torch).

One leaderboard per (task, backbone): a row per candidate (method, parameters, sparsity), every
suite's main columns side by side (clean ID, each OOD set, F_bias, Aua% and Suc% per attack
recipe, speed-up), then sparsity, non-zero parameters and seeds. Which metric goes in which
column, and how it is shown, is what each record's suite declared (``Column``); a metric no
record declares appears under its own name in "other metrics". Details tables follow (ID halves,
OOD cells, attacks, efficiency), the checkpoint each seed kept, then the paired tests against
the reference.

Numbers over seeds are labelled by ``leaderboard.stats``: mean ± sample std, with a t-interval
from 3 seeds (intersected with [0, 100] for a percentage; BCa bootstrap from
10). Each candidate is compared with the reference (the full standard-CE model of the same seed,
linked from the records; for suites that record no reference, such as an attack study, the
dense ``finetune (ce)`` row with the fewest settings) over the seeds both have, paired by seed,
with the examples' sampling variance in the standard error (``stats.crossed``), Holm-corrected
across the tests with at least 3 paired seeds; the rank orders candidates by the primary column
and marks (▲ / ▼) a significant difference. A row any of whose seeds did not learn its task
(``degenerate``) is flagged and never ranked; a cell whose seed answers one class on more than
95 % of the column's balanced set is flagged, and never ranked when it is the ranking column.
Published numbers that a sweep spec carries are extra rows, labelled "published:", never
averaged.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from bench.core.records import Column, Record, Reference
from leaderboard.evidence import outcomes_of, pair
from leaderboard.plot import heatmap, plot
from leaderboard.stats import ALPHA, MIN_SEEDS_FOR_INTERVAL, Crossed, crossed, fmt, holm, mcnemar

SHOWN_IN_LABEL = ("loss", "rewind", "paradigm", "retrain_loss", "ticket")  # already part of the method's label
SCALE = {"percent": (100.0, 1), "points": (100.0, 1), "ratio": (1.0, 2), "number": (1.0, 1)}
SHARE, DIFFERENCE = (0.0, 1.0), (-1.0, 1.0)
BOUNDS = {"percent": SHARE, "points": DIFFERENCE}  # the range a column's interval must stay in
REFERENCE_LABEL = "finetune (ce)"


def nonzero(r: Record) -> int:
    """Non-zero parameters counted alike for every method: all parameters less the zeros of the
    prunable matrices (a method that also masks the pooler or classifier, as SRNet's released
    code does, reports that as head sparsity, not as fewer parameters)."""
    return r.sparsity["total_params"] - r.sparsity["zeros"]


def _suite_setting(r: Record) -> str:
    parts = [f"{k}={v}" for k, v in sorted(r.provenance.get("config", {}).get("suite_params", {}).items())]
    tag = r.details.get("resources_tag")
    return ", ".join(parts + ([tag] if tag and tag != "official" else []))


def _variant(r: Record, suite_varies: bool) -> tuple[str, ...]:
    """What distinguishes runs of one label that must not be averaged as seeds: non-default
    parameters, the example cap, precision and device (and the suite's settings where one
    table holds several)."""
    conf = r.provenance.get("config", {})
    parts = [f"{k}={v}" for k, v in sorted(conf.get("params", {}).items()) if k not in SHOWN_IN_LABEL]
    if conf.get("max_examples"):
        parts.append(f"max_examples={conf['max_examples']}")
    parts += [v for v in (conf.get("precision"), conf.get("device")) if v and v not in ("fp32", "cpu")]
    parts += ["compiled"] if conf.get("compile") else []
    if suite_varies and _suite_setting(r):
        parts.append(f"{r.suite}: {_suite_setting(r)}")
    return tuple(parts)


@dataclass
class Candidate:
    """One leaderboard row: the records of one method, parameters and sparsity, every suite and seed."""

    label: str
    target: float | None
    settings: tuple[str, ...]  # what ``_variant`` found, one setting each
    records: list[Record] = field(default_factory=list)

    @property
    def variant(self) -> str:
        return ", ".join(self.settings)

    @property
    def name(self) -> str:
        return f"{self.label} [{self.variant}]" if self.variant else self.label

    @property
    def seeds(self) -> list[int]:
        return sorted({r.seed for r in self.records})

    def record(self, seed: int, key: str) -> Record | None:
        """The record of ``seed`` holding metric ``key`` (the first suite's, by name)."""
        return next((r for r in sorted(self.records, key=lambda r: r.suite) if r.seed == seed and key in r.metrics), None)

    def values(self, key: str) -> list[float | None]:
        return [rec.metrics[key] for s in self.seeds if (rec := self.record(s, key)) is not None]

    @property
    def degenerate(self) -> list[int]:
        return sorted({r.seed for r in self.records if r.degenerate})

    def one_class(self, key: str, rows: tuple[str, ...], seeds: list[int] | None = None) -> list[int]:
        """The seeds (of ``seeds``, default all) whose record of metric ``key`` answers one class
        on more than 95 % of one of the balanced sets ``rows`` (``bench.metrics.one_class``, from
        the kept predictions)."""
        return [s for s in (self.seeds if seeds is None else seeds) if (rec := self.record(s, key)) is not None
                and any(o.one_class for name, o in outcomes_of(rec).items() if name in rows)]


@dataclass
class Test:
    """A candidate against the reference on one column: over the seeds both have, paired by
    seed, with the examples' sampling variance included (``leaderboard.stats.crossed``); with one
    seed only the exact McNemar test of the two fixed models."""

    candidate: Candidate
    column: Column
    reference: Candidate  # the section's reference, or its twin on the candidate's device
    pairing: Pairing
    seed_deltas: list[float] = field(default_factory=list)  # the column's per-seed differences
    result: Crossed | None = None  # None below 2 seeds
    p_holm: float = math.nan  # NaN: outside the Holm family (fewer than 3 paired seeds)

    @property
    def delta(self) -> float:
        return float(np.mean(self.seed_deltas)) if self.seed_deltas else self.pairing.delta

    @property
    def significant(self) -> bool:
        """From at least 3 paired seeds, Holm p < 0.05: a difference that neither the variation
        between training runs nor the sample of examples explains."""
        return len(self.seed_deltas) >= MIN_SEEDS_FOR_INTERVAL and self.p_holm < ALPHA


@dataclass
class Section:
    task: str
    backbone: str
    records: list[Record]
    candidates: list[Candidate]
    columns: list[Column]
    reference: Candidate | None
    references: list[Reference] = field(default_factory=list)
    no_reference: str = ""  # why there is none, where candidates tie for it

    @property
    def primary(self) -> Column | None:
        return next((c for c in self.columns if c.primary and c.table == "main"), None)

    @cached_property
    def tests(self) -> list[Test]:
        """The paired tests against the reference, made when a table first shows them: they read
        every candidate's per-example predictions, which a caller that only looks candidates up
        (a claims table, the README's headline) does not need."""
        return _tests(self.candidates, self.columns, self.reference)


def _columns(records: list[Record]) -> list[Column]:
    """Every declared column once (the first declaration wins), suites with more records
    first; then whatever no record declares, as "other metrics"."""
    by_suite: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_suite[r.suite].append(r)
    declared: dict[str, Column] = {}
    for suite in sorted(by_suite, key=lambda s: (-len(by_suite[s]), s)):
        for r in by_suite[suite]:
            for d in r.columns:
                declared.setdefault(d["key"], Column.from_dict(d))
    other = sorted({k for r in records for k in r.metrics} - set(declared))
    cols = list(declared.values()) + [Column(k, k, "number", None, "other metrics") for k in other]
    return sorted(cols, key=lambda c: (c.table != "main", c.order))


def _candidates(records: list[Record]) -> list[Candidate]:
    settings: dict[str, set[str]] = defaultdict(set)
    for r in records:
        settings[r.suite].add(_suite_setting(r))
    groups: dict[tuple, Candidate] = {}
    for r in records:
        target = r.sparsity.get("target")
        key = (target is not None, r.label, target or 0.0, _variant(r, len(settings[r.suite]) > 1))
        groups.setdefault(key, Candidate(r.label, target, key[3])).records.append(r)
    return [groups[k] for k in sorted(groups)]


def _reference(candidates: list[Candidate], records: list[Record]) -> tuple[Candidate | None, str]:
    """The candidate the records name as their reference most often; else (an attack study names
    no reference, and its runs may all share a setting such as a cap) the dense ``finetune (ce)``.
    Either way the fewest settings win a tie; a tie that remains gives no reference (and says
    why) rather than one settled by sort order."""
    links = [r.reference for r in records if r.reference]
    score = {id(c): sum(link in {r.run_id for r in c.records} for link in links) for c in candidates}
    pool = [c for c in candidates if score[id(c)]] or [c for c in candidates if c.label == REFERENCE_LABEL and c.target is None]
    if not pool:
        return None, ""
    rank = {id(c): (-score[id(c)], len(c.settings)) for c in pool}
    best = min(rank.values())
    tied = [c for c in pool if rank[id(c)] == best]
    if len(tied) > 1:
        return None, f"none: {' and '.join(c.name for c in tied)} tie as the reference, so no paired tests"
    return tied[0], ""


def device(c: Candidate) -> str:
    return c.records[0].provenance.get("config", {}).get("device") or "cpu"  # a part of the variant


def twin(ref: Candidate, cand: Candidate, candidates: list[Candidate]) -> Candidate | None:
    """The reference a candidate is paired with: the section's, or where the candidate ran on
    another device, the reference's own run there (the same label and settings). A seed on a
    GPU is not the same training run as on the CPU (TF32, other batch order), so a difference
    across devices would not be the method's alone; without a twin there is no test."""
    if device(cand) == device(ref):
        return ref
    plain = [s for s in ref.settings if s != device(ref)]
    same = [c for c in candidates if (c.label, c.target) == (ref.label, ref.target) and device(c) == device(cand)
            and [s for s in c.settings if s != device(c)] == plain]
    return same[0] if len(same) == 1 else None


def _tests(candidates: list[Candidate], columns: list[Column], ref: Candidate | None) -> list[Test]:
    if ref is None:
        return []
    tests = []
    for col in (c for c in columns if c.rows and c.table == "main"):
        for cand in candidates:
            mate = twin(ref, cand, candidates)
            if mate is None or cand is mate or cand.degenerate:
                continue
            pairing = paired(cand, mate, col.key, col.rows, cand.seeds)
            if pairing.n:
                deltas = [mine_v - ref_v for s in pairing.seeds  # the seeds behind the pairs
                          if (mine_v := metric_value(cand, s, col.key)) is not None
                          and (ref_v := metric_value(mate, s, col.key)) is not None]
                tests.append(Test(cand, col, mate, pairing, deltas, crossed(deltas, pairing.example_deltas)))
    family = [t for t in tests if len(t.seed_deltas) >= MIN_SEEDS_FOR_INTERVAL]  # only tests that can mark a row
    for t, adjusted in zip(family, holm([t.result.p for t in family]), strict=True):
        t.p_holm = adjusted
    return tests


@dataclass(frozen=True)
class Pairing:
    """Two candidates' outcomes on the same examples, seed by seed: how many pairs, the two
    discordant counts over every seed (the McNemar test of two fixed models, where there is one
    seed), the seeds that gave pairs, and each example's difference in correctness (candidate
    minus reference) averaged over those seeds: the example level of ``stats.crossed``."""

    n: int
    b: int
    c: int
    seeds: list[int]
    example_deltas: np.ndarray

    @property
    def delta(self) -> float:
        return (self.b - self.c) / self.n if self.n else 0.0


def paired(cand: Candidate, ref: Candidate, key: str, rows: tuple[str, ...], seeds,
           golds: tuple = (), ratio: float = 1.0) -> Pairing:
    """Every seed's examples of ``rows`` that both candidates' records of ``key`` hold (those
    with gold label in ``golds``, if given); each example's difference is the candidate's
    outcome less ``ratio`` times the reference's."""
    per_seed: list[tuple[np.ndarray, np.ndarray]] = []  # (set-qualified ids, candidate minus reference)
    with_pairs = []
    n = b = c = 0
    for s in sorted(seeds):
        mine, base = cand.record(s, key), ref.record(s, key)
        if mine is None or base is None:
            continue
        mine, base = outcomes_of(mine), outcomes_of(base)
        ids, diffs = [], []
        for name in dict.fromkeys(rows):  # a set named twice is still one set
            if name in mine and name in base:
                a, r = (mine[name].only(golds), base[name].only(golds)) if golds else (mine[name], base[name])
                uids, x, y = pair(a, r)
                n, b, c = n + len(uids), b + int(np.count_nonzero(x & ~y)), c + int(np.count_nonzero(~x & y))
                ids.append(np.char.add(f"{name}\x00", uids) if len(rows) > 1 else uids)
                diffs.append(x.astype(np.int8) - y.astype(np.int8) if ratio == 1 else x - ratio * y)
        if ids and sum(map(len, ids)):
            with_pairs.append(s)
            per_seed.append((np.concatenate(ids), np.concatenate(diffs)))
    return Pairing(n, b, c, with_pairs, _by_example(per_seed))


def _by_example(per_seed: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Each example's difference averaged over the seeds that paired it."""
    if not per_seed:
        return np.zeros(0)
    first = per_seed[0][0]
    if all(np.array_equal(ids, first) for ids, _ in per_seed):  # the usual case: every seed on the same examples
        return np.mean([d for _, d in per_seed], axis=0)
    ids = np.concatenate([i for i, _ in per_seed])
    diffs = np.concatenate([d for _, d in per_seed]).astype(float)
    _, inverse = np.unique(ids, return_inverse=True)
    return np.bincount(inverse, weights=diffs) / np.bincount(inverse)


def metric_value(c: Candidate, seed: int, key: str) -> float | None:
    """The metric of ``seed``'s record, None when missing or not finite."""
    rec = c.record(seed, key)
    v = rec.metrics.get(key) if rec else None
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def sections(records: list[Record], references: list[Reference] = ()) -> list[Section]:
    by_table: dict[tuple, list[Record]] = defaultdict(list)
    for r in records:
        by_table[(r.task, r.backbone)].append(r)
    refs: dict[tuple, list[Reference]] = defaultdict(list)
    for ref in references:
        refs[(ref.task, ref.backbone)].append(ref)
    out = []
    for key in sorted(set(by_table) | set(refs)):
        rs = by_table.get(key, [])
        cands = _candidates(rs)
        columns = _columns(rs)
        reference, why = _reference(cands, rs)
        out.append(Section(key[0], key[1], rs, cands, columns, reference, refs.get(key, []), why))
    return out


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
    """Rank by the primary column's mean (direction as declared), with ▲ / ▼ where the paired
    test against the reference on that column is significant; the reference is 'ref'. Degenerate
    rows, and rows that answer one class on the primary column's set in some seed, are never
    ranked: their number there is chance, not skill."""
    col = sec.primary
    if col is None:
        return {}
    sign = -1.0 if col.higher_is_better is False else 1.0
    ranked = sorted((c for c in sec.candidates if not c.degenerate and not c.one_class(col.key, col.rows)
                     and not math.isnan(_mean(c, col))), key=lambda c: -sign * _mean(c, col))
    marks = {id(t.candidate): ("▲" if t.delta * sign > 0 else "▼") for t in sec.tests
             if t.column.key == col.key and t.significant}
    out = {id(c): f"{i}{' ' + marks[id(c)] if id(c) in marks else ''}" for i, c in enumerate(ranked, 1)}
    if sec.reference is not None:
        out[id(sec.reference)] = out.get(id(sec.reference), "—") + " (ref)"
    for mate in _twins(sec):
        out[id(mate)] = out.get(id(mate), "—") + f" (ref, {device(mate)})"
    return out


def cell(sec: Section, cand: Candidate, col: Column) -> str:
    """A candidate's value of one column over its seeds, flagged where a seed answers one class
    on the column's set."""
    text = fmt(cand.values(col.key), *SCALE[col.kind], bounds=BOUNDS.get(col.kind))
    flagged = cand.one_class(col.key, col.rows)
    return text + (f" ⚠ one class (seed {', '.join(map(str, flagged))})" if flagged else "")


def _twins(sec: Section) -> list[Candidate]:
    """The reference's twins on other devices that some test was paired with."""
    return list({id(t.reference): t.reference for t in sec.tests if t.reference is not sec.reference}.values())


def _against(sec: Section) -> str:
    """The reference as the legend and the paired tests' heading name it, with its twins."""
    return sec.reference.name + "".join(f"; rows on {device(m)}: against {m.name}" for m in _twins(sec))


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


KEPT = {"training": ("best_step", ("train_steps", "retrain_steps")), "ticket search": ("search_best_step", ("search_steps",))}


def kept_table(sec: Section) -> pd.DataFrame | None:
    """Which checkpoint each seed's model is, where its method kept the best on dev: step kept /
    steps run (``method_info``). A model kept long before its training ended is that early
    model, whatever the recipe's epochs say; its robustness numbers describe it, so the step is
    shown beside them rather than judged by a threshold."""
    rows = []
    for cand in sec.candidates:
        first = {s: next(r for r in cand.records if r.seed == s) for s in cand.seeds}
        cells = {}
        for name, (kept, runs) in KEPT.items():
            parts = [f"s{s} {mi[kept]}/{mi[run]}" for s, r in first.items() if kept in (mi := r.method_info)
                     for run in runs if run in mi]
            cells[f"{name}: step kept / steps"] = ", ".join(parts) or "–"
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


def _header(sec: Section) -> list[str]:
    rs = sec.records
    notes = {r.provenance["data"].get("note", "") for r in rs} - {""}
    kinds = {s["kind"] + ": " + s["detail"] for r in rs for s in r.provenance["data"]["sources"]}
    sizes = {}
    for r in rs:
        sizes.setdefault(r.suite, r.details.get("sizes", {}))
    versions = sorted({f"transformers {r.provenance['versions'].get('transformers')}, torch {r.provenance['versions'].get('torch')}"
                       + (f", textattack {r.details['textattack']}" if r.details.get("textattack") else "") for r in rs})
    settings = sorted({f"{r.suite}: {_suite_setting(r)}" for r in rs if _suite_setting(r)})
    lines = [f"- backbone: `{sec.backbone}`; data: {'; '.join(sorted(notes)) or '; '.join(sorted(kinds))}",
             "- evaluated examples: " + "; ".join(f"suite `{s}`: " + ", ".join(f"{k} {v}" for k, v in z.items())
                                                   for s, z in sorted(sizes.items())),
             f"- {'; '.join(versions)}; device: {'; '.join(sorted({r.provenance['device'].get('name', '?') for r in rs}))}"]
    lines += [f"- suite settings: {'; '.join(settings)}"] if settings else []
    lines += [f"- {n}" for n in sorted({n for r in rs for n in r.details.get("notes", [])})]
    return lines + [_code(rs)]


def _code(rs: list[Record]) -> str:
    """Which code made a table's records (each record's ``provenance.git``). A reviewer checks a
    number out at its commit; a record made with uncommitted changes to tracked files has no
    commit that holds its code, so those are counted by the commit they started from."""
    gits = [g for r in rs if (g := r.provenance.get("git") or {}).get("commit") not in (None, "", "unknown")]
    commits = Counter(str(g["commit"])[:7] for g in gits)
    dirty = Counter(str(g["commit"])[:7] for g in gits if g.get("dirty") is True)
    where = f"git commit `{next(iter(commits))}`" if len(commits) == 1 else f"{len(commits)} git commits"
    records = f"{len(rs)} record{'s' * (len(rs) != 1)}"
    if len(gits) == len(rs):
        line = f"- code: {records} from {where}"
    elif gits:
        line = f"- code: {records}, {len(gits)} from {where} and {len(rs) - len(gits)} with no commit recorded"
    else:
        line = f"- code: {records}, none with a commit recorded"
    if dirty:
        line += (f"; {dirty.total()} of them with uncommitted changes to tracked files ("
                 + ", ".join(f"`{c}` {k}" for c, k in sorted(dirty.items())) + ")")
    elif len(gits) == len(rs) and all(g.get("dirty") is False for g in gits):
        line += (", each" if len(rs) > 1 else ",") + " with no uncommitted changes to tracked files"
    return line + " (`provenance.git`)"


def _legend(sec: Section) -> str:
    ref = _against(sec) if sec.reference else sec.no_reference or "none in this table"
    primary = f"Ranked by {sec.primary.label} (mean over seeds)" if sec.primary else "Not ranked (no primary column)"
    return (f"{primary}; ▲ / ▼: significantly above / below the reference ({ref}) on it, from at least 3 paired "
            "seeds: the per-seed differences paired by seed, their standard error widened by the examples' sampling "
            "variance, Student t with seeds - 1 degrees of freedom, Holm-corrected across this table's tests with "
            "at least 3 paired seeds, p < 0.05. ⚠ one class: that seed answers one class on more than 95 % of the "
            "column's balanced set (chance, whatever the accuracy); a row flagged on its ranking column is not ranked.")


def build(records: list[Record], markdown: Path | None = None, references: list[Reference] = ()) -> str:
    """The leaderboard Markdown; with ``markdown`` (where it will be written), the sparsity
    plots are written to ``plots/`` beside it and linked. The paired tests read each record's
    predictions from where the record was read (records of several studies can share a table)."""
    out = [
        "# Leaderboard",
        "",
        f"Generated from {len(records)} run records by `python -m bench leaderboard` on "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC. Do not edit by hand.",
        "",
        "One table per task and backbone, a row per candidate. Percentages (F_bias, speed-ups: ratios; F_bias "
        "below 1 is less biased than the full standard-CE model of the same backbone, task and seed). Several "
        "seeds: mean ± sample std; from 3 seeds, [the 95 % t-interval of the mean, intersected with the "
        "metric's range for percentages] (from 10, the 95 % BCa bootstrap interval); fewer than 3 seeds have no interval; where a "
        "percentage's seeds spread by more than 10 points (sd), each seed's value follows. Sparsity counts the encoder's Q, K, V, "
        "attention-output and FFN matrices (docs/design.md section 3); non-zero parameters count every parameter "
        "less those zeros.",
        "",
    ]
    for sec in sections(records, references):
        out += [f"## {sec.task} — backbone `{sec.backbone}`", ""]
        if not sec.records:
            out += ["No runs yet, published numbers only.", "", main_table(sec).to_markdown(index=False, disable_numparse=True), ""]
            continue
        out += [*_header(sec), "", main_table(sec).to_markdown(index=False, disable_numparse=True), "", _legend(sec), ""]
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
            out += [f"Paired tests against {_against(sec)}, {sec.task}: mean per-seed difference, points (Holm-adjusted "
                    "p of the test over k seeds and the examples; ✓ p < 0.05 with k ≥ 3; one seed: the exact McNemar "
                    "test of the two fixed models, no mark):", "",
                    tests.to_markdown(index=False, disable_numparse=True), ""]
    return "\n".join(out)


def _plots(sec: Section, markdown: Path) -> list[str]:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{sec.task}_{sec.backbone}").strip("-")
    full = max((r.sparsity.get("total_params", 0) for r in sec.records), default=0)
    rows = [(c.name, c.target, c.records) for c in sec.candidates if _target(c, full) != "structured"]
    panels = [(c.label, c.key, SCALE[c.kind][0]) for c in sec.columns if c.table == "main"]
    out = []
    png = plot(rows, panels, markdown.parent / "plots" / f"{slug}.png", f"{sec.task}, backbone {sec.backbone}")
    if png is not None:
        out += [f"![sparsity against the table's metrics, {sec.task}](plots/{png.name})", ""]
    png = heatmap(rows, markdown.parent / "plots" / f"{slug}_pattern.png", f"sparsity per layer and matrix, {sec.task}")
    if png is not None:
        out += [f"![sparsity pattern per layer and matrix, {sec.task}](plots/{png.name})", ""]
    return out
