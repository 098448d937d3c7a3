"""A study's claims table, generated from its records: ``bench claims results/<study>``.

Each study folder may hold ``claims.toml``: the published claims it tests, each naming the
paper's number, the metric, the candidate and the reference it compares (by leaderboard label
and sparsity), the direction the paper reports, the metric's chance level and the smallest
effect of interest; and the families the claims were registered in. This module measures each
claim on the study's records and writes the table between ``<!-- claims:start -->`` and
``<!-- claims:end -->`` in the study's ``findings.md``; a test fails when the committed page
differs from what the records give, so no verdict is typed by hand.

A claim about a method is decided over training runs: the per-seed differences of the metric
(candidate minus reference, paired by seed), with the examples' sampling variance in their
standard error (``leaderboard.stats.crossed``). The interval is taken at 1 - 0.05 / m for a
claim of a family of m registered claims (Bonferroni): each verdict then rests on its own records
and on the family's size, fixed when the family was registered, so adding a claim later (in a new
family, or as exploratory, uncorrected) changes no other verdict. The verdict reads that
interval, by the rule of ``docs/claims.md`` (``verdict`` below, first row that applies):

1. ``not tested: ...``: a side has no records, the metric is missing, or no predictions pair.
2. ``inconclusive (k seeds)``: fewer than 3 paired seeds.
3. ``not testable at this scale``: a side did not learn its task, answers one class on more than
   95 % of the claim's balanced set in a paired seed, or its mean is within the claim's margin of
   chance.
4. ``reproduced``: the interval lies beyond zero in the paper's direction and the mean difference
   is at least the smallest effect of interest (``comparable`` claims: the interval lies within
   plus or minus that effect).
5. ``too small to matter``: beyond zero in the paper's direction, the mean below that effect.
6. ``opposite``: the interval lies beyond zero against the paper (``comparable``: wholly
   outside plus or minus the smallest effect).
7. ``varies by seed``: the interval includes zero and the seeds' differences disagree in sign.
8. ``not reached``: the interval includes zero and the seeds agree (or the claim is
   ``comparable`` and the interval straddles the smallest effect).

Every verdict says how many seeds went the paper's way; one from 3 or 4 seeds is marked
preliminary.

The file's format is ``leaderboard.claims_file``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.store.atomic import write_atomic
from bench.store.records import Record
from leaderboard.claims_file import Claim, load_claims
from leaderboard.evidence import checked_records
from leaderboard.pairing import Pairing, metric_value, paired
from leaderboard.sections import SHARE, Candidate, sections
from leaderboard.stats import ALPHA, MIN_SEEDS_FOR_INTERVAL, Crossed, crossed, fmt

START, END = "<!-- claims:start -->", "<!-- claims:end -->"
SEEDS_FOR_A_FINDING = 5  # fewer (from 3) give a preliminary verdict


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

    @property
    def paper_way(self) -> int:
        """How many seeds' differences go the paper's way."""
        c = self.claim
        if c.direction == "comparable":
            return sum(abs(d) < c.smallest_effect for d in self.seed_deltas)
        return sum(d * _sign(c) > 0 for d in self.seed_deltas)

    @property
    def verdict(self) -> str:
        """The first row of the rule (module docstring) that applies."""
        if self.problem:
            return f"not tested: {self.problem}"
        k = len(self.seeds)
        if k < MIN_SEEDS_FOR_INTERVAL or self.test is None:
            return f"inconclusive ({k} seed{'s' * (k != 1)})"
        if self.untestable:
            return "not testable at this scale"
        c, t = self.claim, self.test
        if c.direction == "comparable":
            if -c.smallest_effect <= t.low and t.high <= c.smallest_effect:
                return "reproduced"
            if t.low > c.smallest_effect or t.high < -c.smallest_effect:
                return "opposite"
            return "not reached"
        low, high = sorted((t.low * _sign(c), t.high * _sign(c)))
        if low > 0:
            return "reproduced" if t.mean * _sign(c) >= c.smallest_effect else "too small to matter"
        if high < 0:
            return "opposite"
        if any(d > 0 for d in self.seed_deltas) and any(d < 0 for d in self.seed_deltas):
            return "varies by seed"
        return "not reached"


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


def measure(claims: list[Claim], records: list[Record]) -> list[Result]:
    secs = sections(records)
    return [_measure(claim, *_section(claim, secs)) for claim in claims]


def _measure(claim: Claim, sec, cand: Candidate | None, ref: Candidate | None) -> Result:
    res = Result(claim, cand, ref)
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
    rows = (claim.set,) if claim.set else tuple(column.rows)
    seeds = [s for s in sorted(set(cand.seeds) & set(ref.seeds))
             if metric_value(cand, s, claim.metric) is not None and metric_value(ref, s, claim.metric) is not None]
    res.pairing = paired(cand, ref, claim.metric, rows, seeds, claim.gold, claim.ratio)
    if not res.pairing.n:
        res.problem = "no per-example predictions on the same examples"
        return res
    res.seeds = res.pairing.seeds  # the test, and the seed counts, on the seeds with paired examples
    res.seed_deltas = [metric_value(cand, s, claim.metric) - claim.ratio * metric_value(ref, s, claim.metric)
                       for s in res.seeds]
    res.test = crossed(res.seed_deltas, res.pairing.example_deltas, 1 - ALPHA / claim.m)
    res.untestable = _untestable(claim, cand, ref, rows, res.seeds)
    return res


def _untestable(claim: Claim, cand: Candidate, ref: Candidate, rows: tuple[str, ...], seeds: list[int]) -> str:
    """Why a side cannot carry the claim at this scale: it did not learn its task, it answers one
    class on the claim's balanced set, or it is at chance on the claim's metric."""
    why = []
    for side in (cand, ref):
        recs = [(s, r) for s in seeds if (r := side.record(s, claim.metric)) is not None]
        parts = []
        if bad := [s for s, r in recs if r.degenerate]:
            parts.append(f"did not learn its task (seed {', '.join(map(str, bad))})")
        if bad := side.one_class(claim.metric, rows, seeds):
            parts.append(f"one class on {'/'.join(rows)} (seed {', '.join(map(str, bad))})")
        mean = float(np.mean([metric_value(side, s, claim.metric) for s in seeds]))
        if mean <= claim.chance + claim.margin:
            parts.append(f"at chance ({100 * mean:.1f} %)")
        if parts:
            why.append(f"{side.name}: {', '.join(parts)}")
    return "; ".join(why)


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def _level(claim: Claim) -> str:
    return f"{100 * (1 - ALPHA / claim.m):.4g} %"


def _difference(r: Result) -> str:
    if r.problem or r.test is None or len(r.seeds) < MIN_SEEDS_FOR_INTERVAL:  # an interval needs 3 seeds
        return "–" if r.problem else f"{', '.join(_pts(d) for d in r.seed_deltas)} pts (per seed, no interval below 3 seeds)"
    t = r.test
    return (f"{_pts(t.mean)} [{_pts(t.low)}, {_pts(t.high)}] pts ({_level(r.claim)} interval, {len(r.seeds)} seeds, "
            f"{len(r.pairing.example_deltas)} examples); per seed {' / '.join(_pts(d) for d in r.seed_deltas)}")


def _verdict_cell(r: Result) -> str:
    v = r.verdict
    if v.startswith("not tested") or not r.seeds:
        return f"**{v}**"
    if v.startswith("inconclusive"):
        return f"**{v}**; {r.paper_way}/{len(r.seeds)} seeds the paper's way"
    k = len(r.seeds)
    parts = [f"**{v}**", f"{r.paper_way}/{k} seeds the paper's way"]
    if k < SEEDS_FOR_A_FINDING:
        parts.append(f"preliminary ({k} seeds)")
    if r.claim.family is None:
        parts.append("exploratory")
    if r.untestable:
        parts.append(r.untestable)
    return "; ".join(parts)


def render(results: list[Result]) -> str:
    head = ["| # | claim (paper) | published | ours: candidate | ours: reference | difference, candidate - reference "
            "| family | verdict |", "|---|---|---|---|---|---|---|---|"]
    lines, sources = [], []
    for r in results:
        c = r.claim
        seeds = r.seeds or sorted({s for x in (r.cand, r.ref) if x for s in x.seeds})
        ours = [fmt([metric_value(x, s, c.metric) for s in seeds], bounds=SHARE) if x else "–"
                for x in (r.cand, r.ref)]
        family = f"{c.family.name} ({c.m} claims)" if c.family else "exploratory"
        scaled = "" if c.ratio == 1 else f" (compared at {c.ratio:g} x)"
        lines.append(f"| {c.id} | {c.claim} ({c.paper}) | {c.published} | {c.candidate}: {ours[0]} | "
                     f"{c.reference}{scaled}: {ours[1]} | {_difference(r)} | {family} | {_verdict_cell(r)} |")
        ids = [rec.run_id for x in (r.cand, r.ref) if x for s in seeds if (rec := x.record(s, c.metric))]
        sources.append(f"- {c.id}: " + (", ".join(f"[`{rid[-12:]}`](records/{rid}.json)" for rid in ids) or "none"))
    families = sorted({c.family for c in (r.claim for r in results) if c.family}, key=lambda f: f.name)
    legend = ("Ours: mean ± sample sd over the seeds both sides have [95 % interval of the mean: Student t from 3 "
              "seeds, intersected with [0, 100], BCa bootstrap from 10], in percent. Difference: the mean of the per-seed "
              "differences (paired by seed) and its interval: Student t with seeds - 1 degrees of freedom, its "
              "standard error from the spread between seeds and from the examples' sampling (each example's "
              "difference averaged over the seeds), at 1 - 0.05/m for a claim of a family of m registered claims "
              "(Bonferroni; exploratory claims: 95 %, uncorrected), clipped to ±100. Verdict: the first row of the "
              "rule in docs/claims.md that applies, read from that interval, the claim's smallest effect of "
              "interest and chance level (claims.toml); a side at chance, answering one class on the claim's set "
              "or that did not learn its task makes a claim not testable at this scale; fewer than 3 seeds have no "
              "interval (`leaderboard/claims.py`).")
    registered = [f"- {f.name}: {', '.join(f.claims)}; registered {f.registered}" for f in families]
    return "\n".join([*head, *lines, "", legend, "", "Families (fixed when registered; their size sets the "
                      "correction):", "", *(registered or ["- none: every claim is exploratory"]), "",
                      "Records behind each claim:", "", *sources])


def splice(page: str, text: str) -> str:
    """The page with its claims block replaced, or inserted under its title."""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    block = f"{START}\n{text}\n{END}"
    if pattern.search(page):
        return pattern.sub(lambda m: block, page)
    title, _, rest = page.partition("\n") if page.startswith("# ") else ("", "", page)
    return (f"{title}\n\n" if title else "") + f"{block}\n\n{rest.lstrip()}"


def study_table(study: Path) -> str:
    return render(measure(load_claims(study / "claims.toml"), checked_records(study / "records")))


def write_table(study: Path) -> Path:
    """Measure ``study``'s claims and splice the table into its findings page (``bench claims``)."""
    table = study_table(study)
    page = study / "findings.md"
    write_atomic(page, splice(page.read_text() if page.is_file() else "", table))
    return page
