"""Verdicts with power: the interval's degrees of freedom, cluster-robust example variance, the
two-way bootstrap that checks them, the minimum detectable effect a registered design states
before its records (``bench plan``), partial collapse and rank groups."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main as bench
from bench.errors import BenchError
from bench.metrics import CollapseRule
from bench.store import clusters
from bench.store.records import write_predictions
from leaderboard.claims import measure
from leaderboard.claims_file import Registered, read_plan
from leaderboard.power import Components, components, mde
from leaderboard.stats import bootstrap, crossed, example_variance
from tests.leaderboard.test_build import _rec

ROOT = Path(__file__).resolve().parents[2]
STUDIES = sorted(p.parent for p in (ROOT / "results").glob("*/claims.toml"))


def test_a_cluster_of_perfectly_correlated_examples_counts_as_one():
    """30 clusters of 100 examples, every example of a cluster with the same difference: the
    cluster-robust variance is that of 30 independent values (their sample variance over 30),
    about 100 times the independent-examples one, and the interval takes 29 degrees of freedom
    where the examples dominate (Cameron and Miller 2015, eq. 11)."""
    rng = np.random.default_rng(0)
    level = rng.choice([-1.0, 0.0, 1.0], size=30)
    deltas, ids = np.repeat(level, 100), np.repeat(np.arange(30), 100)
    robust, naive = example_variance(deltas, ids), example_variance(deltas)
    assert (robust.units, robust.df, naive.units) == (30, 29, 3000) and robust.var == pytest.approx(level.var(ddof=1) / 30)
    assert robust.var / naive.var == pytest.approx(2999 * 3000 / (100 * 29 * 30))  # about the cluster size
    singletons = example_variance(deltas, np.arange(3000))  # each example its own cluster: the usual s^2 / n
    assert singletons.var == pytest.approx(naive.var)
    assert crossed([0.1, 0.2, 0.15], deltas, clusters=np.zeros(3000)) is None  # one cluster: no example variance to judge by
    t = crossed([0.1, 0.1, 0.1, 0.1, 0.1], deltas, clusters=ids)
    assert t.seed_var == 0 and t.df == pytest.approx(29) and t.clusters == 30
    wide, narrow = crossed([0.1, 0.12, 0.08], deltas, clusters=ids), crossed([0.1, 0.12, 0.08], deltas)
    assert wide.high - wide.low > 5 * (narrow.high - narrow.low)


def test_strata_keep_the_designed_contrast_out_of_the_sampling_variance():
    """HANS fixes its cells (heuristic x label) by design: a model that moves answers from one
    label to the other moves every entailment subcase down and every non-entailment one up. Within
    its stratum each subcase is a sampled cluster; between strata the difference is the design's.
    Centred within strata, a contrast with no spread inside any stratum has no sampling variance,
    and G - H degrees of freedom remain."""
    ids = np.repeat(np.arange(30), 100)
    strata = ids // 5  # six cells of five subcases
    contrast = np.where(strata % 2 == 0, 1.0, -1.0)  # +1 in three cells, -1 in the others
    assert example_variance(contrast, ids).var > 0.01  # as clusters alone: the contrast counts as noise
    flat = example_variance(contrast, ids, strata)
    assert flat.var == pytest.approx(0.0, abs=1e-15) and (flat.units, flat.strata, flat.df) == (30, 6, 24)
    noisy = contrast + np.repeat(np.random.default_rng(4).normal(0, 0.1, 30), 100)
    within = example_variance(noisy, ids, strata)
    per_cell = [noisy[strata == h].reshape(5, 100).mean(axis=1) for h in range(6)]
    assert within.var == pytest.approx(sum(c.var(ddof=1) / 5 for c in per_cell) / 36)  # sum_h W_h^2 s_h^2 / G_h
    across = example_variance(noisy, ids, np.arange(3000) % 6)  # "strata" that split every cluster: not used
    assert across == example_variance(noisy, ids)


def _bootstrap_parts(matrix: np.ndarray, ids: np.ndarray | None, strata: np.ndarray | None = None):
    """The pigeonhole bootstrap's variance in closed form, on the seeds x clusters means C (equal
    clusters within a stratum): with seed and cluster weights multinomial (clusters within their
    stratum h, whose share W_h is fixed), the expectation of the weights' products (Owen 2007,
    section 3) gives Var* = (k-1)/k s_rows^2/k + sum_h W_h^2 (G_h-1)/G_h s_h^2/G_h
    + sum_h W_h^2 ||P_k C_h P_h||^2 / (k G_h)^2, where P centres. Returned as its three parts
    (seeds, examples, interaction) without the (k-1)/k and (G_h-1)/G_h factors, so that the
    first two are ``crossed``'s components exactly."""
    k, n = matrix.shape
    codes = np.arange(n) if ids is None else np.unique(ids, return_inverse=True)[1]
    g = codes.max() + 1
    sizes = np.bincount(codes, minlength=g)
    c = np.stack([np.bincount(codes, weights=row, minlength=g) for row in matrix]) / sizes
    layer = np.zeros(g, dtype=int)
    if strata is not None:
        layer[codes] = np.unique(strata, return_inverse=True)[1]
    rows = c.mean(axis=1) if strata is None else sum(
        sizes[layer == h].sum() / n * c[:, layer == h].mean(axis=1) for h in range(layer.max() + 1))
    parts = [rows.var(ddof=1) / k, [], []]
    for h in range(layer.max() + 1):
        ch, w, gh = c[:, layer == h], sizes[layer == h].sum() / n, int((layer == h).sum())
        resid = ch - ch.mean(axis=1, keepdims=True) - ch.mean(axis=0, keepdims=True) + ch.mean()
        parts[1].append((w ** 2 * ch.mean(axis=0).var(ddof=1) / gh, (gh - 1) / gh))
        parts[2].append(w ** 2 * (resid ** 2).sum() / (k * gh) ** 2)
    return parts


