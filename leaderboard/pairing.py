"""Each candidate against the reference, paired by seed and by example.

Over the seeds both have, the per-seed differences of a column with the examples' sampling
variance in the standard error (``leaderboard.stats.crossed``), Holm-corrected across the tests
with at least 3 paired seeds; with one seed, the exact McNemar test of two fixed models. A
candidate that ran on another device is paired with the reference's run there (``twin``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from bench.store.records import Column
from leaderboard.candidate import Candidate
from leaderboard.evidence import outcomes_of, pair
from leaderboard.stats import ALPHA, MIN_SEEDS_FOR_INTERVAL, Crossed, crossed, holm


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


def test(cand: Candidate, ref: Candidate, col: Column) -> Test | None:
    """``cand`` against ``ref`` on column ``col``, over the seeds both have (None where no
    example pairs)."""
    pairing = paired(cand, ref, col.key, col.rows, cand.seeds)
    if not pairing.n:
        return None
    deltas = [mine_v - ref_v for s in pairing.seeds  # the seeds behind the pairs
              if (mine_v := metric_value(cand, s, col.key)) is not None
              and (ref_v := metric_value(ref, s, col.key)) is not None]
    return Test(cand, col, ref, pairing, deltas,
                crossed(deltas, pairing.example_deltas, clusters=pairing.clusters, strata=pairing.strata))


def _holm(tests: list[Test]) -> list[Test]:
    """Holm-adjust the tests that can decide something (3 or more paired seeds), in place."""
    family = [t for t in tests if len(t.seed_deltas) >= MIN_SEEDS_FOR_INTERVAL]
    for t, adjusted in zip(family, holm([t.result.p for t in family]), strict=True):
        t.p_holm = adjusted
    return tests


def tests(candidates: list[Candidate], columns: list[Column], ref: Candidate | None) -> list[Test]:
    """Every candidate against the reference (or its twin) on each main column with examples,
    Holm-corrected together."""
    if ref is None:
        return []
    found = []
    for col in (c for c in columns if c.rows and c.table == "main"):
        for cand in candidates:
            mate = twin(ref, cand, candidates)
            if mate is None or cand is mate or cand.degenerate:
                continue
            if (t := test(cand, mate, col)) is not None:
                found.append(t)
    return _holm(found)


def pairwise(ranked: list[Candidate], col: Column) -> list[Test]:
    """Every pair of ranked rows on the ranking column (the same paired test as ``tests``), Holm-
    corrected together; rows on different devices are not compared (``twin``'s reason)."""
    found = [t for i, a in enumerate(ranked) for b in ranked[i + 1:]
             if device(a) == device(b) and (t := test(a, b, col)) is not None]
    return _holm(found)


@dataclass(frozen=True)
class Pairing:
    """Two candidates' outcomes on the same examples, seed by seed: how many pairs, the two
    discordant counts over every seed (the McNemar test of two fixed models, where there is one
    seed), the seeds that gave pairs, each example's difference in correctness (candidate minus
    reference) averaged over those seeds (the example level of ``stats.crossed``) and its
    cluster, and where every seed paired the same examples, the seeds x examples differences
    (``stats.bootstrap``, ``power.components``)."""

    n: int
    b: int
    c: int
    seeds: list[int]
    example_deltas: np.ndarray
    clusters: np.ndarray | None = None  # each example's cluster; None: every example its own
    matrix: np.ndarray | None = None  # seeds x examples, where every seed has the same examples
    strata: np.ndarray | None = None  # each example's stratum (the cell its cluster lies in); None: none

    @property
    def delta(self) -> float:
        return (self.b - self.c) / self.n if self.n else 0.0


def paired(cand: Candidate, ref: Candidate, key: str, rows: tuple[str, ...], seeds,
           golds: tuple = (), ratio: float = 1.0) -> Pairing:
    """Every seed's examples of ``rows`` that both candidates' records of ``key`` hold (those
    with gold label in ``golds``, if given); each example's difference is the candidate's
    outcome less ``ratio`` times the reference's. An example's cluster is the one its set
    declares (``bench.store.clusters``: HANS's templates), within the (group, gold label) cell it
    lies in, else its id: the rows of several sets that share an id (one source example under
    several attacks, one claim in two FEVER versions) are one unit. Both sides read the same data
    file, so their clusters are the same; the candidate's are used."""
    per_seed: list[tuple] = []  # (ids, candidate minus reference, clusters, strata)
    with_pairs = []
    n = b = c = 0
    names = tuple(dict.fromkeys(rows))  # a set named twice is still one set
    for s in sorted(seeds):
        mine, base = cand.record(s, key), ref.record(s, key)
        if mine is None or base is None:
            continue
        mine, base = outcomes_of(mine), outcomes_of(base)
        ids, diffs, units, cells = [], [], [], []
        for name in names:
            if name in mine and name in base:
                a, r = (mine[name].only(golds), base[name].only(golds)) if golds else (mine[name], base[name])
                uids, x, y = pair(a, r)
                n, b, c = n + len(uids), b + int(np.count_nonzero(x & ~y)), c + int(np.count_nonzero(~x & y))
                ids.append(np.char.add(f"{name}\x00", uids) if len(names) > 1 else uids)
                diffs.append(x.astype(np.int8) - y.astype(np.int8) if ratio == 1 else x - ratio * y)
                declared = a.clusters_of(uids)
                if declared is None:
                    units.append(uids)  # an example is its own cluster, or one with its namesakes of other sets
                    cells.append(None)
                elif len(names) == 1:
                    units.append(declared[0])
                    cells.append(declared[1])
                else:  # pooled sets: clusters named by their set, strata left out (conservative)
                    units.append(np.char.add(f"{name}\x00", declared[0].astype(str)))
                    cells.append(None)
        if ids and sum(map(len, ids)):
            with_pairs.append(s)
            clustered = len(names) > 1 or any(u is not i for u, i in zip(units, ids, strict=True))
            stratified = len(names) == 1 and cells[0] is not None
            per_seed.append((np.concatenate(ids), np.concatenate(diffs), np.concatenate(units) if clustered else None,
                             cells[0] if stratified else None))
    return Pairing(n, b, c, with_pairs, *_by_example(per_seed))


def _by_example(per_seed: list) -> tuple:
    """Each example's difference averaged over the seeds that paired it, its cluster, the seeds
    x examples matrix where every seed paired the same examples, and each example's stratum."""
    if not per_seed:
        return np.zeros(0), None, None, None
    first = per_seed[0][0]
    if all(np.array_equal(ids, first) for ids, _, _, _ in per_seed):  # the usual case: every seed on the same examples
        matrix = np.stack([d for _, d, _, _ in per_seed]).astype(float)
        return matrix.mean(axis=0), per_seed[0][2], matrix, per_seed[0][3]
    ids = np.concatenate([i for i, _, _, _ in per_seed])
    diffs = np.concatenate([d for _, d, _, _ in per_seed]).astype(float)
    _, first_at, inverse = np.unique(ids, return_index=True, return_inverse=True)
    means = np.bincount(inverse, weights=diffs) / np.bincount(inverse)
    units = None if any(u is None for _, _, u, _ in per_seed) else np.concatenate([u for _, _, u, _ in per_seed])[first_at]
    cells = None if any(c is None for _, _, _, c in per_seed) else np.concatenate([c for _, _, _, c in per_seed])[first_at]
    return means, units, None, cells


def metric_value(c: Candidate, seed: int, key: str) -> float | None:
    """The metric of ``seed``'s record, None when missing or not finite."""
    rec = c.record(seed, key)
    v = rec.metrics.get(key) if rec else None
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


