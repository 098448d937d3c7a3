"""A study's claims table, generated from its records: ``bench claims results/<study>``.

Each study folder may hold ``claims.toml``: the published claims it tests, each naming the
paper's number and effect, the metric, the candidate and the reference it compares (by
leaderboard label and sparsity), the direction the paper reports, the metric's chance level and
the smallest effect of interest; the families the claims were registered in; and beside it
``plan.json``, each claim's registered design and its minimum detectable effect
(``bench plan --register``, ``leaderboard.plan``). This module measures each claim on the
study's records and decides its verdict; ``leaderboard.claims_table`` writes the table into the
study's ``findings.md``, and a test fails when the committed page differs from what the records
give, so no verdict is typed by hand.

A claim about a method is decided over training runs: the per-seed differences of the metric
(candidate minus reference, paired by seed), with the examples' sampling variance (cluster-
robust where the set declares clusters) in their standard error and the Welch-Satterthwaite
degrees of freedom of the two (``leaderboard.stats.crossed``). The interval is taken at
1 - 0.05 / m for a claim of a family of m registered claims (Bonferroni): each verdict then rests
on its own records and on the family's size, fixed when the family was registered, so adding a
claim later (in a new family, or as exploratory, uncorrected) changes no other verdict. The
verdict reads that interval by the rule of ``docs/claims.md`` (``RULE``, first row that applies).

Every verdict says how many seeds went the paper's way; one from 3 or 4 seeds is marked
preliminary.

The file's format is ``leaderboard.claims_file``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.store.records import Record
from leaderboard.candidate import Candidate
from leaderboard.claims_file import PLAN, Claim, Registered, load_claims, read_plan
from leaderboard.evidence import checked_records
from leaderboard.pairing import Pairing, metric_value, paired
from leaderboard.power import Components
from leaderboard.power import mde as detectable
from leaderboard.sections import sections
from leaderboard.stats import MIN_SEEDS_FOR_INTERVAL, Crossed, crossed
from leaderboard.table import collapse, labels

# The rule: (row, verdict, when). The first row that applies gives the verdict; docs/claims.md
# prints this table and a test checks each row.
RULE = (
    (1, "not tested", "a side has no records, the metric is missing, no per-example predictions pair, or the "
     "examples' clusters leave their variance no degree of freedom"),
    (2, "inconclusive", "fewer than 3 paired seeds"),
    (3, "not testable at this scale", "a side is at chance, did not learn its task, or has collapsed or partly "
     "collapsed on the claim's set, on a paired seed"),
    (4, "reproduced", "the interval lies beyond zero the paper's way and the mean is at least the smallest effect; "
     "`comparable`: the interval lies within ± the margin (the smallest effect)"),
    (5, "too small to matter", "the interval lies beyond zero the paper's way, the mean below the smallest effect "
     "(not for `comparable`)"),
    (6, "opposite", "the interval lies beyond zero against the paper; `comparable`: wholly outside ± the margin"),
    (7, "against the paper, not significant", "the interval includes zero and the mean is against the paper "
     "(not for `comparable`)"),
    (8, "underpowered", "the interval includes zero and what the claim must detect (the paper's effect, else its "
     "smallest effect; `comparable`: it straddles a bound of ± the margin), and the minimum detectable effect of "
     "the design as run (plan.json's, at the seeds and examples run) is above that, which is above 0; `post hoc` "
     "where the plan was made from the claim's own records"),
    (9, "varies by seed", "the interval includes zero and the per-seed differences disagree in sign "
     "(not for `comparable`)"),
    (10, "not reached", "the interval includes zero and the per-seed differences agree (or are all zero); "
     "`comparable`: the interval straddles a bound of ± the margin"),
)


@dataclass
class Result:
    claim: Claim
    cand: Candidate | None
    ref: Candidate | None
    seeds: list[int] = field(default_factory=list)
    pairing: Pairing | None = None
    seed_deltas: list[float] = field(default_factory=list)  # candidate minus reference, per seed
    test: Crossed | None = None
    problem: str = ""  # why it was not tested
    untestable: str = ""  # why it cannot be tested at this scale
    plan: Registered | None = None  # its registered design (plan.json), None where none
    rows: tuple[str, ...] = ()  # the sets whose examples it pairs

    @property
    def paper_way(self) -> int:
        """How many seeds' differences go the paper's way."""
        c = self.claim
        if c.direction == "comparable":
            return sum(abs(d) < c.smallest_effect for d in self.seed_deltas)
        return sum(d * _sign(c) > 0 for d in self.seed_deltas)

    @property
    def stale(self) -> str:
        """Why the registered plan no longer describes this claim ("" when it does): its level or
        its target changed since it was planned."""
        p, c = self.plan, self.claim
        if p is None:
            return ""
        if abs(p.level - c.level) > 1e-9 or abs(p.target - c.target) > 1e-9:
            return (f"plan.json is stale (planned at level {100 * p.level:.4g} % for {100 * p.target:.1f} pts; the claim "
                    f"now asks {100 * c.level:.4g} % and {100 * c.target:.1f}): bench plan again")
        return ""

    @property
    def mde(self) -> float | None:
        """The minimum detectable effect of the design as run: the registered MDE, or where the
        seeds or examples run differ from the registered ones, the MDE of those from the plan's
        variance components; None without a (current) plan."""
        p = self.plan
        if p is None or p.mde is None or self.stale or self.pairing is None:
            return None
        k, n = len(self.seeds), len(self.pairing.example_deltas)
        if (k, n) == (p.seeds, p.examples) or not p.pilot:
            return p.mde
        return detectable(Components(**p.pilot), k, n, self.claim.level, equivalence=self.claim.direction == "comparable")

    @property
    def underpowered(self) -> bool:
        """Row 8's second half: the design as run cannot detect what the claim must (a target of 0
        cannot be detected by any design, and is not called underpowered), and for a directional
        claim the interval still holds that target (where it excludes it, the data have ruled the
        paper's size out, and rows 9 and 10 say so)."""
        c, t, m = self.claim, self.test, self.mde
        if m is None or t is None or c.target <= 0 or m <= c.target:
            return False
        return c.direction == "comparable" or min(t.low * _sign(c), t.high * _sign(c)) <= c.target <= max(
            t.low * _sign(c), t.high * _sign(c))

    @property
    def exaggerated(self) -> bool:
        """A significant difference from a design whose MDE is above the paper's effect: likely
        larger than the truth if the paper's is (a type M error, Gelman and Carlin 2014), so its
        size is flagged. Without a published effect on the metric there is no plausible size to
        measure the exaggeration against."""
        return (self.row in (4, 5, 6) and self.claim.effect is not None and self.mde is not None
                and self.mde > self.claim.target)

    @property
    def row(self) -> int:
        """The first row of ``RULE`` that applies."""
        if self.problem:
            return 1
        if len(self.seeds) < MIN_SEEDS_FOR_INTERVAL or self.test is None:
            return 2
        if self.untestable:
            return 3
        c, t = self.claim, self.test
        if c.direction == "comparable":
            if -c.smallest_effect <= t.low and t.high <= c.smallest_effect:
                return 4
            if t.low > c.smallest_effect or t.high < -c.smallest_effect:
                return 6
            return 8 if self.underpowered else 10
        low, high = sorted((t.low * _sign(c), t.high * _sign(c)))
        if low > 0:
            return 4 if t.mean * _sign(c) >= c.smallest_effect else 5
        if high < 0:
            return 6
        if t.mean * _sign(c) < 0:
            return 7
        if self.underpowered:
            return 8
        if any(d > 0 for d in self.seed_deltas) and any(d < 0 for d in self.seed_deltas):
            return 9
        return 10

    @property
    def verdict(self) -> str:
        row = self.row
        if row == 1:
            return f"not tested: {self.problem}"
        if row == 2:
            k = len(self.seeds)
            return f"inconclusive ({k} seed{'s' * (k != 1)})"
        if row == 8:
            return f"underpowered ({'post hoc ' if self.plan.post_hoc else ''}MDE {100 * self.mde:.1f} pts)"
        return RULE[row - 1][1]


def _sign(c: Claim) -> float:
    return -1.0 if c.direction == "lower" else 1.0


def _section(claim: Claim, secs: list) -> tuple:
    """The table (task, backbone) holding both sides of the claim, and the two candidates."""
    found = []
    for sec in secs:
        if claim.task and sec.task != claim.task:
            continue
        cand = next((c for c in sec.candidates if claim.candidate.matches(c)), None)
        ref = next((c for c in sec.candidates if claim.reference.matches(c)), None)
        found.append((sec, cand, ref))
    both = [f for f in found if f[1] and f[2]]
    if len(both) > 1:
        raise BenchError(f"claim '{claim.claim}' matches candidates in {len(both)} tables "
                         f"({', '.join(f'{f[0].task}/{f[0].backbone}' for f in both)}): name its task")
    return both[0] if both else max(found, key=lambda f: (f[1] is not None) + (f[2] is not None), default=(None, None, None))


def measure(claims: list[Claim], records: list[Record], plan: dict[str, Registered] | None = None) -> list[Result]:
    secs = sections(records)
    return [measure_one(claim, secs, (plan or {}).get(claim.id)) for claim in claims]


def measure_one(claim: Claim, secs: list, plan: Registered | None = None) -> Result:
    """One claim measured on the tables ``secs`` (``leaderboard.sections``)."""
    return _measure(claim, *_section(claim, secs), plan)


def _measure(claim: Claim, sec, cand: Candidate | None, ref: Candidate | None, plan: Registered | None = None) -> Result:
    res = Result(claim, cand, ref, plan=plan)
    missing = [str(s) for s, c in ((claim.candidate, cand), (claim.reference, ref)) if c is None]
    if missing:
        res.problem = f"no {claim.task + ' ' if claim.task else ''}records of {' and '.join(missing)}"
        return res
    column = next((c for c in sec.columns if c.key == claim.metric), None)
    if column is None:
        res.problem = f"no metric {claim.metric}"
        return res
    if column.kind != "percent" or not (claim.set or column.rows):
        raise BenchError(f"claim '{claim.claim}': {claim.metric} is not an accuracy over named examples (kind "
                         f"{column.kind}, sets {list(column.rows) or 'none'}); a claims table pairs per-example "
                         "outcomes, so claim an accuracy (with `set` for a mean of cells)")
    rows = res.rows = (claim.set,) if claim.set else tuple(column.rows)
    seeds = [s for s in sorted(set(cand.seeds) & set(ref.seeds))
             if metric_value(cand, s, claim.metric) is not None and metric_value(ref, s, claim.metric) is not None]
    res.pairing = paired(cand, ref, claim.metric, rows, seeds, claim.gold, claim.ratio)
    if not res.pairing.n:
        res.problem = "no per-example predictions on the same examples"
        return res
    res.seeds = res.pairing.seeds  # the test, and the seed counts, on the seeds with paired examples
    res.seed_deltas = [metric_value(cand, s, claim.metric) - claim.ratio * metric_value(ref, s, claim.metric)
                       for s in res.seeds]
    res.test = crossed(res.seed_deltas, res.pairing.example_deltas, claim.level, clusters=res.pairing.clusters,
                       strata=res.pairing.strata)
    if res.test is None and len(res.seeds) > 1:
        res.problem = "the examples' clusters leave the example variance no degree of freedom"
    res.untestable = _untestable(claim, cand, ref, rows, res.seeds, labels(sec))
    return res


def _untestable(claim: Claim, cand: Candidate, ref: Candidate, rows: tuple[str, ...], seeds: list[int],
                names: dict[str, list[str]] | None = None) -> str:
    """Why a side cannot carry the claim at this scale: it did not learn its task, its answers
    collapsed or partly collapsed on the claim's set (``bench.metrics.CollapseRule``, with the
    claims file's thresholds; its class by name, ``names``), or it is at chance on the claim's
    metric."""
    why = []
    for side in (cand, ref):
        recs = [(s, r) for s in seeds if (r := side.record(s, claim.metric)) is not None]
        parts = []
        if bad := [s for s, r in recs if r.degenerate]:
            parts.append(f"did not learn its task (seed {', '.join(map(str, bad))})")
        if bad := side.collapsed_on(claim.metric, rows, seeds, claim.collapse):
            parts.append(f"on {'/'.join(rows)}: " + "; ".join(f"seed {s} partial collapse ({collapse(names, on, how)})"
                                                             for s, (on, how) in bad.items()))
        mean = float(np.mean([metric_value(side, s, claim.metric) for s in seeds]))
        if mean <= claim.chance + claim.margin:
            parts.append(f"at chance ({100 * mean:.1f} %)")
        if parts:
            why.append(f"{side.name}: {', '.join(parts)}")
    return "; ".join(why)


def study_results(study: Path) -> list[Result]:
    """The study's claims measured on its records, with their registered designs (none yet: a
    study whose claims were registered before its first record)."""
    records = checked_records(study / "records") if (study / "records").is_dir() else []
    return measure(load_claims(study / "claims.toml"), records, read_plan(study / PLAN))
