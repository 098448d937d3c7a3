"""Every method builds, and the suites judge, on a BERT-, a RoBERTa- and a DistilBERT-shaped
backbone (tiny random configs): sparsity is counted over each architecture's own six matrices
per layer, and heads are gated and removed in each."""

from __future__ import annotations

import pytest

from bench.model.arch import layers
from bench.model.masking import prunable_linears
from bench.spec.run import resolve

STEP = {"epochs": 1, "batch_size": 8}
METHODS = {
    "finetune": (None, {}, "nli_synth"),
    "imp": (0.5, {}, "nli_synth"),
    "srnet": (0.5, {"mask_epochs": 1.0}, "nli_synth"),
    "head_pruning": (None, {"fraction": 0.5}, "nli_synth"),
    "distilled": (None, {"student": "truncated"}, "nli_synth"),
    "rmc": (0.4, {"sparsities": "0.2:0.4"}, "nli_synth"),
    "robust_tickets": (0.5, {"search_epochs": 1.0, "retrain_epochs": 1.0}, "sent_synth"),
    "freelb": (None, {}, "sent_synth"),
}


@pytest.mark.parametrize("arch", ["bert", "roberta", "distilbert"])
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_builds_on_every_architecture(method, arch, runner, tiny_backbones):
    sparsity, params, task = METHODS[method]
    spec = resolve(method, "", task=task, backbone=str(tiny_backbones[arch]), sparsity=sparsity,
                   max_examples=16, params={**STEP, **params})
    cand = runner.candidate(spec)
    assert len(prunable_linears(cand.model)) == 6 * len(layers(cand.model))
    if sparsity:
        assert cand.sparsity.sparsity == pytest.approx(sparsity, abs=1e-3)
    if method == "head_pruning":
        assert cand.info["heads_removed"] == 2 and cand.sparsity.total_params < runner.candidate(
            spec.with_method("finetune", None, STEP)).sparsity.total_params
    if method == "distilled":
        assert len(layers(cand.model)) == 1
    again = runner.candidate(spec)  # read back from the cache in the architecture's own shape
    assert sum(p.numel() for p in again.model.parameters()) == sum(p.numel() for p in cand.model.parameters())


@pytest.mark.parametrize("arch", ["roberta", "distilbert"])
def test_the_suites_judge_every_architecture(arch, runner, tiny_backbones):
    ood = runner.run(resolve("finetune", "ood", backbone=str(tiny_backbones[arch]), max_examples=16, params=STEP))
    assert "ood/hans_synth" in ood.metrics and "f_bias/hans" in ood.metrics
    adv = runner.run(resolve("finetune", "adversarial", task="sent_synth", backbone=str(tiny_backbones[arch]),
                             max_examples=16, params=STEP, suite_params={"n": 4, "recipes": "textfooler"}))
    assert adv.metrics["textfooler/clean"] is not None
