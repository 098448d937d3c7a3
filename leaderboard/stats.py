"""The statistics the leaderboard prints, each named for what it is.

- Over seeds: the mean and the sample standard deviation; with 3 to 9 seeds the 95 %
  t-interval of the mean (Student t, n - 1 degrees of freedom), with 10 or more the 95 % BCa
  bootstrap interval (scipy, fixed resampling seed). Fewer than 3 seeds: no interval.
- Against the reference (the full standard-CE model of the same backbone, task and seed, on the
  same examples): the exact McNemar test on the per-example outcomes of every seed pooled
  (a binomial test on the discordant pairs), with Holm's correction across every test of one
  table. Do these trained models differ on these examples?
- Over seeds: the paired t-test of the metric's per-seed differences (n - 1 degrees of freedom),
  Holm-corrected likewise. Does the effect stand out from the variation between training runs?
  A difference can pass the first and fail the second when it is large on one seed and absent
  or reversed on others, so a leaderboard marks a difference only when both agree, from 3 seeds.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

MIN_SEEDS_FOR_INTERVAL = 3
MIN_SEEDS_FOR_BOOTSTRAP = 10
ALPHA = 0.05


def interval(values: list[float]) -> tuple[float, float] | None:
    """The 95 % interval of the mean over seeds as described above, or None below 3 seeds."""
    vals = np.asarray(values, dtype=float)
    n = len(vals)
    if n < MIN_SEEDS_FOR_INTERVAL:
        return None
    mean, sd = float(vals.mean()), float(vals.std(ddof=1))
    if sd == 0:
        return mean, mean
    if n < MIN_SEEDS_FOR_BOOTSTRAP:
        half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
        return mean - half, mean + half
    res = stats.bootstrap((vals,), np.mean, confidence_level=0.95, n_resamples=9999, method="BCa", random_state=0)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def fmt(values: list[float | None], scale: float = 100.0, digits: int = 1) -> str:
    """'mean', 'mean ± sd' (2 seeds) or 'mean ± sd [lo, hi]' (3 or more); '–' when nothing."""
    vals = [v * scale for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return "–"
    if len(vals) == 1:
        return f"{vals[0]:.{digits}f}"
    text = f"{np.mean(vals):.{digits}f} ± {np.std(vals, ddof=1):.{digits}f}"
    ci = interval(vals)
    return text + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")


def mcnemar(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value from the two discordant counts of paired outcomes:
    candidate-only right (b) and reference-only right (c)."""
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


def paired_t(deltas: list[float]) -> float:
    """Two-sided p of the paired t-test that the mean per-seed difference is 0. 1.0 below 2 seeds
    and when the differences have no variance: the t statistic is then undefined, and a metric
    over ~100 examples moves in whole steps, so equal differences are no estimate of the spread
    between training runs."""
    if len(deltas) < 2:
        return 1.0
    d = np.asarray(deltas, dtype=float)
    if np.ptp(d) < 1e-9:  # equal up to float noise (0.31 - 0.38 and 0.25 - 0.32 differ in the 17th digit)
        return 1.0
    return float(stats.ttest_1samp(d, 0.0).pvalue)
