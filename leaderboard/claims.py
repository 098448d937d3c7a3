"""A study's claims table, generated from its records: ``python -m leaderboard.claims results/<study>``.

Each study folder may hold ``claims.toml``: the published claims it tests, each naming the
paper's number, the metric, the candidate and the reference it compares (by leaderboard label
and sparsity) and the direction the paper reports. This module measures each claim on the
study's records and writes the table between ``<!-- claims:start -->`` and ``<!-- claims:end -->``
in the study's ``findings.md``; a test fails when the committed page differs from what the
records give, so no verdict is typed by hand.

Per claim: the candidate's and the reference's metric over seeds (mean ± sd [95 % t-interval],
``leaderboard.stats``) and two paired tests, because they answer different questions:

- on examples: the same examples of the seeds both have, every seed pooled, exact McNemar,
  Holm-corrected across the page's claims that have 5 paired seeds (the others get no verdict, so
  they stay out of the family). Do these trained models differ?
- over seeds: the per-seed differences of the metric, paired t-test (n - 1 degrees of
  freedom), Holm-corrected likewise. Does the method's effect stand out from the variation
  between training runs? A difference can pass the first and fail the second when it is large
  on some seeds and absent or reversed on others.

The verdict:

- ``reproduced``: 5 or more paired seeds, both tests significant (Holm p < 0.05) in the paper's
  direction;
- ``opposite``: the same, against it;
- ``not at this scale``: 5 or more paired seeds and neither test significant;
- ``varies by seed``: the example test is significant, the seed test is not;
- ``inconclusive (tests disagree)``: only the seed test is significant, or the two point in
  opposite directions;
- ``inconclusive (k seeds)``: fewer than 5 paired seeds (DESIGN: a finding that rests on a
  difference of a few points needs 5 seeds and a paired test);
- ``not tested: ...``: a side has no records, or one of them did not learn its task.

Example (``results/quickstart/claims.toml``)::

    [[claim]]
    paper = "Clark et al. 2019, table 3"
    claim = "PoE raises HANS non-entailment accuracy over CE"
    published = "non-entailment 23.9 -> 47.3 (bert-base, MNLI)"
    metric = "ood/hans_synth/mean/non-entailment"
    set = "hans_synth"                  # the paired examples (default: the metric's own rows)
    gold = [1]                          # only these gold labels (non-entailment)
    candidate = { label = "finetune (poe)" }
    reference = { label = "finetune (ce)" }
    direction = "higher"
"""

from __future__ import annotations

import math
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.core.atomic import write_atomic
from bench.core.records import Record, load_checked_records
from bench.errors import BenchError
from leaderboard.build import Candidate, metric_value, paired, sections
from leaderboard.stats import ALPHA, fmt, holm, mcnemar, paired_t

START, END = "<!-- claims:start -->", "<!-- claims:end -->"
SEEDS_FOR_A_FINDING = 5


@dataclass(frozen=True)
class Select:
    label: str
    sparsity: float | None = None
    variant: str = ""

    def matches(self, c: Candidate) -> bool:
        return c.label == self.label and c.target == self.sparsity and c.variant == self.variant

    def __str__(self) -> str:
        return self.label + ("" if self.sparsity is None else f" {self.sparsity:.0%}") + (f" [{self.variant}]" if self.variant else "")


@dataclass(frozen=True)
class Claim:
    paper: str
    claim: str
    published: str
    metric: str
    candidate: Select
    reference: Select
    direction: str  # "higher" or "lower": what the paper reports for candidate vs reference
    task: str = ""
    set: str = ""
    gold: tuple[int, ...] = ()


@dataclass
class Result:
    claim: Claim
    cand: Candidate | None
    ref: Candidate | None
    seeds: list[int] = field(default_factory=list)
    pairs: int = 0
    delta: float = 0.0  # on examples: candidate minus reference, share of the paired examples right
    p: float = 1.0
    p_holm: float = math.nan  # NaN: outside the Holm family (fewer than 5 paired seeds, no verdict)
    seed_deltas: list[float] = field(default_factory=list)  # over seeds: the metric's differences
    seed_p: float = 1.0
    seed_p_holm: float = math.nan
    problem: str = ""

    @property
    def verdict(self) -> str:
        if self.problem:
            return f"not tested: {self.problem}"
        if len(self.seeds) < SEEDS_FOR_A_FINDING:
            return f"inconclusive ({len(self.seeds)} seed{'s' * (len(self.seeds) != 1)})"
        examples, seeds = self.p_holm < ALPHA, self.seed_p_holm < ALPHA
        if not examples and not seeds:
            return "not at this scale"
        if examples and not seeds:
            return "varies by seed"
        if seeds and not examples:
            return "inconclusive (tests disagree)"
        if (self.delta > 0) != (float(np.mean(self.seed_deltas)) > 0):
            return "inconclusive (tests disagree)"
        return "reproduced" if (self.delta > 0) == (self.claim.direction == "higher") else "opposite"


