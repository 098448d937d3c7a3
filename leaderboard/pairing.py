"""Each candidate against the reference, paired by seed and by example.

Over the seeds both have, the per-seed differences of a column with the examples' sampling
variance in the standard error (``leaderboard.stats.crossed``), Holm-corrected across the tests
with at least 3 paired seeds; with one seed, the exact McNemar test of two fixed models. A
candidate that ran on another device is paired with the reference's run there (``twin``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from bench.store.records import Column
from leaderboard.evidence import outcomes_of, pair
from leaderboard.stats import ALPHA, MIN_SEEDS_FOR_INTERVAL, Crossed, crossed, holm

if TYPE_CHECKING:
    from leaderboard.sections import Candidate

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


def tests(candidates: list[Candidate], columns: list[Column], ref: Candidate | None) -> list[Test]:
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