def _bootstrap_expectation(matrix: np.ndarray, ids: np.ndarray | None, strata: np.ndarray | None = None) -> float:
    seeds, examples, interaction = _bootstrap_parts(matrix, ids, strata)
    k = matrix.shape[0]
    return (k - 1) / k * seeds + sum(v * f for v, f in examples) + sum(interaction)


def test_the_bootstrap_matches_its_closed_form_on_a_constructed_design():
    rng = np.random.default_rng(1)
    m = rng.normal(0, 0.3, (5, 400)) + rng.normal(0, 0.05, (5, 1)) + rng.normal(0, 0.2, (1, 400))
    b = bootstrap(m, resamples=4000)
    assert b.se == pytest.approx(math.sqrt(_bootstrap_expectation(m, None)), rel=4 / math.sqrt(2 * 3999))
    assert b.low < m.mean() < b.high
    ids, strata = np.arange(400) // 10, np.arange(400) // 100  # 40 clusters in 4 strata
    m += np.repeat(rng.normal(0, 0.3, 40), 10)[None, :]
    b = bootstrap(m, ids, resamples=4000, strata=strata)
    assert b.se == pytest.approx(math.sqrt(_bootstrap_expectation(m, ids, strata)), rel=4 / math.sqrt(2 * 3999))


def test_the_interval_holds_its_level_with_five_seeds():
    """No difference, 5 seeds and 300 examples whose variance is as large as the seeds' (the
    committed claims' middle ground): the 95 % interval excludes zero about 5 % of 4,000 times
    with the Satterthwaite degrees of freedom (a t with seeds - 1 would give about 1 %)."""
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(4000):
        ex = rng.normal(0, 0.4, 300)
        seeds = ex.mean() + rng.normal(0, 0.4 / math.sqrt(300) * math.sqrt(5), 5)
        t = crossed(list(seeds), ex)
        hits += t.low > 0 or t.high < 0
    assert hits / 4000 == pytest.approx(0.05, abs=0.015)


