"""What a smoothed classifier's votes certify: the Clopper-Pearson lower bound of the top class's
probability, and the two certification conditions (no torch: ``bench rescore`` re-decides every
example from the votes its row keeps).

A smoothed classifier g(x) answers the class the base model gives most often under a random
perturbation of x (Cohen et al. 2019, the CERTIFY procedure: ``select`` samples pick the top class
c, ``samples`` fresh ones count its votes n_c, and p_lower is the one-sided (1 - alpha)
Clopper-Pearson bound of P[f(perturbed x) = c]; g abstains when p_lower <= 1/2).

- SAFER (Ye, Gong and Liu, ACL 2020): each word is replaced by a uniform draw from its
  perturbation set T_w. For an attacker who substitutes words within their synonym sets S_w, the
  probability of any class moves by at most Delta = 1 - prod q_w over the substituted words, with
  q_w = min over w' in S_w of |T_w & T_w'| / |T_w| (the overlap of the two perturbation sets), so
  g's answer is certified when p_lower - Delta > 1/2 (with q's product over the ``budget``
  smallest q, or over every word as the released code does).
- RanMASK (Zeng et al., Computational Linguistics 2023): k of the h words are kept and the rest
  masked, uniformly. A perturbation of r words changes the masked text only if one of them is
  kept, which happens with probability Delta_r = 1 - C(h - r, k) / C(h, k) (Levine and Feizi
  2020's randomized ablation), so g is certified against r words when p_lower - Delta_r > 1/2;
  the certified radius is the largest such r (k: ``bench.data.perturb.kept``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy.stats import beta


def lower_bound(votes: int, samples: int, alpha: float) -> float:
    """The one-sided (1 - alpha) Clopper-Pearson lower bound of a binomial proportion: the alpha
    quantile of Beta(votes, samples - votes + 1); 0 with no vote (Cohen et al. 2019, section 3.2,
    ``proportion_confint(..., alpha=2 * alpha, method="beta")[0]``)."""
    if votes <= 0:
        return 0.0
    return float(beta.ppf(alpha, votes, samples - votes + 1))


def safer_delta(overlaps: Sequence[float], budget: int | None = None) -> float:
    """SAFER's bound on how far a class's probability can move: 1 - the product of the ``budget``
    smallest word overlaps q_w (None: every word's, as the released code takes)."""
    qs = sorted(overlaps)
    return 1.0 - math.prod(qs if budget is None else qs[:budget])


def ranmask_delta(words: int, kept: int, r: int) -> float:
    """The probability that at least one of r fixed words is among the ``kept`` of ``words``
    positions kept unmasked, drawn uniformly: 1 - C(h - r, k) / C(h, k)."""
    if r <= 0:
        return 0.0
    if r > words - kept:
        return 1.0
    return 1.0 - math.comb(words - r, kept) / math.comb(words, kept)


def ranmask_radius(p_lower: float, words: int, kept_words: int) -> int:
    """The largest number of substituted words r for which p_lower - Delta_r > 1/2 (0: certified
    only as it is; -1: not even that, the smoothed classifier abstains)."""
    if p_lower <= 0.5:
        return -1
    r = 0
    while r < words and p_lower - ranmask_delta(words, kept_words, r + 1) > 0.5:
        r += 1
    return r


def unanimous_samples(alpha: float, margin: float = 0.0) -> int:
    """The fewest samples whose bound, when every one votes for the top class, clears 1/2 +
    ``margin``: alpha ** (1 / n) > 1/2 + margin."""
    return math.floor(math.log(alpha) / math.log(0.5 + margin)) + 1
