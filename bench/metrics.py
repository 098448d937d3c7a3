"""Metric formulas of docs/design.md section 5, as plain functions of labels and predictions, and
sparsity's one meaning (section 3)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.errors import BenchError


def accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    return float((np.asarray(y) == np.asarray(pred)).mean()) if len(y) else math.nan


def weighted_f1(y: np.ndarray, pred: np.ndarray) -> float:
    """F1 per class averaged with weights = class support (QQP, PAWS)."""
    from sklearn.metrics import f1_score  # imported here: a second and more that only F1 scores pay

    return float(f1_score(y, pred, average="weighted", zero_division=0))


def id_metric(name: str, y: np.ndarray, pred: np.ndarray) -> float:
    return weighted_f1(y, pred) if name == "f1_weighted" else accuracy(y, pred)


def collapse(pred: np.ndarray, mapping: Sequence[int]) -> np.ndarray:
    """Task-label predictions mapped into an OOD set's label space (HANS: E->E, N,C->non-E)."""
    return np.asarray(mapping)[np.asarray(pred)]


def cells(y: np.ndarray, pred: np.ndarray, groups: Sequence[str], labels: Sequence[str]) -> dict[str, float]:
    """Accuracy per group x gold label, keyed 'group/label' (HANS: heuristic x gold)."""
    y, pred, g = np.asarray(y), np.asarray(pred), np.asarray(groups)
    out = {}
    for group in sorted(set(g.tolist())):
        for li, lname in enumerate(labels):
            sel = (g == group) & (y == li)
            if sel.any():
                out[f"{group}/{lname}"] = accuracy(y[sel], pred[sel])
    return out


def bias_degree(f_dev: float, f_ood: float) -> float:
    """D = (F_dev - F_ood) / F_dev (Du et al. 2023); undefined (NaN) when F_dev is 0."""
    return math.nan if f_dev == 0 else (f_dev - f_ood) / f_dev


def f_bias(dev_c: float, ood_c: float, dev_full: float, ood_full: float) -> float:
    """F_bias = D_compressed / D_full; below 1 is less biased than the full model."""
    d_full = bias_degree(dev_full, ood_full)
    if d_full == 0 or math.isnan(d_full):
        return math.nan
    return bias_degree(dev_c, ood_c) / d_full


DEGENERATE_SHARE = 0.95  # one predicted class on more than this share of the evaluated examples
DEGENERATE_MARGIN = 0.01  # or accuracy within this of always answering the majority gold class


def degenerate(y: Sequence[int], pred: Sequence[int]) -> str | None:
    """Why a candidate did not learn the task, or None: its predictions are one class on more
    than 95 % of the set (when the gold labels are not that skewed themselves), or its accuracy
    is within 1 point of the majority class. Such a model is flagged, never ranked."""
    y, pred = np.asarray(y), np.asarray(pred)
    if not len(y):
        return None
    top, top_n = np.unique(pred, return_counts=True)
    share = top_n.max() / len(pred)
    majority = np.unique(y, return_counts=True)[1].max() / len(y)
    if share > DEGENERATE_SHARE and majority <= DEGENERATE_SHARE:
        return f"predicts class {int(top[top_n.argmax()])} on {share:.1%} of {len(y)} examples"
    acc = accuracy(y, pred)
    if acc <= majority + DEGENERATE_MARGIN:
        return f"accuracy {acc:.1%} is within {DEGENERATE_MARGIN:.0%} of the majority class's {majority:.1%}"
    return None


def one_class(y: Sequence[int], answer: Sequence[int]) -> str | None:
    """Why a model answers one class on a balanced set, or None: one answer on more than 95 % of
    the set when its gold labels are not that skewed themselves. Such a model is at chance on
    the set whatever its accuracy, so its cell is flagged, never ranked, and no claim that needs
    it can be reproduced. ``answer`` is the rows' ``pred``, in the set's own labels (HANS rows
    hold MNLI's three labels collapsed into its two; FEVER-Symmetric keeps "not enough info",
    which then counts as a class of its own)."""
    y, answer = np.asarray(y), np.asarray(answer)
    if not len(y):
        return None
    top, top_n = np.unique(answer, return_counts=True)
    share = top_n.max() / len(answer)
    if share > DEGENERATE_SHARE and np.unique(y, return_counts=True)[1].max() / len(y) <= DEGENERATE_SHARE:
        return f"answers class {int(top[top_n.argmax()])} on {share:.1%} of {len(y)} examples"
    return None