@pytest.fixture(scope="module")
def committed():
    from leaderboard.claims import study_results

    return {s.name: study_results(s) for s in STUDIES}


RE_JUDGED = {("srnet", "2"): "reproduced", ("srnet", "17"): "opposite", ("tickets-agnews", "5"): "reproduced",
             ("posttraining", "2"): "reproduced", ("posttraining", "3"): "reproduced", ("posttraining", "19"): "opposite"}


def test_the_two_way_bootstrap_agrees_with_the_interval_on_every_committed_claim(committed):
    """Every committed claim with an interval: the closed form of the bootstrap's variance is
    crossed's two components, each times its finite-sample factor, plus the interaction once
    more; the bootstrap over seeds and example clusters has that standard error within its Monte
    Carlo error (2,000 resamples: 1.6 %, allowed four times that); and it decides as the
    Satterthwaite interval does: both exclude zero on the same side, or both include it. The six
    verdicts that the change from seeds - 1 degrees of freedom moved are among them, with the
    verdicts they have now (a change of analysis made after their families were registered)."""
    checked = 0
    for study, results in committed.items():
        for r in results:
            if r.test is None or r.pairing is None or r.pairing.matrix is None or len(r.seeds) < 3:
                continue
            m, ids, strata = r.pairing.matrix, r.pairing.clusters, r.pairing.strata
            assert np.allclose(m.mean(axis=1), r.seed_deltas, atol=1e-9)  # the claim's metric is the mean of its rows
            seeds, examples, _ = _bootstrap_parts(m, ids, strata)
            if len({n for n in np.unique(ids, return_counts=True)[1]}) == 1 if ids is not None else True:
                # equal clusters: the closed form's first two parts are crossed's own two components
                assert (seeds, sum(v for v, _ in examples)) == pytest.approx((r.test.seed_var, r.test.example_var),
                                                                            rel=1e-6, abs=1e-15), (study, r.claim.id)
            b = bootstrap(m, ids, r.claim.level, resamples=2000, strata=strata)
            expected = math.sqrt(_bootstrap_expectation(m, ids, strata))
            assert b.se == pytest.approx(expected, rel=4 / math.sqrt(2 * 1999)), (study, r.claim.id)
            side = lambda lo, hi: (lo > 0) - (hi < 0)  # noqa: E731
            assert side(b.low, b.high) == side(r.test.low, r.test.high), (study, r.claim.id, b, r.test)
            checked += 1
    assert checked >= 60
    for (study, cid), verdict in RE_JUDGED.items():
        (r,) = [r for r in committed[study] if r.claim.id == cid]
        assert r.verdict == verdict and r.test.df > len(r.seeds) - 1, (study, cid, r.verdict, r.test.df)


