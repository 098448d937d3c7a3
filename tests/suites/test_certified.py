"""The certified suite (randomized smoothing): its bound and its two certification conditions
checked against their definitions, a toy classifier whose smoothed answer is known exactly, and a
run end to end whose every verdict ``score`` (what ``bench rescore`` runs) decides again.

Where the numbers come from. The papers' bodies were not readable here (their abstracts were):
SAFER's figure 1 (the released ``figs/framework_certnlp.png``) states its decision rule, the top
class certified when p_A - q > p_B + q, which for two classes is the p - Delta > 1/2 tested below;
RanMASK's abstract gives its headline, over half of SST-2's texts certified against 2 words
(``results/certified/claims.toml``). Each default below is quoted from the released code, named
by repository, file and commit:
- SAFER, lushleaf/Structure-free-certified-NLP@99f1f3a: ``run.sh`` (perturbation sets of at most
  K = 100 words), ``data_process.get_perturbation_set`` (a connected component of the synonym
  graph of at most K words is every member's set, ``isdivide`` 0, overlap 1; in a larger one a
  word's set is its K nearest), ``evaluation.calculate_tv_table`` (q = min over the word's
  neighbours of the shared share of its set); evaluation.py certifies when p - Delta >= 0.5 + mc_error with Delta = 1 - the
  product of the overlaps q of every word, ``calculate_tv``);
- RanMASK, zjiehang/RanMASK@c171aab: ``args.py`` (sparse_mask_rate 0.7; predict_ensemble 100;
  alpha 0.05), ``utils/certify.py`` (p_lower = proportion_confint(n_A, n, alpha=2 * alpha,
  method="beta")[0]; delta = C(h - r, k) / C(h, k)), ``utils/mask.py`` (round(h * rho) words
  masked, at least 2 kept);
- Cohen, Rosenfeld and Kolter (2019), CERTIFY: select the top class with n0 samples, bound it
  with n fresh ones, abstain when the bound is not above 1/2.
Deliberate differences (docs/recipes.md): the bound is Clopper-Pearson for SAFER too (its code
adds a fixed 0.01 to the point estimate); RanMASK's radius is the largest certified number of
words (its code returns that plus one) with k counted as its sampler keeps them (its code omits
the floor of 2 kept words when it certifies), and with lambda = 1, the proven bound (its code's
default scales Delta by the point estimate).
"""

from __future__ import annotations

import itertools
import math
import random
from types import SimpleNamespace

import pytest
import torch
from scipy.stats import beta, binom
from torch import nn

from bench.data.examples import Example
from bench.data.perturb import Substitutions, kept, masked
from suites.certified import CertifiedParams, decide
from suites.certified.bounds import lower_bound, ranmask_delta, ranmask_radius, safer_delta, unanimous_samples
from suites.certified.smoothing import votes


def test_the_defaults_are_the_released_codes():
    p = CertifiedParams()
    assert p.mask_rate == 0.7  # RanMASK args.py: sparse_mask_rate
    assert p.alpha == 0.05  # RanMASK args.py: alpha; Cohen et al. (2019)
    assert p.neighbours == 100  # SAFER run.sh: perturbation_constraint
    assert p.budget == 0  # SAFER evaluation.py: the product of every word's q (the attacker may change all)


def test_the_bound_is_the_one_sided_clopper_pearson_bound():
    """proportion_confint(k, n, alpha=2a, method="beta")[0] is Beta(k, n - k + 1)'s a-quantile."""
    for k, n in ((90, 100), (5, 5), (1, 10), (4999, 5000)):
        assert lower_bound(k, n, 0.05) == pytest.approx(beta.ppf(0.05, k, n - k + 1))
    assert lower_bound(0, 100, 0.05) == 0.0
    assert lower_bound(10, 10, 0.05) == pytest.approx(0.05 ** (1 / 10))  # a unanimous vote: alpha ** (1 / n)
    for p in (0.3, 0.8, 0.97):  # it covers: p is at or above its bound with probability at least 1 - alpha, exactly
        covered = sum(binom.pmf(k, 200, p) for k in range(201) if lower_bound(k, 200, 0.05) <= p)
        assert covered >= 0.95


def test_the_fewest_samples_that_can_certify():
    n = unanimous_samples(0.05)
    assert 0.05 ** (1 / n) > 0.5 >= 0.05 ** (1 / (n - 1)) and n == 5
    with pytest.raises(Exception, match="unanimous vote cannot certify"):
        CertifiedParams(samples=4)