@dataclass(frozen=True)
class Collapse:
    """A partial collapse: the class answered too often or too rarely, and its share of the answers."""

    cls: int
    share: float

    @property
    def short(self) -> str:
        return f"class {self.cls}: {100 * self.share:.1f} %"

    def __str__(self) -> str:
        return f"partial collapse ({self.short})"


@dataclass(frozen=True)
class CollapseRule:
    """When a model's answers on a set have partly collapsed: it answers some gold class on
    under ``rare`` of the examples though that class is at least ``present`` of the set's gold
    labels (it has stopped answering a class the set needs), or it answers one class on more
    than ``one_class`` of a balanced set (no gold class above 1.5 / k of it, for k classes). A
    model answering 2 of 4 AG News classes, or no "neutral" on MNLI, can score well above chance
    on the others: its number on that set is not the task's skill. The defaults are the claims
    files' (``[defaults]`` may change them, docs/claims.md); the leaderboard uses them as they are."""

    one_class: float = 0.85
    rare: float = 0.02
    present: float = 0.10

    def __call__(self, gold: dict[int, int], answers: dict[int, int]) -> Collapse | None:
        """How answers (class -> count) partly collapsed on a set of gold labels (class -> count),
        or None."""
        n = sum(gold.values())
        if not n:
            return None
        for c, k in sorted(gold.items()):
            if k / n >= self.present and answers.get(c, 0) / n < self.rare:
                return Collapse(c, answers.get(c, 0) / n)
        top = max(sorted(answers), key=lambda c: answers[c], default=None)
        balanced = len(gold) > 1 and max(gold.values()) / n <= 1.5 / len(gold)
        if top is not None and balanced and answers[top] / n > self.one_class:
            return Collapse(top, answers[top] / n)
        return None


COLLAPSE = CollapseRule()  # the defaults, as the leaderboard uses them


def one_class_sets(rows: Sequence[dict]) -> dict[str, str]:
    """``one_class`` of every set in a run's prediction rows, by set name. Attack rows are left
    out: their outcome is the attack's, not a clean answer."""
    by_set: dict[str, list[dict]] = {}
    for r in rows:
        if "result" not in r and isinstance(r.get("gold"), int) and isinstance(r.get("pred"), int):
            by_set.setdefault(r["set"], []).append(r)
    out = {}
    for name, rs in sorted(by_set.items()):
        if why := one_class([r["gold"] for r in rs], [r["pred"] for r in rs]):
            out[name] = why
    return out


def check_sparsity(s: float) -> float:
    """Sparsity's one meaning (docs/design.md section 3): the fraction of prunable weights that are zero,
    a target in [0, 1). ``bench.spec.run.resolve`` checks every run's target with it once."""
    if not 0.0 <= s < 1.0:
        raise BenchError(f"sparsity must be in [0, 1), got {s}")
    return s


ECE_BINS = 10  # equal-width confidence bins over (0, 1], as Guo et al. 2017 (section 2, eq. 3)


def ece(confidence: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS) -> float:
    """Expected calibration error (Guo et al. 2017, eq. 3): sum over equal-width bins of the
    bin's share of examples times |its accuracy - its mean confidence|. Bin m holds the
    confidences in ((m - 1) / M, m / M]; a confidence of 0 falls in the first."""
    conf, right = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    if not len(conf):
        return math.nan
    b = np.clip(np.ceil(conf * bins).astype(int) - 1, 0, bins - 1)
    total = 0.0
    for m in range(bins):
        sel = b == m
        if sel.any():
            total += sel.mean() * abs(right[sel].mean() - conf[sel].mean())
    return float(total)


def confidence(probs: Sequence[Sequence[float]], pred: Sequence[int], collapse: Sequence[int] | None = None) -> np.ndarray:
    """The probability a model gives its answer, in the evaluated set's label space: the task
    classes that ``collapse`` maps to the answer summed (HANS: neutral + contradiction for
    non-entailment); without ``collapse``, the answer's own class."""
    p, q = np.asarray(probs, dtype=float), np.asarray(pred)
    if not len(q):
        return np.zeros(0)
    if collapse is None:
        return p[np.arange(len(q)), q]
    to = np.asarray(collapse)
    if len(to) != p.shape[1]:
        raise ValueError(f"collapse maps {len(to)} classes, the probabilities have {p.shape[1]}")
    return (p * (to[None, :] == q[:, None])).sum(1)  # per row: the classes mapped to its answer