def test_bench_claims_prints_the_bootstrap_beside_each_interval(capsys):
    before = (ROOT / "results/srnet/findings.md").read_bytes()
    assert bench(["claims", str(ROOT / "results/srnet"), "--bootstrap"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| 8 ")]
    assert rows and " df) | " in rows[0] and rows[0].count("[") == 2
    assert (ROOT / "results/srnet/findings.md").read_bytes() == before  # a check: it writes nothing


def test_the_minimum_detectable_effect_has_its_power():
    """A design of 5 seeds and 200 examples, simulated 2,000 times with the true difference at
    its MDE: the interval at 99 % excludes zero about 80 % of the time; at half the MDE far
    less often. The simulated data follow the components the MDE was computed from."""
    comp = Components(seed=0.02 ** 2, example=0.3 ** 2, interaction=0.0, deff=1.0, seeds=5, examples=200, clusters=200)
    level, k, n = 0.99, 5, 200
    effect = mde(comp, k, n, level)
    rng = np.random.default_rng(2)

    def power(delta: float) -> float:
        hits = 0
        for _ in range(2000):
            ex = rng.normal(0, 0.3, n)
            seeds = delta + ex.mean() + rng.normal(0, 0.02, k)
            t = crossed(list(seeds), ex + delta, level)
            hits += t.low > 0
        return hits / 2000

    assert power(effect) == pytest.approx(0.80, abs=0.04)
    assert power(effect / 2) < 0.4
    assert mde(comp, k, n, level, equivalence=True) > effect  # equivalence asks for more (two one-sided tests)


def test_components_come_back_from_their_own_design():
    """The variance components of a seeds x examples matrix reproduce ``crossed``'s variance at the
    pilot's own design (planning at the design a pilot ran is what the pilot measured)."""
    rng = np.random.default_rng(3)
    m = rng.normal(0, 0.4, (4, 300)) + rng.normal(0, 0.03, (4, 1)) + rng.normal(0, 0.2, (1, 300))
    seed_deltas = list(m.mean(axis=1))
    comp = components(m, seed_deltas)
    t = crossed(seed_deltas, m.mean(axis=0))
    v_seed, v_ex, df = comp.variances(4, 300)
    assert v_seed + v_ex == pytest.approx(t.se ** 2) and df == pytest.approx(t.df)
    assert comp.interaction > comp.example > 0  # the residual is the larger part here, as built


# --- the verdict rule's new rows ------------------------------------------------------------

def _claim(**kw):
    from tests.leaderboard.test_claims import _claim as base

    return base(**kw)


def _study(tmp_path, new_right, **kw):
    from tests.leaderboard.test_claims import _study as base

    return base(tmp_path, new_right, **kw)


def _plan(mde_value: float) -> dict[str, Registered]:
    return {"1": Registered(seeds=5, examples=1000, clusters=1000, level=0.95, target=0.02, mde=mde_value)}


@pytest.mark.parametrize(("new_right", "claim", "mde_value", "row", "verdict"), [
    ([590, 605, 585, 600, 595], {}, None, 7, "against the paper, not significant"),  # mean -0.5, interval across 0
    ([590, 605, 585, 600, 595], {}, 0.05, 7, "against the paper, not significant"),  # direction comes first
    ([620, 580, 625, 595, 610], {"effect": 0.02}, 0.05, 8, "underpowered (MDE 5.0 pts)"),  # +0.6, 2 inside
    ([620, 580, 625, 595, 610], {"effect": 0.02}, 0.01, 9, "varies by seed"),  # the design could detect it
    ([620, 580, 625, 595, 610], {"effect": 0.02}, None, 9, "varies by seed"),  # no plan: no power to read
    ([602, 601, 603, 601, 602], {"effect": 0.2}, 0.1, 10, "not reached"),
    ([610, 560, 650, 580, 640], {"direction": "comparable", "smallest_effect": 0.02}, 0.04, 8, "underpowered (MDE 4.0 pts)"),
    ([560, 570, 550, 565, 555], {}, 0.5, 6, "opposite"),  # significant against: opposite, whatever the power
])
def test_the_rule_reads_direction_and_power(tmp_path, new_right, claim, mde_value, row, verdict):
    plan = _plan(mde_value) if mde_value is not None else {}
    (res,) = measure([_claim(**claim)], _study(tmp_path, new_right), plan)
    assert (res.row, res.verdict) == (row, verdict)


def test_underpowered_needs_the_target_inside_the_interval_and_says_post_hoc(tmp_path):
    """Row 8 only where the interval still holds what the claim must detect: an interval that
    already excludes the paper's effect has answered the question, underpowered or not. A plan
    made from the claim's own records says so; a target of 0 is never "underpowered"; a plan
    whose level or target no longer match the claim is stale and decides nothing."""
    recs = _study(tmp_path, [620, 580, 625, 595, 610])  # +0.6 [about -1.8, +3.0] points
    post_hoc = {"1": Registered(seeds=5, examples=1000, clusters=1000, level=0.95, target=0.1, mde=0.2, post_hoc=True)}
    (far,) = measure([_claim(effect=0.1)], recs, post_hoc)
    assert far.row == 9  # the paper's 10 points lie outside the interval: ruled out, not underpowered
    near = {"1": Registered(seeds=5, examples=1000, clusters=1000, level=0.95, target=0.02, mde=0.05, post_hoc=True)}
    (res,) = measure([_claim(effect=0.02)], recs, near)
    assert res.verdict == "underpowered (post hoc MDE 5.0 pts)"
    zero = {"1": Registered(seeds=5, examples=1000, clusters=1000, level=0.95, target=0.0, mde=0.05)}
    (res,) = measure([_claim(smallest_effect=0.0)], recs, zero)
    assert res.row == 9
    (res,) = measure([_claim(effect=0.03)], recs, near)  # registered for 2 points, the claim now says 3
    assert res.row == 9 and res.stale.startswith("plan.json is stale")


def test_the_rule_table_of_the_docs_is_the_codes():
    from leaderboard.claims import RULE

    doc = (ROOT / "docs" / "claims.md").read_text()
    for row, verdict, when in RULE:
        assert f"| {row} | {verdict}" in doc and when in doc, (row, verdict)


# --- partial collapse -----------------------------------------------------------------------

@pytest.mark.parametrize(("gold", "answers", "why"), [
    ({0: 500, 1: 500}, {0: 500, 1: 500}, None),
    ({0: 500, 1: 500}, {0: 860, 1: 140}, "partial collapse (class 0: 86.0 %)"),  # one class on > 85 % of a balanced set
    ({0: 500, 1: 500}, {0: 840, 1: 160}, None),
    ({0: 334, 1: 333, 2: 333}, {0: 600, 2: 400}, "partial collapse (class 1: 0.0 %)"),  # no "neutral" at all
    ({0: 334, 1: 333, 2: 333}, {0: 500, 1: 15, 2: 485}, "partial collapse (class 1: 1.5 %)"),
    ({0: 950, 1: 50}, {0: 995, 1: 5}, None),  # 95/5 gold: not balanced, and class 1 is under 10 % of it
    ({1: 100}, {1: 100}, None),  # one gold class (a gold filter): nothing to collapse onto
])
def test_the_partial_collapse_rule(gold, answers, why):
    got = CollapseRule()(gold, answers)
    assert (str(got) if got else None) == why


def test_the_collapse_thresholds_come_from_the_claims_file(tmp_path):
    from leaderboard.claims_file import load_claims

    toml = tmp_path / "claims.toml"
    body = ('[[claim]]\nid = "a"\npaper = "p"\nclaim = "c"\npublished = "1"\nmetric = "m"\ncandidate = { label = "x" }\n'
            'reference = { label = "y" }\ndirection = "higher"\nchance = 0.5\nmargin = 0.0\nsmallest_effect = 0.01\n')
    toml.write_text("[defaults]\ncollapse_one_class = 0.7\ncollapse_rare = 0.05\n\n" + body)
    (c,) = load_claims(toml)
    assert (c.collapse.one_class, c.collapse.rare, c.collapse.present) == (0.7, 0.05, 0.10)
    assert str(c.collapse({0: 50, 1: 50}, {0: 75, 1: 25})) == "partial collapse (class 0: 75.0 %)"
    toml.write_text("[defaults]\ncollapse_rare = 1.5\n\n" + body)
    with pytest.raises(BenchError, match=r"collapse_rare must be a fraction in \(0, 1\), got 1.5"):
        load_claims(toml)
    toml.write_text(body.replace("direction", "efect = 0.1\ndirection"))
    with pytest.raises(BenchError, match="unknown field 'efect'"):
        load_claims(toml)


def _committed_candidate(study: str, task: str, label: str, target: float | None, variant: str = ""):
    from leaderboard.evidence import checked_records
    from leaderboard.sections import sections

    for sec in sections(checked_records(ROOT / "results" / study / "records")):
        if sec.task == task:
            for c in sec.candidates:
                if c.label == label and c.target == target and c.variant == variant:
                    return c
    raise AssertionError((study, task, label, target))


def test_the_reviewers_partial_collapses_are_flagged():
    """The cases a review found unflagged by the old one-class rule (> 95 %): the truncated
    students of results/rmc never answer "neutral" on the MNLI test set; posttraining's IMP (CE)
    at 90 %, seed 2, answers no "neutral" at 37.1 %; AG News soft movement at 70 %, seed 4, never
    answers class 3."""
    student = _committed_candidate("rmc", "mnli", "vanilla (truncated half-layer student)", 0.0,
                                   "objective=vanilla, student=truncated, cuda")
    assert {s: str(c) for s, c in student.collapsed("id", ("test",)).items()} == {
        s: "partial collapse (class 1: 0.0 %)" for s in (0, 1, 2, 4)}
    imp = _committed_candidate("posttraining", "mnli", "imp (ce)", 0.9)
    assert str(imp.collapsed("id", ("test",)).get(2)) == "partial collapse (class 1: 0.0 %)"
    soft = _committed_candidate("posttraining", "agnews", "soft movement", 0.7, "max_examples=1000")
    assert str(soft.collapsed("id", ("test",)).get(4)) == "partial collapse (class 3: 0.0 %)"


# --- rank groups ----------------------------------------------------------------------------

def test_rows_nothing_separates_share_a_rank_group(tmp_path):
    """Four candidates over 3 seeds on 200 examples: two clearly best and level with each other,
    one clearly worst, one in between but not separable from either side: ranks 1-2, 1-2, 3-4 and
    3-4 or wider, never an ordinal order the tests do not support."""
    from leaderboard.sections import sections
    from leaderboard.table import ranks
    from tests.leaderboard.test_build import _with_predictions

    def rights(k: int, seed: int) -> list[bool]:
        r = [i < k for i in range(100)]
        return r[seed:] + r[:seed]

    recs = [_with_predictions(tmp_path, label, seed, rights(k, seed), k / 100 + seed / 1000)
            for label, k in (("finetune (ce)", 50), ("a (ce)", 90), ("b (ce)", 89), ("c (ce)", 70))
            for seed in (0, 1, 2)]
    (sec,) = sections(recs)
    got = {c.label: ranks(sec)[id(c)] for c in sec.candidates}
    assert got["a (ce)"].startswith("1-2") and got["b (ce)"].startswith("1-2")
    assert got["c (ce)"].startswith("3") and got["finetune (ce)"].startswith("4")


# --- bench plan -----------------------------------------------------------------------------

def test_bench_plan_prints_an_mde_per_claim(capsys):
    """The issue's own check: `bench plan results/posttraining/claims.toml --pilot
    results/posttraining/records` prints the MDE of each of its 24 claims."""
    assert bench(["plan", str(ROOT / "results/posttraining/claims.toml"), "--pilot",
                  str(ROOT / "results/posttraining/records")]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| ") and ln.split("|")[1].strip().isdigit()]
    assert len(rows) == 24 and all(" pts" in ln.split("|")[4] for ln in rows)
    assert "24 claims: 24 with an MDE" in out


@pytest.mark.parametrize("study", STUDIES, ids=[s.name for s in STUDIES])
def test_each_committed_plan_is_what_its_pilot_gives(study):
    """plan.json is what `bench plan --register` computes from the pilot runs it names, so no MDE is
    typed by hand; every claim of the study has one."""
    from leaderboard.claims_file import load_claims
    from leaderboard.plan import recompute

    plan = read_plan(study / "plan.json")
    assert set(plan) == {c.id for c in load_claims(study / "claims.toml")}
    assert recompute(study / "plan.json", ROOT) == plan


def test_a_plan_is_read_as_untrusted(tmp_path):
    """A malformed plan.json, or one whose pilot lies outside the project, is one line."""
    from leaderboard.plan import recompute

    (tmp_path / "study").mkdir()
    plan = tmp_path / "study" / "plan.json"
    plan.write_text('{"claims": {"1": {"seeds": 5, "examples": 100, "clusters": 100, "level": 0.95, '
                    '"target": 0.02, "mde": NaN}}}')
    with pytest.raises(BenchError, match="not a plan written by bench plan"):
        read_plan(plan)
    plan.write_text('{"pilot": {"folders": ["../../etc"], "runs": []}, "claims": {}}')
    (tmp_path / "study" / "claims.toml").write_text("")
    with pytest.raises(BenchError, match="lies outside"):
        recompute(plan, tmp_path / "study")


def test_an_equivalence_claim_its_design_cannot_confirm_is_refused_at_registration(tmp_path, capsys, monkeypatch):
    """A pilot of two candidates on 1,000 HANS-like examples (synthetic records, handed to the
    planner as a checked folder's), and an equivalence claim registered before its records."""
    import leaderboard.plan

    recs = _study(tmp_path, [600, 640, 580, 630, 590])
    monkeypatch.setattr(leaderboard.plan, "_records", lambda folders, runs=None: [] if "study" in str(folders[0]) else recs)
    (tmp_path / "pilot").mkdir()
    (tmp_path / "study").mkdir()
    claims = tmp_path / "study" / "claims.toml"
    claims.write_text(
        '[[claim]]\nid = "eq"\npaper = "p"\nclaim = "c"\npublished = "1"\nmetric = "ood/hans_synth"\n'
        'candidate = { label = "new (ce)" }\nreference = { label = "finetune (ce)" }\ndirection = "comparable"\n'
        'chance = 0.3\nmargin = 0.0\nsmallest_effect = 0.01\n')
    argv = ["plan", str(claims), "--pilot", str(tmp_path / "pilot"), "--register"]
    assert bench(argv) == 2
    err = capsys.readouterr().err
    assert "equivalence claim eq has a margin of 1.0 pts below its design's MDE" in err and len(err.splitlines()) == 1
    assert not (claims.parent / "plan.json").exists()
    claims.write_text(claims.read_text().replace("smallest_effect = 0.01", "smallest_effect = 0.2"))
    assert bench(argv) == 0
    (reg,) = read_plan(claims.parent / "plan.json").values()
    assert reg.mde < 0.2 and not reg.post_hoc and reg.seeds == 5 and reg.examples == 1000


@pytest.mark.parametrize(("argv", "message"), [
    (["plan", "no/such/claims.toml"], "no claims file no/such/claims.toml"),
    (["plan", "results/posttraining", "--pilot", "no/such/folder"], "pilot folder no/such/folder does not exist"),
])
def test_bench_plan_bad_input_is_one_line(argv, message, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert bench(argv) == 2
    assert capsys.readouterr().err.strip() == f"bench: error: {message}"


# --- clusters -------------------------------------------------------------------------------

def test_a_sets_clusters_are_written_once_and_read_back(tmp_path):
    from bench.data.examples import Example

    exs = [Example(f"u{i}", "a", "b", i % 2, cluster=f"c{i // 10}") for i in range(40)]
    data = {"hans/x.jsonl": "ab" * 32}
    path = clusters.write(tmp_path, "hans", exs, "subcase", data)
    first = path.read_bytes()
    assert clusters.write(tmp_path, "hans", list(reversed(exs)), "subcase", data).read_bytes() == first  # same bytes
    (got,) = clusters.read(tmp_path)
    assert got.of["u13"] == "c1" and len(set(got.of.values())) == 4 and got.fits({"ab" * 32, "other"})
    assert clusters.for_record(tmp_path / "records", "hans", {"ab" * 32}) == got
    assert clusters.for_record(tmp_path / "records", "hans", {"cd" * 32}) is None  # another data file
    assert clusters.write(tmp_path, "test", [Example("u", "a", None, 0)], "", data) is None  # none declared
    path.write_bytes(b"not gzip")
    with pytest.raises(BenchError, match="not a clusters file"):
        clusters.read(tmp_path)


def test_a_claim_on_a_clustered_set_counts_its_clusters(tmp_path):
    """The same records with and without the study's clusters file: 100 clusters of 10 examples
    that are answered alike widen the interval, and the table names the clusters."""
    from bench.data.examples import Example
    from leaderboard.claims_table import render
    from leaderboard.evidence import PARSED

    recs = []
    out = tmp_path / "out"
    for seed, shift in enumerate((0, 1, 2, 1, 0)):
        for label, right in (("finetune (ce)", lambda i: (i // 10) % 2 == 0),
                             ("new (ce)", lambda i, s=shift: (i // 10) % 2 == 0 or (i // 10) % 5 == s)):
            r = _rec(label, seed, None, 0.9, sum(right(i) for i in range(1000)) / 1000, 1.0)
            rows = [{"set": "hans_synth", "uid": f"u{i}", "gold": i % 2, "pred": i % 2 if right(i) else 1 - i % 2,
                     "correct": right(i)} for i in range(1000)]
            r.predictions, r.predictions_sha256 = write_predictions(out, r.run_id, rows)
            r.provenance = {**r.provenance, "data": {"note": "", "sources": [{"kind": "local", "detail": "",
                                                                              "sha256": {"x": "f" * 64}}]}}
            r.where = out / "records"
            recs.append(r)
    (plain,) = measure([_claim(chance=0.0)], recs)
    clusters.write(out, "hans_synth", [Example(f"u{i}", "", None, 0, cluster=f"t{i // 10}") for i in range(1000)],
                   "template", {"x": "f" * 64})
    for r in recs:  # parsed before the study had its clusters: parse them again
        PARSED.pop(r.predictions_sha256, None)
    (clustered,) = measure([_claim(chance=0.0)], recs)
    assert clustered.test.clusters == 100 and plain.test.clusters == 1000
    assert clustered.test.example_var > 5 * plain.test.example_var
    assert "1,000 examples in 100 clusters" in render([clustered])


def test_hans_is_clustered_by_subcase_or_template(tmp_path):
    from bench.data.tasks.glue import load_hans

    head = ("gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\t"
            "sentence2\tpairID\theuristic\tsubcase\ttemplate\n")
    rows = "".join(f"non-entailment\t-\t-\t-\t-\tThe doctor {i} ran .\tThe doctor ran .\tex{i}\tlexical_overlap\t"
                   f"ln_subject/object_swap\ttemp{i % 2 + 1}\n" for i in range(4))
    (tmp_path / "hans").mkdir()
    (tmp_path / "hans" / "heuristics_evaluation_set.txt").write_text(head + rows)
    ev = load_hans(tmp_path)
    assert "template" in ev.clusters and "subcase" in ev.clusters
    assert [e.cluster for e in ev.examples] == ["ln_subject/object_swap/temp1", "ln_subject/object_swap/temp2"] * 2


def test_the_committed_clusters_are_what_the_data_gives(tmp_path):
    """Written again from the data folder, every committed clusters file is byte for byte the same
    (HANS's public copy: 30 subcases of 1,000 pairs)."""
    import shutil

    from bench.core.upgrade import add_clusters
    from tests.conftest import REAL_DATA

    if REAL_DATA is None or not (Path(REAL_DATA) / "hans" / "hans_eval.jsonl").is_file():
        pytest.skip("needs the HANS data file (BENCH_DATA)")
    data = str(REAL_DATA)
    study = tmp_path / "srnet"
    shutil.copytree(ROOT / "results" / "srnet" / "records", study / "records")
    written, problems = add_clusters(study, data)
    assert not problems and [p.name for p in written] == [p.name for p in (ROOT / "results/srnet/clusters").glob("*.json.gz")]
    for p in written:
        assert p.read_bytes() == (ROOT / "results/srnet/clusters" / p.name).read_bytes()
    (c,) = clusters.read(study)
    sizes = np.unique(list(c.of.values()), return_counts=True)[1]
    assert len(sizes) == 30 and set(sizes) == {1000} and "subcase" in c.by
    assert json.loads(__import__("gzip").decompress(written[0].read_bytes()))["set"] == "hans"
