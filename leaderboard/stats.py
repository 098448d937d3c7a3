"""The statistics the leaderboard and the claims tables print, each named for what it is.

The unit of analysis is the training run (a seed): a claim about a method is a claim about what
training with it gives, so the spread between training runs is the noise an effect must clear.
The examples are a sample too, and they are shared by every seed (a crossed design), so a
difference is judged against both (``crossed``), never against seed x example pairs pooled as if
independent (Clark 1973, "The language-as-fixed-effect fallacy").

- Over seeds: mean and sample standard deviation; with 3 to 9 seeds the 95 % t-interval of the
  mean (Student t, n - 1 degrees of freedom), intersected with the metric's range (an accuracy:
  [0, 1]; a latency, a size, a count, a speed-up: [0, inf)): the true mean lies in that range,
  so the intersection covers it whenever the t-interval does; with 10 or more the 95 % BCa
  bootstrap interval (scipy, fixed resampling seed), inside the range by construction. Fewer
  than 3 seeds: no interval.
- Between two methods (``crossed``): the mean per-seed difference, paired by seed. Its variance
  has two components: the spread between seeds (s_seed^2 / k, k - 1 degrees of freedom) and the
  examples' sampling (the cluster-robust variance of the mean of each example's seed-averaged
  difference, G - 1 degrees of freedom for G clusters; an example is its own cluster where the
  set declares none). The interval is Student t with the Welch-Satterthwaite degrees of freedom
  of the sum (Satterthwaite 1946, eq. 1; Welch 1947). ``bootstrap`` resamples seeds and clusters
  together as a check of it.
- Planning: ``leaderboard.power`` (the minimum detectable effect of a design).
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
    100 % reaches past 100, and no accuracy does; one of latencies of 2, 3 and 40 ms reaches below
    0, and no latency does. (A logit- or log-scale interval also stays inside, but it is an
    interval of another mean than the one printed: the geometric mean's for a log scale; and the
    percentile bootstrap is too narrow with 3 to 9 seeds.)"""
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
    if bounds is not None and math.isfinite(bounds[1]) and sd > WIDE_SD:  # a share or a difference of shares
        text += " (seeds " + " / ".join(f"{v * scale:.{digits}f}" for v in vals) + ")"
    return text


@dataclass(frozen=True)
class Crossed:
    """A difference between two methods over seeds and examples: its mean, the two variance
    components of that mean and the standard error they add to, the Welch-Satterthwaite degrees
    of freedom, the interval at ``level`` and the two-sided p of "no difference"."""

    mean: float
    se: float
    df: float
    level: float
    low: float
    high: float
    p: float
    seed_var: float = 0.0  # s_seed^2 / k: the spread between training runs
    example_var: float = 0.0  # the examples' sampling: cluster-robust variance of the mean
    seeds: int = 0
    clusters: int = 0  # the independent units of the example component (examples, or their clusters)
    strata: int = 1  # the fixed cells the clusters were drawn within (HANS: heuristic x label)


@dataclass(frozen=True)
class ExampleVariance:
    """The examples' part of a mean difference's variance: its value, the independent units G it
    rests on (examples, or clusters), the strata H they were drawn within, and its degrees of
    freedom G - H."""

    var: float
    units: int
    strata: int = 1

    @property
    def df(self) -> int:
        return self.units - self.strata


def example_variance(deltas: np.ndarray, clusters: np.ndarray | None = None,
                     strata: np.ndarray | None = None) -> ExampleVariance:
    """The variance of the mean of ``deltas``: the cluster-robust (sandwich) estimate, with the
    clusters centred within their strata, sum_h G_h / (G_h - 1) sum_{g in h} (sum_{i in g}
    (d_i - mean_h))^2 / n^2 (Liang and Zeger 1986; Cameron and Miller 2015, eq. 11, with the
    stratified design's G_h / (G_h - 1), as Stata's svy: Cochran 1977, section 11.3), on G - H
    degrees of freedom. With every example its own cluster and no strata it is the usual
    s^2 / n on n - 1. Examples built from one template move together, so counting them as
    independent understates the variance by up to the cluster size; the strata are cells the
    set fixes by design (HANS's heuristic x label), whose difference is the designed contrast,
    not sampling noise. A stratum with one cluster cannot be measured: then none is used."""
    d = np.asarray(deltas, dtype=float)
    n = len(d)
    if n < 2:
        return ExampleVariance(0.0, n, min(n, 1))
    if clusters is None:
        return ExampleVariance(float(d.var(ddof=1)) / n, n)
    _, codes = np.unique(clusters, return_inverse=True)
    g = int(codes.max()) + 1
    layer = np.zeros(n, dtype=np.int64) if strata is None else np.unique(strata, return_inverse=True)[1]
    of_cluster = np.zeros(g, dtype=np.int64)
    of_cluster[codes] = layer
    h = int(layer.max()) + 1
    per = np.bincount(of_cluster, minlength=h)
    if h > 1 and (per.min() < 2 or np.any(np.bincount(codes, weights=layer) != np.bincount(codes) * of_cluster)):
        return example_variance(d, clusters)  # a stratum of one cluster, or a cluster across strata: unstratified
    centred = d - (np.bincount(layer, weights=d) / np.bincount(layer))[layer]
    totals = np.bincount(codes, weights=centred)
    if g - h < 1:
        return ExampleVariance(math.nan, g, h)
    scale = (per / (per - 1))[of_cluster]
    return ExampleVariance(float(np.sum(scale * totals ** 2) / n ** 2), g, h)


