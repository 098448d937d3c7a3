"""The leaderboard's tables before they are drawn: records grouped into one section per (task,
backbone), a candidate per method, parameters and sparsity (``leaderboard.candidate``), with
the columns the records' suites declared and the reference every candidate is compared with
(``pairing``). The reference is the candidate the records name as theirs most often; for suites
that record none (an attack study), the dense reference method's row with the fewest settings.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

from bench.store.records import Column, Record
from bench.store.references import Reference
from leaderboard.candidate import Candidate, _variant, suite_setting
from leaderboard.pairing import Test, pairwise, tests


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
        return pairwise(self.ranked, self.primary) if self.primary else []

    @cached_property
    def tests(self) -> list[Test]:
        """The paired tests against the reference, made when a table first shows them: they read
        every candidate's per-example predictions, which a caller that only looks candidates up
        (a claims table, the README's headline) does not need."""
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


