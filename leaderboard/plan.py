"""What a study's claims can detect before their records exist: ``bench plan CLAIMS --pilot
RECORDS...``.

For each claim of a claims file: its registered design (the seeds of ``claims.toml``, the
examples it names or the pilot's, its level after the family's correction), the variance
components of its paired difference in a declared pilot (earlier records of the same
candidates, or a small pilot run; ``leaderboard.power.components``), the minimum detectable
effect (MDE) of the design at 80 % power from them (``leaderboard.power.mde``), and the seeds or
examples that would bring the MDE down to what the claim must detect (the paper's effect; for
an equivalence claim its margin). ``--register`` writes all of it to ``plan.json`` beside the
claims file, with the pilot's run ids, so that a test can recompute it; committed before the
records, it is the registration of the design as the claims file is of the claims. An
equivalence claim whose margin is below its MDE cannot be confirmed by its design and is refused
there. A plan made when a claim's own records already existed is marked post hoc: its MDE then
describes the study as run, not a design chosen in advance.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.store.atomic import write_atomic
from bench.store.records import Record
from leaderboard.claims import measure_one
from leaderboard.claims_file import MAX_EXAMPLES, MAX_SEEDS, PLAN, Claim, Registered, load_claims, needed
from leaderboard.evidence import check
from leaderboard.power import POWER, Components, components, mde
from leaderboard.sections import sections


def _records(folders: list[Path], runs: set[str] | None = None) -> list[Record]:
    """The records of the pilot folders that pass their checks (``runs``: only these)."""
    found = check([f / "records" if (f / "records").is_dir() else f for f in folders])
    if found.rejected:
        raise BenchError(f"{len(found.rejected)} pilot records fail their checks; first: {found.rejected[0]}")
    return [r for r in found.records if runs is None or r.run_id in runs]


def design(claim: Claim, pilot: list, own: list) -> Registered:
    """``claim``'s registered design and what it can detect, from the ``pilot`` records' tables
    (``leaderboard.sections``); ``own``: the study's tables when it is planned (post hoc where
    both sides already have some)."""
    res = measure_one(claim, pilot)
    mine = measure_one(claim, own) if own else None
    post_hoc = bool(mine and mine.cand and mine.ref and set(mine.cand.seeds) & set(mine.ref.seeds))
    k = claim.seeds
    if res.problem or res.pairing is None:
        return Registered(k, claim.examples or 0, 0, claim.level, claim.target, None,
                          f"pilot: {res.problem or 'no paired examples'}", post_hoc)
    n = claim.examples or len(res.pairing.example_deltas)
    if len(res.seed_deltas) < 2:
        return Registered(k, n, 0, claim.level, claim.target, None,
                          "pilot: one seed, no spread between training runs to plan from", post_hoc)
    matrix = res.pairing.matrix if res.pairing.matrix is not None else res.pairing.example_deltas[None, :]
    comp = components(matrix, res.seed_deltas, res.pairing.clusters, res.pairing.strata)
    eq = claim.direction == "comparable"
    g = max(2, round(n * comp.clusters / max(comp.examples, 1)))
    found = mde(comp, k, n, claim.level, equivalence=eq)
    seeds_needed, examples_needed = _needed(comp, k, n, claim, eq)
    return Registered(k, int(n), int(g), claim.level, claim.target, _round(found), "", post_hoc,
                      seeds_needed, examples_needed,
                      {key: _round(v) if isinstance(v, float) else v for key, v in asdict(comp).items()},
                      _available(res))


def _available(res) -> int | None:
    """How many examples the claim's set holds, as its records say (``details.sizes``; an attack
    samples the test split, so its sets hold what that split holds)."""
    rec = res.cand.record(res.seeds[0], res.claim.metric) if res.cand and res.seeds else None
    if rec is None:
        return None
    sizes = rec.details.get("sizes", {})
    found = [sizes.get(r, sizes.get("test") if "attacked" in sizes else None) for r in res.rows]
    return int(sum(found)) if found and all(isinstance(x, int) for x in found) else None


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def _needed(c: Components, k: int, n: int, claim: Claim, eq: bool) -> tuple[int | None, int | None]:
    """(seeds, examples) that reach the target: more seeds at the design's examples where that
    suffices, else more examples at its seeds, else the fewest seeds above the design's with
    the examples they then need; (None, None) where nothing up to the caps does."""
    if mde(c, k, n, claim.level, equivalence=eq) <= claim.target:
        return None, None
    seeds = next((s for s in range(k + 1, MAX_SEEDS + 1) if mde(c, s, n, claim.level, equivalence=eq) <= claim.target), None)
    if seeds is not None:
        return seeds, None
    for s in range(k, MAX_SEEDS + 1):
        if (examples := _examples_needed(c, s, claim, eq)) is not None:
            return (None if s == k else s), examples
    return None, None


def _examples_needed(c: Components, k: int, claim: Claim, eq: bool) -> int | None:
    """The fewest examples at ``k`` seeds whose MDE reaches the target (clusters growing with
    them), None where even ``MAX_EXAMPLES`` do not: the spread between seeds alone is too large."""
    def ok(n: float) -> bool:
        return mde(c, k, n, claim.level, equivalence=eq) <= claim.target

    if not ok(MAX_EXAMPLES):
        return None
    lo, hi = 2.0, float(MAX_EXAMPLES)
    while hi - lo > 1:
        mid = math.floor((lo + hi) / 2)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return int(hi)


def plan(claims_file: Path, pilot: list[Path]) -> tuple[list[Claim], dict[str, Registered], list[str]]:
    """Every claim of ``claims_file`` planned on the ``pilot`` folders; also the pilot's run ids."""
    claims = load_claims(claims_file)
    records = _records(pilot)
    if not records:
        raise BenchError(f"no pilot records in {', '.join(map(str, pilot))}")
    own_dir = claims_file.parent / "records"
    own = sections(_records([claims_file.parent])) if own_dir.is_dir() else []
    pilot_secs = sections(records)
    return claims, {c.id: design(c, pilot_secs, own) for c in claims}, sorted(r.run_id for r in records)