def satterthwaite(parts: list[tuple[float, float]]) -> float:
    """The Welch-Satterthwaite degrees of freedom of a sum of independent variance estimates,
    each (variance, its degrees of freedom): (sum v)^2 / sum (v^2 / df) (Satterthwaite 1946,
    eq. 1), at least the smallest df of a part with variance and at most their sum. A part with
    no variance adds nothing; all zero: the largest df."""
    used = [(v, df) for v, df in parts if v > 0 and df > 0]
    if not used:
        return float(max((df for _, df in parts), default=1))
    return float(sum(v for v, _ in used) ** 2 / sum(v * v / df for v, df in used))


def crossed(seed_deltas: list[float], example_deltas: np.ndarray, level: float = 0.95,
            bounds: tuple[float, float] = (-1.0, 1.0), clusters: np.ndarray | None = None,
            strata: np.ndarray | None = None) -> Crossed | None:
    """The interval of the mean per-seed difference, for a crossed seeds x examples design.

    ``seed_deltas``: the metric's difference (candidate minus reference) on each seed, paired by
    seed. ``example_deltas``: each example's difference in correctness averaged over the seeds
    that evaluated it; ``clusters``: each example's cluster (None: independent examples), and
    ``strata``: the fixed cell each cluster lies in (``example_variance``). The variance of the
    grand mean in a two-way random-effects design is s_seed^2 / n_seed + s_example^2 / n_example
    + s_interaction^2 / (n_seed n_example); the sample variances of the seed means and of the
    example means estimate it with the interaction counted twice, so the interval is slightly
    conservative. The two components are kept apart and the interval takes their
    Welch-Satterthwaite degrees of freedom: from the smaller of n_seed - 1 and G - H (one
    component dominates) to their sum. The interval is clipped to the difference's range
    ``bounds``. None below 2 seeds (one training run has no spread to judge an effect against),
    and where the examples' variance cannot be measured (their clusters leave no degree of
    freedom)."""
    d = np.asarray(seed_deltas, dtype=float)
    n = len(d)
    if n < 2:
        return None
    v_seed = float(d.var(ddof=1)) / n if np.ptp(d) > 1e-9 else 0.0  # equal up to float noise: no seed spread
    ex = example_variance(np.asarray(example_deltas, dtype=float), clusters, strata)
    if math.isnan(ex.var) or (clusters is not None and ex.df < 1):
        return None
    mean, se = float(d.mean()), math.sqrt(v_seed + ex.var)
    df = satterthwaite([(v_seed, n - 1), (ex.var, ex.df)])
    parts = dict(seed_var=v_seed, example_var=ex.var, seeds=n, clusters=ex.units, strata=ex.strata)
    if se == 0:
        return Crossed(mean, 0.0, df, level, mean, mean, 1.0 if mean == 0 else 0.0, **parts)
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    p = float(2 * stats.t.sf(abs(mean) / se, df))
    return Crossed(mean, se, df, level, max(bounds[0], mean - half), min(bounds[1], mean + half), p, **parts)


@dataclass(frozen=True)
class Bootstrap:
    """The two-way bootstrap of a mean difference: its standard error and percentile interval."""

    mean: float
    se: float
    low: float
    high: float
    resamples: int


def bootstrap(matrix: np.ndarray, clusters: np.ndarray | None = None, level: float = 0.95,
              resamples: int = 4000, seed: int = 0, strata: np.ndarray | None = None) -> Bootstrap:
    """Seeds and example clusters resampled together (each with replacement, independently: the
    pigeonhole bootstrap of a crossed design, Owen 2007, section 3; the clusters within their
    strata, whose shares stay fixed), the statistic the grand mean of ``matrix`` (seeds x
    examples, each example's difference in correctness on each seed). A check of ``crossed`` by
    another route: in expectation its variance is (k - 1) / k of the seeds' component, (G_h - 1)
    / G_h of each stratum's part of the examples', and the seed x cluster interaction once more
    (docs/claims.md), with no normal or t assumption."""
    m = np.asarray(matrix, dtype=float)
    k, n = m.shape
    codes = np.arange(n) if clusters is None else np.unique(clusters, return_inverse=True)[1]
    g = int(codes.max()) + 1
    sums = np.stack([np.bincount(codes, weights=row, minlength=g) for row in m])  # seeds x clusters
    sizes = np.bincount(codes, minlength=g).astype(float)
    layer = np.zeros(g, dtype=np.int64)
    if strata is not None and clusters is not None:
        layer[codes] = np.unique(strata, return_inverse=True)[1]
        if np.bincount(layer).min() < 2:
            layer[:] = 0
    cells = [np.flatnonzero(layer == h) for h in range(int(layer.max()) + 1)]
    shares = [sizes[c].sum() / n for c in cells]
    rng = np.random.default_rng(seed)
    out = np.empty(resamples)
    for start in range(0, resamples, 256):
        b = min(256, resamples - start)
        w = rng.multinomial(k, np.full(k, 1 / k), size=b).astype(float)  # how often each seed is drawn
        total = np.zeros(b)
        for cell, share in zip(cells, shares, strict=True):
            u = rng.multinomial(len(cell), np.full(len(cell), 1 / len(cell)), size=b).astype(float)  # and each cluster
            total += share * np.einsum("bk,kg,bg->b", w, sums[:, cell], u) / (k * (u @ sizes[cell]))
        out[start:start + b] = total
    lo, hi = np.quantile(out, [0.5 - level / 2, 0.5 + level / 2])
    return Bootstrap(float(m.mean()), float(out.std(ddof=1)), float(lo), float(hi), resamples)


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
