"""The leaderboard's rows: records grouped into one section per (task, backbone), a candidate
per method, parameters and sparsity, with the columns the records' suites declared and the
reference every candidate is compared with (``pairing``).

Runs of one label that differ in a setting (non-default parameters, an example cap, precision,
device, a suite's settings where one table holds several) are separate rows, never averaged
as seeds. The reference is the candidate the records name as theirs most often; for suites
that record none (an attack study), the dense reference method's row with the fewest settings.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from bench.metrics import COLLAPSE, Collapse, CollapseRule
from bench.store.records import Column, Record
from bench.store.references import Reference
from leaderboard.evidence import outcomes_of

if TYPE_CHECKING:
    from leaderboard.pairing import Test

SCALE = {"percent": (100.0, 1), "points": (100.0, 1), "ratio": (1.0, 2), "signed": (1.0, 2), "number": (1.0, 1)}
SHARE, DIFFERENCE, AMOUNT = (0.0, 1.0), (-1.0, 1.0), (0.0, math.inf)
# the range a column's interval must stay in: a latency, a size, a count or a speed-up is never
# negative, whatever a t-interval of three spread-out seeds says (``stats.interval``)
BOUNDS = {"percent": SHARE, "points": DIFFERENCE, "ratio": AMOUNT, "number": AMOUNT}


def slug(task: str, backbone: str) -> str:
    """A table's file-name stem (its plots, its CSV and JSON)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{task}_{backbone}").strip("-")


def nonzero(r: Record) -> int:
    """Non-zero parameters counted alike for every method: all parameters less the zeros of the
    prunable matrices (a method that also masks the pooler or classifier, as SRNet's released
    code does, reports that as head sparsity, not as fewer parameters)."""
    return r.sparsity["total_params"] - r.sparsity["zeros"]


def suite_setting(r: Record) -> str:
    parts = [f"{k}={v}" for k, v in sorted(r.provenance.get("config", {}).get("suite_params", {}).items())]
    tag = r.details.get("resources_tag")
    return ", ".join(parts + ([tag] if tag and tag != "official" else []))


def _variant(r: Record, suite_varies: bool) -> tuple[str, ...]:
    """What distinguishes runs of one label that must not be averaged as seeds: the parameters
    the method names as its variant, the example cap, precision and device (and the suite's
    settings where one table holds several)."""
    conf = r.provenance.get("config", {})
    parts = list(r.variant)
    if conf.get("max_examples"):
        parts.append(f"max_examples={conf['max_examples']}")
    parts += [v for v in (conf.get("precision"), conf.get("device")) if v and v not in ("fp32", "cpu")]
    parts += ["compiled"] if conf.get("compile") else []
    if suite_varies and suite_setting(r):
        parts.append(f"{r.suite}: {suite_setting(r)}")
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

    def collapsed(self, key: str, rows: tuple[str, ...], seeds: list[int] | None = None,
                  rule: CollapseRule = COLLAPSE) -> dict[int, Collapse]:
        """The seeds (of ``seeds``, default all) whose record of metric ``key`` has partly
        collapsed on one of the sets ``rows`` (``bench.metrics.CollapseRule``, from the kept
        predictions), each with how."""
        out = {}
        for s in self.seeds if seeds is None else seeds:
            if (rec := self.record(s, key)) is not None:
                why = next((w for name, o in sorted(outcomes_of(rec).items()) if name in rows and (w := o.collapse(rule))), None)
                if why:
                    out[s] = why
        return out

    def under_load(self, key: str) -> dict[int, str]:
        """The seeds whose record timed metric ``key`` while other work held the cores (the
        ``timing.under_load`` of ``bench.model.efficiency``), each with why: such a number is a
        measure of the machine's load as much as of the model, so its cell is flagged and never
        ranked."""
        out = {}
        for s in self.seeds:
            rec = self.record(s, key)
            timing = rec.timing if rec is not None else None
            if timing and timing.get("under_load") and key in timing.get("metrics", ()):
                out[s] = timing["under_load"]
        return out


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
    def ranked(self) -> list[Candidate]:
        """The rows ranked on the primary column, best first by mean: none that is degenerate or
        has partly collapsed on the column's set in some seed (their number there is not the
        task's skill), none whose number there was measured under load in some seed (a speed
        timed on a contended machine), nor one without a value."""
        col = self.primary
        if col is None:
            return []
        sign = -1.0 if col.higher_is_better is False else 1.0

        def mean(c: Candidate) -> float:
            vals = [v for v in c.values(col.key) if isinstance(v, int | float) and math.isfinite(v)]
            return sum(vals) / len(vals) if vals else math.nan

        keep = [c for c in self.candidates if not c.degenerate and not c.collapsed(col.key, col.rows)
                and not c.under_load(col.key) and not math.isnan(mean(c))]
        return sorted(keep, key=lambda c: -sign * mean(c))

    @cached_property
    def pairwise(self) -> list[Test]:
        """Every pair of ranked rows tested on the primary column (``pairing.pairwise``), made
        once: a table, its CSV and its site page read the same rank groups."""
        from leaderboard.pairing import pairwise

        return pairwise(self.ranked, self.primary) if self.primary else []

    @cached_property
    def tests(self) -> list[Test]:
        """The paired tests against the reference, made when a table first shows them: they read
        every candidate's per-example predictions, which a caller that only looks candidates up
        (a claims table, the README's headline) does not need."""
        from leaderboard.pairing import tests

        return tests(self.candidates, self.columns, self.reference)


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
        settings[r.suite].add(suite_setting(r))
    groups: dict[tuple, Candidate] = {}
    for r in records:
        target = r.sparsity.get("target")
        key = (target is not None, r.label, target or 0.0, _variant(r, len(settings[r.suite]) > 1))
        groups.setdefault(key, Candidate(r.label, target, key[3])).records.append(r)
    return [groups[k] for k in sorted(groups)]


def _reference(candidates: list[Candidate], records: list[Record]) -> tuple[Candidate | None, str]:
    """The candidate the records name as their ``baseline`` most often, a link counting for the
    candidate that holds that artifact judged by the linking record's suite and settings. The
    fewest settings win a tie; a tie that remains gives no reference (and says why) rather than
    one settled by sort order."""
    held = defaultdict(set)  # (artifact, suite, its settings) -> the candidates holding it
    for c in candidates:
        for r in c.records:
            held[(r.artifact.get("key"), r.suite, suite_setting(r))].add(id(c))
    score = defaultdict(int)
    for r in records:
        for c in held.get((r.baseline, r.suite, suite_setting(r)), ()) if r.baseline else ():
            score[c] += 1
    pool = [c for c in candidates if score[id(c)]]
    if not pool:
        return None, ""
    rank = {id(c): (-score[id(c)], len(c.settings)) for c in pool}
    best = min(rank.values())
    tied = [c for c in pool if rank[id(c)] == best]
    if len(tied) > 1:
        return None, f"none: {' and '.join(c.name for c in tied)} tie as the reference, so no paired tests"
    return tied[0], ""


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


