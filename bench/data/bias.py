"""Bias-only models (DESIGN section 4): simple classifiers on hand-crafted features.

Pair tasks use lexical-overlap features (McCoy et al. 2019; Clark et al. 2019): all hypothesis
words in the premise; hypothesis a contiguous subsequence of the premise; fraction of hypothesis
words in the premise; mean and min over hypothesis words of the max cosine similarity to a
premise word, with word vectors from the backbone's input embeddings. FEVER uses the claim only
(Schuster et al. 2019): a bag of uni- and bi-grams. Training-set predictions are made
out-of-fold (5 folds), so the bias model is not judged on what it memorised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from bench.data.examples import Example, TaskData
from bench.errors import BenchError

WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


class WordVectors:
    """Word vectors: the mean of a word's word-piece input embeddings in the backbone."""

    def __init__(self, embedding: torch.Tensor, tokenizer) -> None:
        self.emb = torch.nn.functional.normalize(embedding.detach().float(), dim=-1)
        self.tok = tokenizer
        self.cache: dict[str, torch.Tensor] = {}

    def __call__(self, ws: list[str]) -> torch.Tensor:
        for w in ws:
            if w not in self.cache:
                ids = self.tok.convert_tokens_to_ids(self.tok.tokenize(w)) or [self.tok.unk_token_id]
                self.cache[w] = torch.nn.functional.normalize(self.emb[ids].mean(0), dim=-1)
        return torch.stack([self.cache[w] for w in ws])


def overlap_features(ex: Example, vectors: WordVectors) -> list[float]:
    p, h = words(ex.text_a), words(ex.text_b or "")
    if not h or not p:
        return [0.0, 0.0, 0.0, 0.0, 0.0]
    pset = set(p)
    inside = [w in pset for w in h]
    contiguous = f" {' '.join(h)} " in f" {' '.join(p)} "
    sims = (vectors(h) @ vectors(p).T).max(dim=1).values
    return [float(all(inside)), float(contiguous), sum(inside) / len(h), float(sims.mean()), float(sims.min())]


@dataclass
class BiasModel:
    """Probabilities of the bias-only model, out-of-fold on train, fitted-on-train elsewhere."""

    train_probs: np.ndarray
    predict: object  # callable: list[Example] -> np.ndarray of probabilities
    description: str


def fit_bias_model(task: TaskData, embedding: torch.Tensor, tokenizer, seed: int) -> BiasModel:
    if task.bias_features == "none":
        raise BenchError(f"task '{task.name}' has no bias-only model (no known shortcut features); use loss=ce")
    n_labels = len(task.labels)
    y = np.array([ex.label for ex in task.train])
    if task.bias_features == "claim":
        feats = lambda exs: [ex.text_b or "" for ex in exs]  # noqa: E731
        clf = make_pipeline(CountVectorizer(ngram_range=(1, 2), min_df=2), LogisticRegression(max_iter=1000, C=1.0))
        desc = "claim-only bag of uni/bi-grams, logistic regression"
    else:
        vectors = WordVectors(embedding, tokenizer)
        feats = lambda exs: np.array([overlap_features(ex, vectors) for ex in exs])  # noqa: E731
        clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
        desc = "5 lexical-overlap features, logistic regression"
    counts = np.bincount(y, minlength=n_labels)
    if (counts > 0).sum() < 2 or counts[counts > 0].min() < 2:
        raise BenchError(f"the bias model needs at least 2 training examples of each of 2+ labels, got {counts.tolist()}; "
                         "raise --max-examples")
    try:
        x = feats(task.train)
        oof = cross_val_predict(clf, x, y, cv=int(min(5, counts[counts > 0].min())), method="predict_proba")
        clf.fit(x, y)
    except ValueError as e:  # e.g. an empty vocabulary on a tiny claim-only set
        raise BenchError(f"the bias model cannot be fitted on this training set: {e}") from e

    def predict(exs: list[Example]) -> np.ndarray:
        return _full(clf.predict_proba(feats(exs)), clf.classes_, n_labels)

    return BiasModel(_full(oof, clf.classes_, n_labels), predict, desc)


def _full(p: np.ndarray, classes: np.ndarray, n: int) -> np.ndarray:
    """Probabilities over all n labels (a label absent from training gets a tiny mass)."""
    out = np.full((p.shape[0], n), 1e-6)
    out[:, classes] = p
    return out / out.sum(1, keepdims=True)