def test_ranmask_delta_is_the_chance_that_a_substituted_word_is_kept():
    """Enumerated: of every way to keep k of h words, the share that keeps one of r given words."""
    for h, k, r in ((6, 2, 1), (7, 3, 2), (8, 2, 3), (5, 5, 1)):
        keeps = list(itertools.combinations(range(h), k))
        share = sum(any(i < r for i in c) for c in keeps) / len(keeps)
        assert ranmask_delta(h, k, r) == pytest.approx(share)


def test_ranmask_keeps_what_its_sampler_keeps_and_the_radius_is_the_largest_certified_r():
    assert kept(10, 0.7) == 3 and kept(10, 0.9) == 2 and kept(3, 0.9) == 2 and kept(1, 0.9) == 1  # at least 2 kept
    assert kept(15, 0.9) == 2  # round(13.5) = 14 masked, 1 left: the floor keeps 2
    rng = random.Random(0)
    assert all(masked("a b c d e f g h i j", 0.7, "[MASK]", rng).split().count("[MASK]") == 7 for _ in range(20))
    h, k, p = 20, kept(20, 0.7), 0.99
    r = ranmask_radius(p, h, k)
    assert p - ranmask_delta(h, k, r) > 0.5 >= p - ranmask_delta(h, k, r + 1)  # r certified, r + 1 not
    assert ranmask_radius(0.5, h, k) == -1 and ranmask_radius(0.51, h, k) == 0  # abstains; certified as it is only


def test_safer_delta_multiplies_the_smallest_overlaps():
    assert safer_delta([1.0, 0.5, 0.8]) == pytest.approx(1 - 0.4)  # every word, as the released code
    assert safer_delta([1.0, 0.5, 0.8], budget=1) == pytest.approx(0.5)  # an attacker of one word: the worst
    assert safer_delta([]) == 0.0


def test_safer_decides_as_its_figure_1_rule_for_two_classes():
    """SAFER's figure 1: certified when p_A - q > p_B + q; with two classes p_B = 1 - p_A, and p_A
    is the bound of the top class's votes."""
    details = {"smoothing": "safer", "alpha": 0.05}
    for top, delta in itertools.product(range(0, 101, 5), (0.0, 0.1, 0.3, 0.45, 0.6)):
        row = {"votes": top, "samples": 100, "delta": delta, "pred": 1, "gold": 1}
        p_a = lower_bound(top, 100, 0.05)
        assert decide(row, details)["certified"] == (p_a - delta > (1 - p_a) + delta)


def test_safer_sets_follow_the_released_construction():
    """A component of at most K words is every member's set (q = 1); in a larger component a
    word's set is its K nearest, and q_w = min over its neighbours w' of |T_w & T_w'| / |T_w|."""
    neighbours = {"good": ["fine", "nice"], "fine": ["good"], "nice": ["good", "lovely"],  # component of 4
                  "big": ["large"], "large": ["huge"], "huge": ["vast"], "vast": []}  # a chain of 4
    small = Substitutions.from_neighbours(neighbours, size=4)
    assert set(small.sets["lovely"]) == set(small.sets["good"]) == {"good", "fine", "nice", "lovely"}
    assert small.overlap["good"] == small.overlap["nice"] == 1.0
    chain = Substitutions.from_neighbours(neighbours, size=2)  # every component is now larger than K
    assert chain.sets["big"] == ("big", "large") and chain.sets["large"] == ("large", "big")  # nearest first
    assert chain.sets["huge"] == ("huge", "large")  # breadth first in the lists' order: large listed before vast
    assert chain.overlap["big"] == pytest.approx(1.0)  # T_large = {large, big} = T_big
    assert chain.overlap["large"] == pytest.approx(1 / 2)  # T_huge = {huge, large}: shares 1 of 2
    assert chain.overlap["vast"] == 1.0  # no synonym to be swapped for
    rng = random.Random(0)
    draws = {small.sample("a good film", rng).split()[1] for _ in range(200)}
    assert draws == {"good", "fine", "nice", "lovely"}  # uniform over T_good, other words kept
    assert chain.overlaps("A big large film") == [chain.overlap["big"], chain.overlap["large"]]


def test_safer_sets_on_the_shipped_neighbours():
    """On the shipped lists most words sit in small components (q = 1); the rest share a large one."""
    from bench.data.perturb import NEIGHBOURS, substitutions
    from tests.conftest import REAL_DATA as root
    if root is None or not (root / NEIGHBOURS).is_file():
        pytest.skip("the real data directory is not available")
    subs = substitutions(root, 100)
    assert max(len(t) for t in subs.sets.values()) == 100
    whole = sum(q == 1.0 for q in subs.overlap.values()) / len(subs.overlap)
    assert 0.3 < whole < 0.9
    assert subs.overlap["good"] < 1.0 and all(0 < q <= 1 for q in subs.overlap.values())


