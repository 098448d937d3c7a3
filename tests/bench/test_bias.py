import numpy as np

from bench.data.bias import WordVectors, claim_features, fit_bias_model, glove, overlap_features
from bench.data.examples import Example
from bench.registry import TASKS


class _Table:
    """Fixed random vectors for a handful of words; none for 'zzz'."""

    def vector(self, w):
        return None if w == "zzz" else np.random.default_rng(abs(hash(w)) % 2**32).normal(size=50).astype(np.float32)


def test_overlap_features_by_hand():
    vec = WordVectors(_Table())
    full = overlap_features(Example("a", "the cat saw the zzz", "saw the zzz", 0), vec)
    assert full[:3] == [1.0, 1.0, 1.0] and abs(full[3] - 1.0) < 1e-5 and abs(full[4] - 1.0) < 1e-5  # zzz matches itself
    part = overlap_features(Example("b", "the cat saw the dog", "the dog saw a bird", 0), vec)
    assert part[0] == 0.0 and part[1] == 0.0 and part[2] == 3 / 5


def test_similarities_come_from_static_glove_vectors():
    """SRNet appendix B.3.1: fastText vectors; offline, GloVe 6B-50d stands in (never the model's
    own embeddings): related words are closer than unrelated ones."""
    vec = WordVectors()
    film, movie, banana = vec(["film", "movie", "banana"])
    assert film @ movie > 0.8 and film @ banana < 0.5
    claim = claim_features(Example("c", "", "the film won", 0), vec)
    assert np.allclose(claim, vec(["the", "film", "won"]).max(axis=0))
    assert glove().vector("film") is not None


def test_bias_model_learns_the_planted_shortcut_out_of_fold():
    task = TASKS.get("nli_synth").load(None).limited(600)
    bias = fit_bias_model(task, seed=0)
    assert "GloVe" in bias.description
    assert bias.train_probs.shape == (600, 3)
    assert abs(bias.train_probs.sum(1) - 1).max() < 1e-6
    y = [e.label for e in task.train]
    acc = (bias.train_probs.argmax(1) == y).mean()
    assert 0.5 < acc < 0.95  # informative, not perfect
    in_fold = bias.predict(task.train)  # the final model, fitted on all of train
    assert in_fold.shape == bias.train_probs.shape
    assert np.abs(in_fold - bias.train_probs).max() > 1e-3  # the training probabilities are not the fitted model's
    other = fit_bias_model(task, seed=1)  # folds shuffled with the run's seed
    assert np.abs(other.train_probs - bias.train_probs).max() > 1e-6


def test_synthetic_ood_set_defeats_the_bias_model():
    """The HANS-like set is built so that the overlap shortcut is right on half of it."""
    from bench.metrics import accuracy, collapse

    task = TASKS.get("nli_synth").load(None).limited(600)
    bias = fit_bias_model(task, seed=0)
    ood = task.ood["hans_synth"]
    pred = collapse(bias.predict(ood.examples).argmax(1), ood.collapse)
    assert 0.4 <= accuracy(np.array([e.label for e in ood.examples]), pred) <= 0.6
