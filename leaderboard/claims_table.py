"""A study's claims table in Markdown, spliced between ``<!-- claims:start -->`` and
``<!-- claims:end -->`` in its ``findings.md`` (``bench claims``), from the claims measured and
decided by ``leaderboard.claims``; and the bootstrap check printed beside it
(``bench claims --bootstrap``)."""

from __future__ import annotations

import re
from pathlib import Path

from bench.store.atomic import write_atomic
from leaderboard.candidate import SHARE
from leaderboard.claims import Result, study_results
from leaderboard.claims_file import Claim, needed
from leaderboard.pairing import metric_value
from leaderboard.stats import MIN_SEEDS_FOR_INTERVAL, bootstrap, fmt

START, END = "<!-- claims:start -->", "<!-- claims:end -->"
SEEDS_FOR_A_FINDING = 5  # fewer (from 3) give a preliminary verdict


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def _level(claim: Claim) -> str:
    return f"{100 * claim.level:.4g} %"


def _difference(r: Result) -> str:
    if r.problem or r.test is None or len(r.seeds) < MIN_SEEDS_FOR_INTERVAL:  # an interval needs 3 seeds
        return "–" if r.problem else f"{', '.join(_pts(d) for d in r.seed_deltas)} pts (per seed, no interval below 3 seeds)"
    t, n = r.test, len(r.pairing.example_deltas)
    units = f"{n:,} examples" + (f" in {t.clusters:,} clusters" if t.clusters < n else "") + (
        f" of {t.strata} strata" if t.strata > 1 else "")
    return (f"{_pts(t.mean)} [{_pts(t.low)}, {_pts(t.high)}] pts ({_level(r.claim)} interval, t with {t.df:.1f} df; "
            f"{len(r.seeds)} seeds, {units}); per seed {' / '.join(_pts(d) for d in r.seed_deltas)}")


def _design(r: Result) -> str:
    """What the registered design can detect (plan.json), against what it must."""
    c, p = r.claim, r.plan
    must = (f"margin {100 * c.target:.1f}" if c.direction == "comparable" else
            f"paper {100 * c.target:.1f}" if c.effect is not None else f"smallest effect {100 * c.target:.1f}")
    if p is None:
        return f"no plan registered (must detect: {must})"
    if r.stale:
        return r.stale
    if p.mde is None:
        return f"MDE unknown: {p.why} (must detect: {must})"
    text = (f"MDE {100 * p.mde:.1f} pts at {p.seeds} seeds, {p.examples:,} examples"
            + (f" in {p.clusters:,} clusters" if p.clusters < p.examples else "") + f" (must detect: {must})")
    if p.mde > c.target:
        text += f"; reaching it needs {needed(p)}"
    return text + ("; post hoc" if p.post_hoc else "")


def _verdict_cell(r: Result) -> str:
    v = f"**{r.verdict}** (row {r.row})"
    if r.row == 1 or not r.seeds:
        return v
    if r.row == 2:
        return f"{v}; {r.paper_way}/{len(r.seeds)} seeds the paper's way"
    k = len(r.seeds)
    parts = [v, f"{r.paper_way}/{k} seeds the paper's way"]
    if k < SEEDS_FOR_A_FINDING:
        parts.append(f"preliminary ({k} seeds)")
    if r.claim.family is None:
        parts.append("exploratory")
    if r.exaggerated:
        parts.append(f"from a design underpowered for it ({'post hoc ' if r.plan.post_hoc else ''}MDE "
                     f"{100 * r.mde:.1f} pts): its size is likely exaggerated (type M)")
    if r.untestable:
        parts.append(r.untestable)
    return "; ".join(parts)


LEGEND = (
    "Ours: mean ± sample sd over the seeds both sides have [95 % interval of the mean: Student t from 3 seeds, "
    "intersected with [0, 100], BCa bootstrap from 10], in percent. Difference: the mean of the per-seed differences "
    "(paired by seed) and its interval: Student t with the Welch-Satterthwaite degrees of freedom of its two variance "
    "components, the spread between seeds (seeds - 1 df) and the examples' sampling (each example's difference "
    "averaged over the seeds; cluster-robust where the set declares clusters, such as HANS's subcases: clusters - 1 "
    "df), at 1 - 0.05/m for a claim of a family of m registered claims (Bonferroni; exploratory claims: 95 %, "
    "uncorrected), clipped to ±100. Design: the minimum detectable effect (MDE) of the registered design at 80 % power "
    "and the claim's level, from the pilot's variance components (plan.json, `bench plan`), against what the claim "
    "must detect: the paper's effect on this metric, else the smallest effect of interest (`comparable`: the "
    "margin); post hoc: planned when the claim's records already existed. Verdict: the first row of the rule in "
    "docs/claims.md that applies (its number in brackets), read from that interval, the design, the claim's smallest "
    "effect and chance level (claims.toml); a side at chance, collapsed or partly collapsed on the claim's set "
    "(an answer on over 85 % of a balanced set, or a gold class answered under 2 %) or that did not learn its task "
    "makes a claim not testable at this scale; fewer than 3 seeds have no interval (`leaderboard/claims.py`).")


