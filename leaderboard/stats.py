"""The statistics the leaderboard and the claims tables print, each named for what it is.

The unit of analysis is the training run (a seed): a claim about a method is a claim about what
training with it gives, so the spread between training runs is the noise an effect must clear.
The examples are a sample too, and they are shared by every seed (a crossed design), so a
difference is judged against both (``crossed``), never against seed x example pairs pooled as if
independent (Clark 1973, "The language-as-fixed-effect fallacy").

- Over seeds: mean and sample standard deviation; with 3 to 9 seeds the 95 % t-interval of the
  mean (Student t, n - 1 degrees of freedom), intersected with the metric's range for a bounded
  metric (an accuracy, a success rate): the true mean lies in that range, so the intersection
  covers it whenever the t-interval does; with 10 or more the 95 % BCa bootstrap interval (scipy,
  fixed resampling seed), inside the range by construction. Fewer than 3 seeds: no interval.
- Between two methods (``crossed``): the per-seed differences of the metric, paired by seed, with
  a standard error that adds the example-sampling variance of the seed-averaged per-example
  differences; Student t with n_seeds - 1 degrees of freedom.
- Between two fixed models (one seed each): the exact McNemar test on their per-example outcomes
  (``mcnemar``). It says whether these two trained models differ on these examples, not whether
  the methods do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_SEEDS_FOR_INTERVAL = 3
MIN_SEEDS_FOR_BOOTSTRAP = 10
ALPHA = 0.05
WIDE_SD = 0.10  # a percentage whose seeds spread more than this (sd, 10 points) shows each seed


def interval(values: list[float], bounds: tuple[float, float] | None = None) -> tuple[float, float] | None:
    """The 95 % interval of the mean over seeds as described above, or None below 3 seeds.
    With ``bounds`` (lo, hi) the t-interval is intersected with them: a t-interval of 97, 99 and
    100 % reaches past 100, and no accuracy does. (A logit-scale interval also stays inside, but
    at a bound it needs an arbitrary clip and then no longer holds the mean it is printed with.)"""
    vals = np.asarray(values, dtype=float)
    n = len(vals)
    if n < MIN_SEEDS_FOR_INTERVAL:
        return None
    mean, sd = float(vals.mean()), float(vals.std(ddof=1))
    if sd == 0:
        return mean, mean
    if n >= MIN_SEEDS_FOR_BOOTSTRAP:
        res = stats.bootstrap((vals,), np.mean, confidence_level=0.95, n_resamples=9999, method="BCa", random_state=0)
        return float(res.confidence_interval.low), float(res.confidence_interval.high)
    half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    lo, hi = bounds if bounds is not None else (-math.inf, math.inf)
    return max(lo, mean - half), min(hi, mean + half)


def fmt(values: list[float | None], scale: float = 100.0, digits: int = 1,
        bounds: tuple[float, float] | None = None) -> str:
    """'mean', 'mean ± sd' (2 seeds) or 'mean ± sd [lo, hi]' (3 or more); '–' when nothing. A
    bounded metric whose seeds spread widely (sd over ``WIDE_SD``: an attack that breaks some
    seeds' models and not others) also lists each seed's value, since its mean then describes
    no seed."""
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return "–"
    if len(vals) == 1:
        return f"{vals[0] * scale:.{digits}f}"
    sd = float(np.std(vals, ddof=1))
    text = f"{np.mean(vals) * scale:.{digits}f} ± {sd * scale:.{digits}f}"
    ci = interval(vals, bounds)
    text += f" [{ci[0] * scale:.{digits}f}, {ci[1] * scale:.{digits}f}]" if ci else ""
    if bounds is not None and sd > WIDE_SD:
        text += " (seeds " + " / ".join(f"{v * scale:.{digits}f}" for v in vals) + ")"
    return text


@dataclass(frozen=True)
class Crossed:
    """A difference between two methods over seeds and examples: its mean, the standard error
    from both sources, the interval at ``level`` and the two-sided p of "no difference"."""

    mean: float
    se: float
    df: int
    level: float
    low: float
    high: float
    p: float


def crossed(seed_deltas: list[float], example_deltas: np.ndarray, level: float = 0.95,
            bounds: tuple[float, float] = (-1.0, 1.0)) -> Crossed | None:
    """The interval of the mean per-seed difference, for a crossed seeds x examples design.

    ``seed_deltas``: the metric's difference (candidate minus reference) on each seed, paired by
    seed. ``example_deltas``: each example's difference in correctness averaged over the seeds
    that evaluated it. The variance of the grand mean in a two-way random-effects design is
    s_seed^2 / n_seed + s_example^2 / n_example + s_interaction^2 / (n_seed n_example); the sample
    variances of the seed means and of the example means estimate it with the interaction
    counted twice, so the interval is slightly conservative. Degrees of freedom n_seed - 1 (the
    smaller of the two sources). The interval is clipped to the difference's range ``bounds``.
    None below 2 seeds: one training run has no spread to judge an effect against."""
    d = np.asarray(seed_deltas, dtype=float)
    n = len(d)
    if n < 2:
        return None
    e = np.asarray(example_deltas, dtype=float)
    var = float(d.var(ddof=1)) / n if np.ptp(d) > 1e-9 else 0.0  # equal up to float noise: no seed spread
    var += float(e.var(ddof=1)) / len(e) if len(e) > 1 else 0.0
    mean, se, df = float(d.mean()), math.sqrt(var), n - 1
    if se == 0:
        return Crossed(mean, 0.0, df, level, mean, mean, 1.0 if mean == 0 else 0.0)
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    p = float(2 * stats.t.sf(abs(mean) / se, df))
    return Crossed(mean, se, df, level, max(bounds[0], mean - half), min(bounds[1], mean + half), p)


def mcnemar(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value from the two discordant counts of paired outcomes of two
    fixed models: candidate-only right (b) and reference-only right (c)."""
    if b + c == 0:
        return 1.0
    return float(stats.binomtest(min(b, c), b + c, 0.5).pvalue)


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order. The family is what the caller
    passes: only tests that can decide something (enough seeds), so that tests which never
    count do not make the others harder to pass."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted = [1.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted
