"""A record's evidence: its per-example predictions, read once, and whether its numbers are what
they give.

Every table is built from records that passed ``check``: the predictions file is there and
matches the record's checksum, and the record's metrics, degenerate and one-class flags and
F_bias are what its rows give (``bench.core.rescore.from_rows``, the suite's own formula,
without the data or torch). A record that fails is left out of every table and listed, one line
each; the caller exits non-zero once the rest is written. A record whose suite is not installed
here is shown, listed as not verified. The same parse gives the per-example outcomes the paired
tests compare (``outcomes_of``).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from operator import itemgetter
from pathlib import Path

import numpy as np

from bench.core.rescore import SCORED, compared, differences, scored, scoring_key
from bench.errors import BenchError
from bench.metrics import COLLAPSE, Collapse, CollapseRule
from bench.store import clusters
from bench.store.clusters import Clusters
from bench.store.records import (
    Record,
    gc_paused,
    load_predictions,
    parse_predictions,
    read_predictions,
    read_records,
)


@dataclass(frozen=True)
class SetOutcomes:
    """One record's outcomes on one set of examples, as arrays sorted by example id: pairing two
    records is then one merge in numpy, not a dictionary of every example (the by-task table
    pairs hundreds of records of 30,000 HANS examples). Example ids are compared as strings, as
    every suite writes them."""

    uids: np.ndarray  # example ids (str), sorted, unique
    right: np.ndarray  # bool
    gold: np.ndarray  # gold label (object: int or None)
    # each example's group (HANS heuristic, PAWS source, ...) as an index into ``groups``, -1 for
    # none: small codes, not a string per example, as the cache holds hundreds of records
    group: np.ndarray | None = None
    groups: tuple[str, ...] = ()
    gold_counts: tuple[tuple[int, int], ...] = ()  # (class, examples): the set's gold labels
    answer_counts: tuple[tuple[int, int], ...] = ()  # (class, examples): the model's answers before any attack
    cluster: np.ndarray | None = None  # each example's cluster, an index into ``clusters``; None: none declared
    clusters: tuple[str, ...] = ()
    # each clustered example's stratum: its (group, gold label) cell, where every cluster lies in one
    # (HANS: heuristic x label, the cells the set fixes by design); None: no strata
    stratum: np.ndarray | None = None

    def only(self, golds: tuple) -> SetOutcomes:
        """The examples of these gold labels; the class counts stay the whole set's (a collapse is
        judged on the set)."""
        keep = np.isin(self.gold, list(golds))
        cut = {k: v[keep] for k, v in (("group", self.group), ("cluster", self.cluster), ("stratum", self.stratum))
               if v is not None}
        return replace(self, uids=self.uids[keep], right=self.right[keep], gold=self.gold[keep], **cut)

    def collapse(self, rule: CollapseRule = COLLAPSE) -> Collapse | None:
        """How the model's answers on this set partly collapsed (``bench.metrics.CollapseRule``)."""
        return rule(dict(self.gold_counts), dict(self.answer_counts))

    def clusters_of(self, uids: np.ndarray) -> tuple[np.ndarray, np.ndarray | None] | None:
        """The clusters of these example ids (which the set holds), as codes into ``clusters``,
        and their strata; None where the set declares no clusters."""
        if self.cluster is None:
            return None
        at = slice(None) if uids is self.uids else np.searchsorted(self.uids, uids)
        return self.cluster[at], None if self.stratum is None else self.stratum[at]

    def errors_by_group(self) -> dict[tuple[str, object], tuple[int, int]]:
        """(group, gold label) -> (examples, wrong answers), over the examples that have a group."""
        out = {}
        if self.group is None:
            return out
        for code, name in enumerate(self.groups):
            in_group = self.group == code
            for gold in sorted(set(self.gold[in_group].tolist()), key=str):
                sel = in_group & (self.gold == gold)
                out[(name, gold)] = (int(sel.sum()), int((~self.right[sel]).sum()))
        return out


