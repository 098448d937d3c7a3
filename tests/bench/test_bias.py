import numpy as np
import torch

from bench.data.bias import WordVectors, fit_bias_model, overlap_features
from bench.data.examples import Example
from bench.registry import TASKS


class _Tok:
    unk_token_id = 0

    def tokenize(self, w):
        return [w]

    def convert_tokens_to_ids(self, toks):
        return [hash(t) % 50 + 1 for t in toks]


def test_overlap_features_by_hand():
    vec = WordVectors(torch.randn(64, 8), _Tok())
    full = overlap_features(Example("a", "the cat saw the dog", "the cat saw", 0), vec)
    assert full[:3] == [1.0, 1.0, 1.0] and abs(full[3] - 1.0) < 1e-5 and abs(full[4] - 1.0) < 1e-5
    part = overlap_features(Example("b", "the cat saw the dog", "the dog saw a bird", 0), vec)
    assert part[0] == 0.0 and part[1] == 0.0 and part[2] == 3 / 5


def test_bias_model_learns_the_planted_shortcut_out_of_fold(tiny_bert):
    from transformers import AutoModel, AutoTokenizer

    task = TASKS.get("nli_synth").load(None).limited(600)
    emb = AutoModel.from_pretrained(tiny_bert).get_input_embeddings().weight
    bias = fit_bias_model(task, emb, AutoTokenizer.from_pretrained(tiny_bert), seed=0)
    assert bias.train_probs.shape == (600, 3)
    assert abs(bias.train_probs.sum(1) - 1).max() < 1e-6
    y = [e.label for e in task.train]
    acc = (bias.train_probs.argmax(1) == y).mean()
    assert 0.5 < acc < 0.95  # informative, not perfect
    in_fold = bias.predict(task.train)  # the final model, fitted on all of train
    assert in_fold.shape == bias.train_probs.shape
    assert np.abs(in_fold - bias.train_probs).max() > 1e-3  # the training probabilities are not the fitted model's


def test_synthetic_ood_set_defeats_the_bias_model(tiny_bert):
    """The HANS-like set is built so that the overlap shortcut is right on half of it."""
    import numpy as np
    from transformers import AutoModel, AutoTokenizer

    from bench.metrics import accuracy, collapse

    task = TASKS.get("nli_synth").load(None).limited(600)
    emb = AutoModel.from_pretrained(tiny_bert).get_input_embeddings().weight
    bias = fit_bias_model(task, emb, AutoTokenizer.from_pretrained(tiny_bert), seed=0)
    ood = task.ood["hans_synth"]
    pred = collapse(bias.predict(ood.examples).argmax(1), ood.collapse)
    assert 0.4 <= accuracy(np.array([e.label for e in ood.examples]), pred) <= 0.6