def register(claims_file: Path, pilot: list[Path], planned: tuple | None = None, root: Path | None = None) -> Path:
    """Write the plan (``plan``'s, or computed here) to ``plan.json`` beside the claims file; an
    equivalence claim, planned in advance, whose margin is below its MDE is refused (its design
    could never confirm it)."""
    claims, planned, runs = planned or plan(claims_file, pilot)
    refused = [c.id for c in claims if c.direction == "comparable" and not planned[c.id].post_hoc
               and planned[c.id].mde is not None and planned[c.id].mde > c.target]
    if refused:
        worst = planned[refused[0]]
        raise BenchError(f"{claims_file}: equivalence claim {refused[0]} has a margin of {100 * worst.target:.1f} pts below "
                         f"its design's MDE {100 * worst.mde:.1f}: raise its seeds or examples, or widen the margin"
                         + (f" (also: {', '.join(refused[1:])})" if len(refused) > 1 else ""))
    base = (root or Path.cwd()).resolve()
    where = [_relative(p.resolve(), base) for p in pilot]
    body = {"registered": f"{datetime.now(UTC):%Y-%m-%d}", "power": POWER, "pilot": {"folders": where, "runs": runs},
            "claims": {cid: asdict(reg) for cid, reg in planned.items()}}
    path = claims_file.parent / PLAN
    old = json.loads(path.read_text()) if path.is_file() else None
    if old is not None and {k: v for k, v in old.items() if k != "registered"} == {k: v for k, v in body.items() if k != "registered"}:
        return path  # the same plan: the file and its date stay
    write_atomic(path, json.dumps(body, indent=1, sort_keys=True) + "\n")
    return path


def _relative(p: Path, base: Path) -> str:
    try:
        return str(p.relative_to(base))
    except ValueError:
        return str(p)


def recompute(plan_file: Path, root: Path) -> dict[str, Registered]:
    """A committed plan recomputed from the pilot runs it names (a test checks it is the file's)."""
    body = json.loads(plan_file.read_text())
    claims = load_claims(plan_file.parent / "claims.toml")
    folders = [(root / f).resolve() for f in body["pilot"]["folders"]]
    if outside := [f for f in folders if not f.is_relative_to(root.resolve())]:
        raise BenchError(f"{plan_file}: pilot folder {outside[0]} lies outside {root}")
    records = sections(_records(folders, set(body["pilot"]["runs"])))
    own = sections(_records([plan_file.parent])) if (plan_file.parent / "records").is_dir() else []
    # post hoc is what it was when planned: a claim planned in advance stays so once its records exist
    was = {cid: d["post_hoc"] for cid, d in body["claims"].items()}
    out = {}
    for c in claims:
        reg = design(c, records, own)
        out[c.id] = Registered(**(asdict(reg) | {"post_hoc": was.get(c.id, reg.post_hoc)}))
    return out


def render(claims: list[Claim], planned: dict[str, Registered]) -> str:
    """One line per claim: design, pilot, MDE, what it must detect, what would reach it."""
    head = ["| # | design | pilot: sd between seeds, sd of an example's difference (design effect) | MDE (80 % power) "
            "| must detect | reaches it with |", "|---|---|---|---|---|---|"]
    lines = []
    for c in claims:
        p = planned[c.id]
        units = f"{p.examples:,} examples" + (f" in {p.clusters:,} clusters" if 0 < p.clusters < p.examples else "")
        where = f"{p.seeds} seeds, {units}, level {100 * p.level:.4g} %"
        if p.mde is None:
            lines.append(f"| {c.id} | {where} | {p.why} | – | {100 * p.target:.1f} pts | – |")
            continue
        comp = p.pilot or {}
        pilot = (f"{100 * math.sqrt(max(comp.get('seed', 0.0), 0.0)):.1f} pts, "
                 f"{100 * math.sqrt(comp.get('example', 0.0) + comp.get('interaction', 0.0)):.1f} pts "
                 f"(x{comp.get('deff', 1.0):.1f}); {comp.get('seeds')} seeds, {comp.get('examples'):,} examples")
        reach = "the registered design" if p.mde <= p.target else needed(p)
        kind = "margin" if c.direction == "comparable" else "paper" if c.effect is not None else "smallest effect"
        lines.append(f"| {c.id} | {where} | {pilot} | {100 * p.mde:.1f} pts{' (post hoc)' if p.post_hoc else ''} | "
                     f"{100 * p.target:.1f} pts ({kind}) | {reach} |")
    return "\n".join([*head, *lines])


def summary(planned: dict[str, Registered]) -> str:
    known = [p for p in planned.values() if p.mde is not None]
    under = sum(p.mde > p.target for p in known)
    med = float(np.median([p.mde for p in known])) if known else math.nan
    return (f"{len(planned)} claims: {len(known)} with an MDE (median {100 * med:.1f} pts), {under} of them underpowered "
            f"for what they must detect, {len(planned) - len(known)} that the pilot cannot plan")