class KeptWord(nn.Module):
    """A toy classifier: class 1 when token ``word`` is in the text, else class 0. Under RanMASK's
    smoothing of a text that holds it once, P[class 1] = k / h exactly."""

    def __init__(self, word: int):
        super().__init__()
        self.word = word
        self.config = SimpleNamespace(num_labels=2)
        self.anchor = nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, **_):
        has = (input_ids == self.word).any(1).float()
        return SimpleNamespace(logits=torch.stack([1 - has, has], 1) + 0 * self.anchor)


@pytest.fixture(scope="module")
def tokenizer():
    from bench.model.backbone import load_tokenizer, resolve

    return load_tokenizer(resolve("minilm"))


def test_a_toy_classifier_votes_as_the_smoothing_says(tokenizer):
    text = "the film was good and the music was fine"  # h = 9 words, k = 3 kept at 0.7
    model = KeptWord(tokenizer.convert_tokens_to_ids("good"))
    ex = Example("u0", text, None, 1)
    perturb = lambda t, rng: masked(t, 0.7, tokenizer.mask_token, rng)  # noqa: E731
    (chosen, counts), = votes(model, tokenizer, [ex], perturb, (50, 3000), seed=0, max_length=32, device=torch.device("cpu"))
    p = kept(9, 0.7) / 9  # 1/3 exactly
    assert chosen.sum() == 50 and counts.sum() == 3000
    assert abs(counts[1] / 3000 - p) < 4 * math.sqrt(p * (1 - p) / 3000)
    row = {"votes": int(counts[0]), "samples": 3000, "words": 9, "pred": 0, "gold": 1}
    got = decide(row, {"smoothing": "ranmask", "alpha": 0.05, "mask_rate": 0.7})
    assert got["p_lower"] < 1 - p + 0.03 and not got["correct"]  # class 0 wins (p = 2/3), and is wrong


def test_a_unanimous_classifier_is_certified_to_the_analytic_radius(tokenizer):
    model = KeptWord(-1)  # never sees its word: class 0 on every sample
    ex = Example("u1", "one two three four five six seven eight nine ten eleven twelve", None, 0)
    perturb = lambda t, rng: masked(t, 0.7, tokenizer.mask_token, rng)  # noqa: E731
    (_, counts), = votes(model, tokenizer, [ex], perturb, (5, 100), seed=1, max_length=32, device=torch.device("cpu"))
    row = {"votes": int(counts[0]), "samples": 100, "words": 12, "pred": 0, "gold": 0}
    got = decide(row, {"smoothing": "ranmask", "alpha": 0.05, "mask_rate": 0.7})
    bound, k = 0.05 ** (1 / 100), kept(12, 0.7)
    want = max(r for r in range(13) if bound - ranmask_delta(12, k, r) > 0.5)
    assert got["p_lower"] == pytest.approx(bound, abs=1e-6) and got["radius"] == want and got["correct"]


def test_a_run_end_to_end_is_decided_again_from_its_rows(run_spec, runner):
    from bench.registry import SUITES
    from bench.store.records import load_predictions

    spec = run_spec("finetune", "certified", suite_params={"smoothing": "ranmask", "n": 8, "samples": 20, "select": 5})
    record = runner.run(spec)
    rows = load_predictions(record.where, record)
    certified = [r for r in rows if r["set"] == "ranmask"]
    assert len(certified) == 8 and all({"votes", "p_lower", "radius", "kept", "select"} <= set(r) for r in certified)
    assert 0 <= record.metrics["cert/ranmask"] <= record.metrics["cert/ranmask/smoothed"] <= 1
    again = SUITES.get("certified").score(rows, record.details)
    assert again == {k: v for k, v in record.metrics.items() if k in again}
    assert [c["key"] for c in record.columns if c.get("primary")] == ["cert/ranmask"]


def test_the_leaderboard_shows_certified_columns_and_the_radius_curve(run_spec, runner, tmp_path):
    from leaderboard.build import build

    record = runner.run(run_spec("finetune", "certified", suite_params={"smoothing": "ranmask", "n": 6, "samples": 20,
                                                                         "select": 5}))
    text = build([record], where=tmp_path / "LEADERBOARD.md")
    assert "RanMASK certified % (r ≥ 1)" in text and "certified at 3 words" in text
    assert "_radius.png)" in text  # linked from the Markdown
    assert len(list((tmp_path / "plots").glob("*_radius.png"))) == 1
