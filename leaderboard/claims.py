"""A study's claims table, generated from its records: ``python -m leaderboard.claims results/<study>``.

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

Example (``results/quickstart/claims.toml``)::

    [defaults]
    chance = 0.5                        # a balanced two-label set
    margin = 0.01                       # within 1 point of chance is at chance
    smallest_effect = 0.01              # 1 point

    [[family]]
    name = "clark2019"
    registered = "with the study's first records"
    claims = ["poe-hans", "poe-non-entailment", "poe-id"]

    [[claim]]
    id = "poe-non-entailment"
    paper = "Clark et al. 2019, table 3"
    claim = "PoE raises HANS non-entailment accuracy over CE"
    published = "non-entailment 23.9 -> 47.3 (bert-base, MNLI)"
    metric = "ood/hans_synth/mean/non-entailment"
    set = "hans_synth"                  # the paired examples (default: the metric's own rows)
    gold = [1]                          # only these gold labels (non-entailment)
    candidate = { label = "finetune (poe)" }
    reference = { label = "finetune (ce)" }
    direction = "higher"                # or "lower", or "comparable"
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.core.atomic import write_atomic
from bench.core.records import Record
from bench.errors import BenchError
from leaderboard.build import SHARE, Candidate, Pairing, metric_value, paired, sections
from leaderboard.evidence import checked_records
from leaderboard.stats import ALPHA, MIN_SEEDS_FOR_INTERVAL, Crossed, crossed, fmt

START, END = "<!-- claims:start -->", "<!-- claims:end -->"
SEEDS_FOR_A_FINDING = 5  # fewer (from 3) give a preliminary verdict
DIRECTIONS = ("higher", "lower", "comparable")
NUMBERS = ("chance", "margin", "smallest_effect")


@dataclass(frozen=True)
class Select:
    label: str
    sparsity: float | None = None
    variant: str = ""

    def matches(self, c: Candidate) -> bool:
        return c.label == self.label and c.target == self.sparsity and c.variant == self.variant

    def __str__(self) -> str:
        return (self.label + ("" if self.sparsity is None else f" {self.sparsity:.0%}")
                + (f" [{self.variant}]" if self.variant else ""))


@dataclass(frozen=True)
class Family:
    """Claims registered together before their verdicts were known: the multiple-comparison
    correction is over exactly these, so its size never changes with later claims."""

    name: str
    registered: str
    claims: tuple[str, ...]


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    claim: str
    published: str
    metric: str
    candidate: Select
    reference: Select
    direction: str  # "higher", "lower" (candidate vs reference, as the paper reports) or "comparable"
    chance: float  # the metric of a model that carries no information (balanced two labels: 0.5)
    margin: float  # a side whose mean is within this of chance is at chance
    smallest_effect: float  # the smallest difference of interest, as a fraction
    task: str = ""
    set: str = ""
    gold: tuple[int, ...] = ()
    ratio: float = 1.0  # compare the candidate with ratio x reference ("keeps 95 % of its accuracy": 0.95)
    family: Family | None = None  # None: exploratory, uncorrected

    @property
    def m(self) -> int:
        return len(self.family.claims) if self.family else 1


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


def load_claims(path: Path) -> list[Claim]:
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise BenchError(f"claims file {path} is unreadable: {e}") from None
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict) or set(defaults) - set(NUMBERS):
        raise BenchError(f"{path}: [defaults] may set only {', '.join(NUMBERS)}")
    families = _families(path, raw.get("family", []))
    out, seen = [], set()
    for i, c in enumerate(raw.get("claim", []), 1):
        def bad(what: str, i: int = i) -> BenchError:
            return BenchError(f"{path}: claim {i}: {what}")

        try:
            if c["direction"] not in DIRECTIONS:
                raise bad(f"direction must be one of {', '.join(DIRECTIONS)}, got {c['direction']!r}")
            for key in ("id", "paper", "claim", "published", "metric", "task", "set"):
                if not isinstance(c.get(key, ""), str):
                    raise bad(f"{key} must be a string, got {c[key]!r}")
            if not c["id"] or c["id"] in seen:
                raise bad(f"id must be a non-empty string no other claim has, got {c['id']!r}")
            seen.add(c["id"])
            ratio = c.get("ratio", 1.0)
            if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 1:
                raise bad(f"ratio must be a fraction in (0, 1], got {ratio!r}")
            gold = c.get("gold", [])
            if not isinstance(gold, list) or not all(isinstance(g, int) and not isinstance(g, bool) for g in gold):
                raise bad(f"gold must be a list of label indices, got {gold!r}")
            numbers = {k: c.get(k, defaults.get(k)) for k in NUMBERS}
            for k, v in numbers.items():
                if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 1:
                    raise bad(f"{k} must be a fraction in [0, 1) (here or in [defaults]), got {v!r}")
            out.append(Claim(id=c["id"], paper=c["paper"], claim=c["claim"], published=c["published"],
                             metric=c["metric"], candidate=_select(c["candidate"], bad),
                             reference=_select(c["reference"], bad), direction=c["direction"],
                             task=c.get("task", ""), set=c.get("set", ""), gold=tuple(gold), ratio=float(ratio),
                             family=families.get(c["id"]), **{k: float(v) for k, v in numbers.items()}))
        except (KeyError, TypeError) as e:
            raise BenchError(f"{path}: claim {i} is malformed ({type(e).__name__}: {e})") from None
    if missing := sorted({cid for f in families.values() for cid in f.claims} - seen):
        raise BenchError(f"{path}: a family registers claims that do not exist: {', '.join(missing)}")
    return out


def _families(path: Path, raw: list) -> dict[str, Family]:
    """Claim id -> its family; a claim is in one family at most."""
    out: dict[str, Family] = {}
    for j, f in enumerate(raw, 1):
        try:
            fam = Family(str(f["name"]), str(f["registered"]), tuple(f["claims"]))
        except (KeyError, TypeError) as e:
            raise BenchError(f"{path}: family {j} is malformed ({type(e).__name__}: {e})") from None
        if not fam.claims or not all(isinstance(cid, str) for cid in fam.claims):
            raise BenchError(f"{path}: family {fam.name}: claims must be a non-empty list of claim ids")
        for cid in fam.claims:
            if cid in out:
                raise BenchError(f"{path}: claim {cid} is in two families ({out[cid].name} and {fam.name})")
            out[cid] = fam
    return out


def _select(d: dict, bad) -> Select:
    """A side of a claim: a leaderboard label, a target sparsity as a fraction, a variant string."""
    sel = Select(**d)
    if not isinstance(sel.label, str) or not isinstance(sel.variant, str):
        raise bad(f"label and variant must be strings, got {d!r}")
    if sel.sparsity is not None and (isinstance(sel.sparsity, bool) or not isinstance(sel.sparsity, int | float)
                                     or not 0 <= sel.sparsity < 1):
        raise bad(f"sparsity must be a fraction in [0, 1), got {sel.sparsity!r}")
    return sel


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
    if r.problem or r.test is None:
        return "–" if r.problem else f"{', '.join(_pts(d) for d in r.seed_deltas)} pts (per seed)"
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


def main(argv: list[str] | None = None) -> int:
    studies = [Path(a) for a in (argv if argv is not None else sys.argv[1:])]
    if not studies:
        print("usage: python -m leaderboard.claims results/<study> [...]", file=sys.stderr)
        return 2
    for study in studies:
        try:
            table = study_table(study)
        except BenchError as e:
            print(f"claims: error: {e}", file=sys.stderr)
            return 2
        page = study / "findings.md"
        write_atomic(page, splice(page.read_text() if page.is_file() else "", table))
        print(f"claims table written to {page}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
