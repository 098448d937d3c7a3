"""What a design can detect: a pilot's variance components and the minimum detectable effect
of a design of k seeds and n examples at 80 % power (``bench plan``, ``leaderboard.plan``), by the
interval ``leaderboard.stats.crossed`` gives it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from leaderboard.stats import example_variance, satterthwaite

POWER = 0.80  # the power a registered design is planned for


@dataclass(frozen=True)
class Components:
    """What a pilot says about a paired difference, per unit: the variance of one seed's
    difference (between training runs), of one example's difference (its main effect) and of
    their interaction, and the design effect of the set's clusters (the cluster-robust over the
    independent-example variance; 1 where examples are their own clusters). ``crossed``'s two
    components for a design of k seeds and n examples are then s_seed^2 / k and
    deff (s_example^2 + s_interaction^2 / k) / n, the examples' on G - H degrees of freedom, the
    clusters growing with the examples and the strata fixed."""

    seed: float
    example: float
    interaction: float
    deff: float
    seeds: int  # the pilot's
    examples: int
    clusters: int
    strata: int = 1

    def variances(self, k: int, n: float) -> tuple[float, float, float]:
        """The seed and example components of the mean difference's variance for k seeds and n
        examples, and the degrees of freedom of their sum."""
        v_seed = self.seed / k
        v_ex = self.deff * (self.example + self.interaction / k) / n
        g = max(self.strata + 1.0, n * self.clusters / max(self.examples, 1))
        return v_seed, v_ex, satterthwaite([(v_seed, k - 1), (v_ex, g - self.strata)])


def components(matrix: np.ndarray, seed_deltas: list[float], clusters: np.ndarray | None = None,
               strata: np.ndarray | None = None) -> Components:
    """A pilot's variance components from its seeds x examples matrix of differences (two-way
    ANOVA method-of-moments estimates, each truncated at zero; Searle, Casella and McCulloch
    1992, section 4.7): the interaction from each seed's variance over examples less that of the
    examples' seed means, the example main effect from what remains. The seed component is the
    sample variance of the metric's per-seed differences. With one pilot seed the interaction
    cannot be told from the example effect and is counted as example variance (conservative)."""
    m = np.asarray(matrix, dtype=float)
    k, n = m.shape
    seed = float(np.var(seed_deltas, ddof=1)) if len(seed_deltas) > 1 else math.nan
    means = m.mean(axis=0)
    s2_means = float(means.var(ddof=1)) if n > 1 else 0.0  # = example + interaction / k
    if k > 1:
        within = float(np.mean([row.var(ddof=1) for row in m]))  # = example + interaction
        interaction = max(0.0, (within - s2_means) * k / (k - 1))
        example = max(0.0, s2_means - interaction / k)
    else:
        interaction, example = 0.0, s2_means
    naive = s2_means / n if n else 0.0
    robust = example_variance(means, clusters, strata)
    deff = robust.var / naive if naive > 0 and math.isfinite(robust.var) else 1.0
    return Components(seed, example, interaction, deff, k, n, robust.units, robust.strata)


def mde(c: Components, k: int, n: float, level: float, power: float = POWER, equivalence: bool = False) -> float:
    """The minimum detectable effect of a design of k seeds and n examples: the true difference
    whose interval at ``level`` excludes zero with probability ``power``,
    (t_{1 - alpha/2, df} + t_{power, df}) SE (Cohen 1988, section 2.4, with the t quantiles of the
    Satterthwaite df). ``equivalence``: the smallest margin whose interval at ``level`` lies inside
    plus or minus it with that power when the true difference is zero, (t_{1 - alpha/2} +
    t_{(1 + power)/2}) SE: two one-sided tests at alpha / 2 each, the interval's own reading
    (Schuirmann 1987 reads a 1 - 2 alpha interval)."""
    v_seed, v_ex, df = c.variances(k, n)
    se = math.sqrt(v_seed + v_ex)
    second = (1 + power) / 2 if equivalence else power
    return float((stats.t.ppf(0.5 + level / 2, df) + stats.t.ppf(second, df)) * se)