def js_distance(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Row-wise Jensen-Shannon distance (the square root of the divergence, natural log), as
    ``scipy.spatial.distance.jensenshannon``, the implementation Xu et al. 2021 point to."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    p, q = p / p.sum(1, keepdims=True), q / q.sum(1, keepdims=True)
    m = (p + q) / 2

    def kl(a: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(a > 0, a * np.log(a / m), 0.0).sum(1)

    return np.sqrt(np.maximum((kl(p) + kl(q)) / 2, 0.0))


def clean_sets(rows: Sequence[dict]) -> dict[str, list[dict]]:
    """A run's rows of clean passes (every row but an attack's), by set, that keep probabilities."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        if "result" not in r and "probs" in r:
            out.setdefault(r["set"], []).append(r)
    return out


def calibration(rows: Sequence[dict], collapse: dict[str, Sequence[int]] | None = None) -> dict[str, float]:
    """``ece/<set>`` for every clean set of a run's rows, its confidence in the set's labels
    (``collapse``: set name -> task label to set label, where they differ)."""
    out = {}
    for name, rs in sorted(clean_sets(rows).items()):
        conf = confidence([r["probs"] for r in rs], [r["pred"] for r in rs], (collapse or {}).get(name))
        out[f"ece/{name}"] = ece(conf, [r["pred"] == r["gold"] for r in rs])
    return out


FLOOR = 5e-5  # half the kept probabilities' rounding unit (4 decimals): a probability kept as 0


def flips(rows: Sequence[dict], dense: Sequence[dict]) -> dict[str, float]:
    """Dutta et al. 2024 ("Accuracy is Not All You Need", abstract and section 2), per clean set
    both runs evaluated, over the examples they share: ``flips/<set>``, the share of answers that
    changed from correct to incorrect or back against the dense model's (an answer that changed
    between two wrong classes is not a flip), split as ``flips_cw/<set>`` (correct to wrong) and
    ``flips_wc/<set>`` (wrong to correct); and ``kl/<set>``, the mean KL divergence of the
    candidate's class probabilities from the dense model's, KL(dense || candidate) in nats, from
    the kept probabilities (4 decimals) floored at ``FLOOR`` and renormalised, so that it is
    finite and any reader re-scores it from the rows."""
    theirs = {(r["set"], r["uid"]): r for rs in clean_sets(dense).values() for r in rs}
    out = {}
    for name, rs in sorted(clean_sets(rows).items()):
        pairs = [(r, b) for r in rs if (b := theirs.get((name, r["uid"]))) is not None]
        if not pairs:
            continue
        right = np.array([[_right(a), _right(b)] for a, b in pairs])
        out[f"flips/{name}"] = float(np.mean(right[:, 0] != right[:, 1]))
        out[f"flips_cw/{name}"] = float(np.mean(~right[:, 0] & right[:, 1]))
        out[f"flips_wc/{name}"] = float(np.mean(right[:, 0] & ~right[:, 1]))
        mine, dense_p = (_floored([x["probs"] for x in side]) for side in zip(*pairs, strict=True))
        out[f"kl/{name}"] = float(np.mean((dense_p * np.log(dense_p / mine)).sum(1)))
    return out


def _floored(probs: list) -> np.ndarray:
    p = np.maximum(np.asarray(probs, dtype=float), FLOOR)
    return p / p.sum(1, keepdims=True)


def _right(row: dict) -> bool:
    return bool(row["correct"]) if "correct" in row else row["pred"] == row["gold"]


def loyalty(rows: Sequence[dict], dense: Sequence[dict]) -> dict[str, float]:
    """Xu et al. 2021 (section 3), per clean set both runs evaluated, over the examples they
    share: label loyalty ``loyalty/<set>``, the share of answers equal to the dense model's, and
    probability loyalty ``loyalty_prob/<set>``, 1 - the mean Jensen-Shannon distance between
    the two models' class probabilities."""
    theirs = {(r["set"], r["uid"]): r for rs in clean_sets(dense).values() for r in rs}
    out = {}
    for name, rs in sorted(clean_sets(rows).items()):
        pairs = [(r, b) for r in rs if (b := theirs.get((name, r["uid"]))) is not None]
        if not pairs:
            continue
        out[f"loyalty/{name}"] = float(np.mean([a["pred"] == b["pred"] for a, b in pairs]))
        out[f"loyalty_prob/{name}"] = float(1 - js_distance([a["probs"] for a, _ in pairs], [b["probs"] for _, b in pairs]).mean())
    return out