def load_claims(path: Path) -> list[Claim]:
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise BenchError(f"claims file {path} is unreadable: {e}") from None
    out = []
    for i, c in enumerate(raw.get("claim", []), 1):
        def bad(what: str, i: int = i) -> BenchError:
            return BenchError(f"{path}: claim {i}: {what}")

        try:
            if c["direction"] not in ("higher", "lower"):
                raise bad(f"direction must be 'higher' or 'lower', got {c['direction']!r}")
            for key in ("paper", "claim", "published", "metric", "task", "set"):
                if not isinstance(c.get(key, ""), str):
                    raise bad(f"{key} must be a string, got {c[key]!r}")
            gold = c.get("gold", [])
            if not isinstance(gold, list) or not all(isinstance(g, int) and not isinstance(g, bool) for g in gold):
                raise bad(f"gold must be a list of label indices, got {gold!r}")
            out.append(Claim(paper=c["paper"], claim=c["claim"], published=c["published"], metric=c["metric"],
                             candidate=_select(c["candidate"], bad), reference=_select(c["reference"], bad),
                             direction=c["direction"], task=c.get("task", ""), set=c.get("set", ""), gold=tuple(gold)))
        except (KeyError, TypeError) as e:
            raise BenchError(f"{path}: claim {i} is malformed ({type(e).__name__}: {e})") from None
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
    results = []
    for claim in claims:
        sec, cand, ref = _section(claim, secs)
        res = Result(claim, cand, ref)
        results.append(res)
        missing = [str(s) for s, c in ((claim.candidate, cand), (claim.reference, ref)) if c is None]
        if missing:
            res.problem = f"no {claim.task + ' ' if claim.task else ''}records of {' and '.join(missing)}"
            continue
        if bad := [c.name for c in (cand, ref) if c.degenerate]:
            res.problem = f"{' and '.join(bad)} did not learn the task (degenerate)"
            continue
        column = next((c for c in sec.columns if c.key == claim.metric), None)
        if column is None:
            res.problem = f"no metric {claim.metric}"
            continue
        if column.kind != "percent" or not (claim.set or column.rows):
            raise BenchError(f"claim '{claim.claim}': {claim.metric} is not an accuracy over named examples (kind "
                             f"{column.kind}, sets {list(column.rows) or 'none'}); a claims table pairs per-example "
                             "outcomes, so claim an accuracy (with `set` for a mean of cells)")
        rows = (claim.set,) if claim.set else tuple(column.rows)
        res.seeds = [s for s in sorted(set(cand.seeds) & set(ref.seeds))
                     if metric_value(cand, s, claim.metric) is not None and metric_value(ref, s, claim.metric) is not None]
        res.pairs, b, c, seeds = paired(cand, ref, claim.metric, rows, res.seeds, claim.gold)
        if not res.pairs:
            res.problem = "no per-example predictions on the same examples"
            continue
        res.seeds = seeds  # both tests, and the 5-seed rule, on the seeds with paired examples
        res.p = mcnemar(b, c)
        res.delta = (b - c) / res.pairs
        res.seed_deltas = [metric_value(cand, s, claim.metric) - metric_value(ref, s, claim.metric) for s in res.seeds]
        res.seed_p = paired_t(res.seed_deltas)
    tested = [r for r in results if not r.problem and len(r.seeds) >= SEEDS_FOR_A_FINDING]  # the claims that get a verdict
    for r, adjusted, seed_adjusted in zip(tested, holm([r.p for r in tested]), holm([r.seed_p for r in tested]), strict=True):
        r.p_holm, r.seed_p_holm = adjusted, seed_adjusted
    return results


def _p(p: float) -> str:
    return "–" if math.isnan(p) else f"{p:.2g}" if p >= 1e-4 else "< 1e-4"


def render(results: list[Result]) -> str:
    head = ["| # | claim (paper) | published | ours: candidate | ours: reference | on examples | over seeds | verdict |",
            "|---|---|---|---|---|---|---|---|"]
    lines, sources = [], []
    for i, r in enumerate(results, 1):
        c = r.claim
        seeds = r.seeds or sorted({s for x in (r.cand, r.ref) if x for s in x.seeds})
        ours = [fmt([metric_value(x, s, c.metric) for s in seeds]) if x else "–" for x in (r.cand, r.ref)]
        on_examples = "–" if r.problem else f"{100 * r.delta:+.1f} pts, {r.pairs} pairs, p {_p(r.p)}, Holm {_p(r.p_holm)}"
        over_seeds = "–" if r.problem else (f"{fmt(r.seed_deltas)} pts ({len(r.seeds)} seed{'s' * (len(r.seeds) != 1)}), "
                                            f"p {_p(r.seed_p)}, Holm {_p(r.seed_p_holm)}")
        lines.append(f"| {i} | {c.claim} ({c.paper}) | {c.published} | {c.candidate}: {ours[0]} | "
                     f"{c.reference}: {ours[1]} | {on_examples} | {over_seeds} | **{r.verdict}** |")
        ids = [rec.run_id for x in (r.cand, r.ref) if x for s in seeds if (rec := x.record(s, c.metric))]
        sources.append(f"{i}. " + (", ".join(f"[`{rid[-12:]}`](records/{rid}.json)" for rid in ids) or "none"))
    legend = ("Ours: mean ± sample sd over the seeds both sides have [95 % interval of the mean: Student t from 3 "
              "seeds, BCa bootstrap from 10], in percent. "
              "On examples: candidate minus reference, share of the same examples right, every seed pooled; "
              "exact McNemar test. Over seeds: the metric's per-seed differences, mean ± sd [95 % interval], "
              "paired t-test (p 1 when the differences have no spread). Both Holm-corrected across the claims "
              "of this table with 5 paired seeds (Holm – for the others); verdicts need 5 paired seeds and both "
              "tests (`leaderboard/claims.py`).")
    return "\n".join([*head, *lines, "", legend, "", "Records behind each claim:", "", *sources])


def splice(page: str, text: str) -> str:
    """The page with its claims block replaced, or inserted under its title."""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    block = f"{START}\n{text}\n{END}"
    if pattern.search(page):
        return pattern.sub(lambda m: block, page)
    title, _, rest = page.partition("\n") if page.startswith("# ") else ("", "", page)
    return (f"{title}\n\n" if title else "") + f"{block}\n\n{rest.lstrip()}"


def study_table(study: Path) -> str:
    return render(measure(load_claims(study / "claims.toml"), load_checked_records(study / "records")))


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