def render(results: list[Result]) -> str:
    head = ["| # | claim (paper) | published | ours: candidate | ours: reference | difference, candidate - reference "
            "| design (80 % power) | family | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    lines, sources = [], []
    for r in results:
        c = r.claim
        seeds = r.seeds or sorted({s for x in (r.cand, r.ref) if x for s in x.seeds})
        ours = [fmt([metric_value(x, s, c.metric) for s in seeds], bounds=SHARE) if x else "–"
                for x in (r.cand, r.ref)]
        family = f"{c.family.name} ({c.m} claims)" if c.family else "exploratory"
        scaled = "" if c.ratio == 1 else f" (compared at {c.ratio:g} x)"
        lines.append(f"| {c.id} | {c.claim} ({c.paper}) | {c.published} | {c.candidate}: {ours[0]} | "
                     f"{c.reference}{scaled}: {ours[1]} | {_difference(r)} | {_design(r)} | {family} | {_verdict_cell(r)} |")
        ids = [rec.run_id for x in (r.cand, r.ref) if x for s in seeds if (rec := x.record(s, c.metric))]
        sources.append(f"- {c.id}: " + (", ".join(f"[`{rid[-12:]}`](records/{rid}.json)" for rid in ids) or "none"))
    families = sorted({c.family for c in (r.claim for r in results) if c.family}, key=lambda f: f.name)
    registered = [f"- {f.name}: {', '.join(f.claims)}; registered {f.registered}" for f in families]
    return "\n".join([*head, *lines, "", LEGEND, "", "Families (fixed when registered; their size sets the "
                      "correction):", "", *(registered or ["- none: every claim is exploratory"]), "",
                      "Records behind each claim:", "", *sources])


def bootstrap_check(results: list[Result], resamples: int = 4000) -> str:
    """Each claim's interval beside the two-way bootstrap's (``stats.bootstrap``: seeds and
    example clusters resampled together, percentile interval at the claim's level), and their
    standard errors: ``bench claims STUDY --bootstrap``. The bootstrap's variance is (k - 1) / k
    of the seeds' component and adds the seed x cluster interaction once more (docs/claims.md),
    so the two differ by that much, no more."""
    lines = ["| # | interval (t, Satterthwaite df) | bootstrap (percentile) | SE: t, bootstrap |", "|---|---|---|---|"]
    for r in results:
        if r.test is None or r.pairing is None or r.pairing.matrix is None:
            lines.append(f"| {r.claim.id} | – | – | – |")
            continue
        t = r.test
        b = bootstrap(r.pairing.matrix, r.pairing.clusters, r.claim.level, resamples, strata=r.pairing.strata)
        lines.append(f"| {r.claim.id} | {_pts(t.mean)} [{_pts(t.low)}, {_pts(t.high)}] ({t.df:.1f} df) | "
                     f"{_pts(b.mean)} [{_pts(b.low)}, {_pts(b.high)}] | {100 * t.se:.2f}, {100 * b.se:.2f} |")
    return "\n".join(lines)


def splice(page: str, text: str) -> str:
    """The page with its claims block replaced, or inserted under its title."""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    block = f"{START}\n{text}\n{END}"
    if pattern.search(page):
        return pattern.sub(lambda m: block, page)
    title, _, rest = page.partition("\n") if page.startswith("# ") else ("", "", page)
    return (f"{title}\n\n" if title else "") + f"{block}\n\n{rest.lstrip()}"


def study_table(study: Path) -> str:
    return render(study_results(study))


def write_table(study: Path) -> Path:
    """Measure ``study``'s claims and splice the table into its findings page (``bench claims``)."""
    table = study_table(study)
    page = study / "findings.md"
    write_atomic(page, splice(page.read_text() if page.is_file() else "", table))
    return page