def pair(mine: SetOutcomes, base: SetOutcomes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The examples both hold: their ids, and each one's outcome for the candidate and for the
    reference."""
    if np.array_equal(mine.uids, base.uids):  # the usual case: the same examples
        return mine.uids, mine.right, base.right
    uids, ia, ib = np.intersect1d(mine.uids, base.uids, assume_unique=True, return_indices=True)
    return uids, mine.right[ia], base.right[ib]


Outcomes = dict[str, SetOutcomes]  # set -> its outcomes


PARSED: dict[str, Outcomes] = {}  # predictions checksum -> outcomes (the oldest dropped first)
PARSED_MAX = 1024  # about 5 MB each for a 31,000-row HANS record
SHOWN: set[str] = set()  # the predictions checksums whose rows include rows the example browser shows


def outcomes_of(rec: Record, read: tuple[Path, bytes] | None = None) -> Outcomes:
    """A record's per-example outcomes by set ({} when its predictions were not kept, or it was
    not read from a directory), parsed once per checksum: one run is in several tables (its
    study's, the by-task one, a claims table), and parsing is most of the time of building them.
    The file is checked against the record's checksum when it is parsed, and by ``check`` on
    every build (``read``: the path and bytes that check read), not on each of the thousands of
    paired tests that ask for its outcomes. Only what the paired tests and the site's error
    browser use is kept, and what the rows give for the record's numbers (``check``): whole rows
    of a hundred HANS records would take gigabytes."""
    if read is None and rec.where is not None and rec.predictions and rec.predictions_sha256 in PARSED:
        return PARSED[rec.predictions_sha256]  # parsed and checked in this process: the file need not be looked at
    if not (rec.where is not None and rec.predictions and (rec.where / rec.predictions).resolve().is_file()):
        return {}
    if rec.predictions_sha256 not in PARSED or scoring_key(rec) not in SCORED:
        path, data = read or read_predictions(rec.where, rec)
        by_set: dict[str, dict[str, tuple]] = defaultdict(dict)  # a later row of one example replaces it
        with gc_paused():
            rows = parse_predictions(path, data)
            shown = False
            for row in rows:
                shown = shown or "result" in row or "votes" in row
                if (right := is_right(row)) is not None:
                    by_set[row["set"]][str(row["uid"])] = (right, row.get("gold"), row.get("pred"), "result" in row,
                                                                row.get("group") or "")
            scored(rec, rows)
        if shown:
            SHOWN.add(rec.predictions_sha256)
        if len(PARSED) > PARSED_MAX:
            PARSED.pop(next(iter(PARSED)))
        sums = {v for src in rec.provenance.get("data", {}).get("sources", []) for v in src.get("sha256", {}).values()}
        PARSED[rec.predictions_sha256] = {name: _arrays(rows, clusters.for_record(rec.where, name, sums))
                                          for name, rows in by_set.items()}
    return PARSED[rec.predictions_sha256]


def has_shown_rows(rec: Record) -> bool:
    """Whether the record's per-example rows include rows the example browser shows: attack rows
    (with a 'result') or certified rows (with 'votes')."""
    outcomes_of(rec)  # parses the rows, once
    return rec.predictions_sha256 in SHOWN


def _arrays(rows: dict[str, tuple], clusters: Clusters | None = None) -> SetOutcomes:
    uids = np.array(list(rows), dtype=str)
    order = np.argsort(uids, kind="stable")
    right = np.fromiter((v[0] for v in rows.values()), bool, len(rows))
    gold = np.array([v[1] for v in rows.values()] + [None], dtype=object)[:-1]  # the None keeps it 1-D
    names = sorted({v[4] for v in rows.values()} - {""})
    code = {name: i for i, name in enumerate(names)} | {"": -1}
    group = np.fromiter((code[v[4]] for v in rows.values()), np.int32, len(rows))
    golds, answers = (Counter(map(itemgetter(i), rows.values())) for i in (1, 2))  # counted in C, then kept if a class
    cluster, kinds = None, ()
    if clusters is not None:
        kinds = tuple(sorted(set(clusters.of.values())))
        at = {c: i for i, c in enumerate(kinds)}
        missing = [u for u in rows if u not in clusters.of]
        if missing:
            raise BenchError(f"the clusters of set {clusters.set} ({clusters.by}) do not name example {missing[0]}")
        cluster = np.fromiter((at[clusters.of[u]] for u in rows), np.int32, len(rows))[order]
    return SetOutcomes(uids[order], right[order], gold[order], group[order], tuple(names), _classes(golds),
                       _classes(answers), cluster, kinds, _strata(cluster, group[order], gold[order]))


def _strata(cluster: np.ndarray | None, group: np.ndarray, gold: np.ndarray) -> np.ndarray | None:
    """Each clustered example's (group, gold label) cell, where every cluster lies in one cell
    and there are several; else None."""
    if cluster is None:
        return None
    label = np.fromiter((g if type(g) is int else -1 for g in gold), np.int64, len(gold))
    cell = np.unique(np.stack([group.astype(np.int64), label]), axis=1, return_inverse=True)[1].ravel()
    per_cluster = np.unique(np.stack([cluster.astype(np.int64), cell]), axis=1).shape[1]
    return cell if per_cluster == len(np.unique(cluster)) and cell.max() > 0 else None


def _classes(counts: Counter) -> tuple[tuple[int, int], ...]:
    return tuple(sorted((k, n) for k, n in counts.items() if type(k) is int))


def is_right(row: dict) -> bool | None:
    """Whether a prediction row is right; None for an attack row without 'correct' (rows before
    per-example outcomes were kept have no 'correct' field; an attack row's outcome is not its label's)."""
    right = row.get("correct", row["gold"] == row.get("pred") if "result" not in row else None)
    return None if right is None else bool(right)


@dataclass
class Checked:
    """The records of some studies, sorted by ``check``."""

    records: list[Record] = field(default_factory=list)  # shown: their numbers are what their rows give
    rejected: list[str] = field(default_factory=list)  # one line each: left out of every table
    unverified: list[str] = field(default_factory=list)  # one line each: shown, but not re-scorable here


def check(records_dirs: list[Path]) -> Checked:
    """Read the records of ``records_dirs`` and check each against its predictions (see the
    module's docstring); F_bias is checked against the reference's recomputed metrics where the
    reference is among them."""
    out, scored = Checked(), {}
    for folder in records_dirs:
        records, unreadable = read_records(folder)
        out.rejected += unreadable
        for rec in records:
            try:
                outcomes_of(rec, read_predictions(rec.where, rec))  # there, and the run's: or one line saying why not
            except BenchError as e:
                out.rejected.append(str(e))
                continue
            got = SCORED[scoring_key(rec)]
            if isinstance(got, str):
                out.unverified.append(f"{rec.run_id}: {got}")
            elif problems := differences(rec, got):
                out.rejected.append(f"record {rec.run_id} is not what its predictions give: {'; '.join(problems[:3])}")
                continue
            scored[rec.run_id] = got
            out.records.append(rec)
    by_id = {r.run_id: r for r in out.records}
    for rec in list(out.records):
        ref = by_id.get(rec.reference or "")
        mine, theirs = scored[rec.run_id], scored.get(getattr(ref, "run_id", ""))
        if ref is None or ref is rec or isinstance(mine, str) or isinstance(theirs, str) or theirs is None:
            continue
        if problems := compared(rec, mine.metrics, theirs.metrics):
            out.rejected.append(f"record {rec.run_id} is not what its predictions give: {'; '.join(problems[:3])}")
            out.records = [r for r in out.records if r is not rec]  # this copy: another study's may pass
    return out


def checked_records(records_dir: Path) -> list[Record]:
    """The records of one study that ``check`` passes; any other is an error (a claims table or
    a headline number reads all of a study or none)."""
    found = check([records_dir])
    if found.rejected:
        raise BenchError(f"{len(found.rejected)} records fail their checks; first: {found.rejected[0]}")
    return found.records


TIMED = "eff/"  # metrics measured on the machine (size, speed), not computed from the predictions
# an attack row's wall time and adversarial text: other thread counts change them (float ties
# pick another of two equally good word swaps) while its outcome, queries and metrics stay
ROW_FREE = ("seconds", "perturbed")
PROB_NOISE = 1e-3  # class probabilities of one run on other thread counts differ in the 4th decimal
FROM_PROBS = ("ece/", "loyalty_prob/", "kl/")  # metrics of the probabilities: that noise, and no more
FROM_TEXT = "/words"  # Words%: a metric of the adversarial text, free as that text is (ROW_FREE)


def _agree(a, b, tol: float) -> bool:
    if isinstance(a, float) or isinstance(b, float):  # a record writes NaN as null
        if a is None or b is None or math.isnan(a) or math.isnan(b):
            return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
        return math.isclose(a, b, rel_tol=0.0, abs_tol=tol)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_agree(a[k], b[k], tol) for k in a if k not in ROW_FREE)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_agree(x, y, tol) for x, y in zip(a, b, strict=True))
    return a == b


def same_results(a: Record, b: Record) -> bool:
    """Whether two records of one run id report the same results: every metric but the timed
    ones and Words% equal (those of the class probabilities within their noise), and every
    per-example row equal but for float noise in its probabilities and the
    fields of ``ROW_FREE`` (the same run on 1 and on 2 CPU threads sums in another order). A run id is a
    hash of the whole configuration, so two studies may hold the same run, made on two machines
    or days; metrics are compared exactly, since one example is 1e-3 of a 1,000-example set."""
    def part(r: Record, noisy: bool) -> dict:
        return {k: v for k, v in r.metrics.items()
                if not k.startswith(TIMED) and not k.endswith(FROM_TEXT) and k.startswith(FROM_PROBS) == noisy}

    if not _agree(part(a, False), part(b, False), tol=1e-9) or not _agree(part(a, True), part(b, True), tol=PROB_NOISE):
        return False
    if a.predictions_sha256 == b.predictions_sha256:
        return True
    return _agree(load_predictions(a.where, a), load_predictions(b.where, b), tol=PROB_NOISE)


def merged(found: list[Record]) -> list[Record]:
    """Records of several studies with each run once: one run in two studies must report the
    same results there (``same_results``); the copy made from a clean tree is kept."""
    dirty = lambda r: r.provenance.get("git", {}).get("dirty") is not False  # noqa: E731
    records: dict[str, Record] = {}
    for r in found:
        seen = records.setdefault(r.run_id, r)
        if seen is not r and not same_results(seen, r):
            raise BenchError(f"run {r.run_id} is in {seen.where} and {r.where} with different results: keep one")
        if seen is not r and dirty(seen) and not dirty(r):
            records[r.run_id] = r
    return list(records.values())
