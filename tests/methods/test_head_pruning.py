"""Head gates, head importance and physical head removal (Michel et al. 2019) on the tiny BERT."""

import pytest
import torch
from transformers import AutoModelForSequenceClassification

from bench.errors import BenchError
from bench.model.heads import HeadGates, heads_to_prune, load_pruned, remove_heads


@pytest.fixture
def model(tiny_bert):
    torch.manual_seed(0)
    cfg_model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3)
    return cfg_model.eval()


def _batch(tiny_bert):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    return dict(tok(["the cat sat on the mat", "a dog ran far away today"], ["it sat", "it ran"],
                    padding=True, return_tensors="pt"))


def test_a_pruned_and_reloaded_model_gives_the_gated_models_logits(model, tiny_bert, tmp_path):
    batch = _batch(tiny_bert)
    prune = {0: [1], 1: [0]}
    gates = HeadGates(model)
    with torch.no_grad():
        for layer, heads in prune.items():
            gates.keep[layer, heads] = 0.0
        gated = model(**batch).logits
    gates.remove()
    remove_heads(model, prune)
    with torch.no_grad():
        removed = model(**batch).logits
    assert torch.allclose(gated, removed, atol=1e-5)
    assert model.bert.encoder.layer[0].attention.self.query.out_features == 16  # one head of 16 dims left
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    back = load_pruned(tmp_path / "m", AutoModelForSequenceClassification)
    with torch.no_grad():
        assert torch.allclose(back(**batch).logits, removed, atol=1e-6)
    full = sum(p.numel() for p in AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3).parameters())
    assert sum(p.numel() for p in back.parameters()) < full


def test_head_importance_ranks_a_useless_head_last(model, tiny_bert):
    from types import SimpleNamespace

    from bench.data.examples import Example
    from methods.head_pruning import head_importance

    value = model.bert.encoder.layer[1].attention.self.value
    with torch.no_grad():  # head 1 of layer 1 outputs zeros: its gate cannot matter
        value.weight[16:] = 0
        value.bias[16:] = 0
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    train = [Example(str(i), f"the cat {i} sat on the mat", "a cat sat", i % 3) for i in range(24)]
    task = SimpleNamespace(train=train, max_length=32)
    ctx = SimpleNamespace(task=task, device=torch.device("cpu"), precision="fp32")
    gates = HeadGates(model)
    imp = head_importance(model, tok, ctx, gates, batch_size=8)
    assert imp.shape == (2, 2)
    assert imp[1, 1] == imp.min() and imp[1, 1] < 1e-6 < imp[1, 0]
    assert heads_to_prune(imp, 0.25, allow_empty_layers=False) == {1: [1]}


def test_pruning_every_head_of_a_layer_needs_to_be_asked_for():
    imp = torch.tensor([[0.1, 0.2], [0.9, 0.8]])
    with pytest.raises(BenchError, match=r"remove every head of layer\(s\) \[0\]"):
        heads_to_prune(imp, 0.5, allow_empty_layers=False)
    assert heads_to_prune(imp, 0.5, allow_empty_layers=True) == {0: [0, 1]}
    with pytest.raises(BenchError, match=r"head fraction must be in \[0, 1\)"):
        heads_to_prune(imp, 1.0, allow_empty_layers=True)


def test_an_empty_layer_still_runs(model, tiny_bert):
    batch = _batch(tiny_bert)
    remove_heads(model, {0: [0, 1]})
    with torch.no_grad():
        assert model(**batch).logits.shape == (2, 3)


def test_head_pruning_method_end_to_end(runner, run_spec):
    spec = run_spec("head_pruning", params={"epochs": 2, "batch_size": 8, "fraction": 0.25})
    built = runner.candidate(spec)  # built and saved
    again = runner.candidate(spec)  # loaded back from disk
    assert again is not built and again.model.config.bench_kept_heads == built.model.config.bench_kept_heads
    widths = [layer.attention.self.query.out_features for layer in again.model.bert.encoder.layer]
    assert widths == [layer.attention.self.query.out_features for layer in built.model.bert.encoder.layer]
    assert sorted(widths) == [16, 32]  # one of the four 16-wide heads is gone, from one layer
    batch = built.tokenizer(["the film was good", "a dull, long and tired plot"], padding=True, return_tensors="pt")
    with torch.no_grad():
        assert torch.allclose(built.model.eval()(**batch).logits, again.model.eval()(**batch).logits, atol=1e-5)
    rec = runner.run(spec)
    assert rec.method_info["heads_removed"] == 1 and rec.label == "head pruning 25% (one-shot)"
    full = runner.run(run_spec("finetune"))
    assert rec.metrics["eff/params_m"] < full.metrics["eff/params_m"]
    assert rec.metrics["eff/disk_mb"] < full.metrics["eff/disk_mb"]
    it = runner.run(run_spec("head_pruning", params={"epochs": 2, "batch_size": 8, "fraction": 0.5,
                                                     "schedule": "iterative", "rounds": 2}))
    assert it.method_info["heads_removed"] == 2 and len(it.method_info["importance_rounds"]) == 2


def test_the_pruned_model_is_not_trained_again_unless_asked(runner, run_spec):
    """Michel et al. 2019 (and Du et al. 2023's head-pruning row) prune the fine-tuned model and use
    it as it is: the kept heads' weights are the fine-tuned ones."""
    recipe = {"epochs": 2, "batch_size": 8}
    start = runner.candidate(run_spec("finetune", params=recipe))
    pruned = runner.candidate(run_spec("head_pruning", params={**recipe, "fraction": 0.25}))
    assert "train_steps" not in pruned.info
    kept = {int(k): [h for h in range(2) if h not in v] for k, v in pruned.info["pruned_heads"].items()}
    for layer, heads in kept.items():
        q_start = start.model.bert.encoder.layer[layer].attention.self.query.weight
        q_pruned = pruned.model.bert.encoder.layer[layer].attention.self.query.weight
        assert torch.equal(q_pruned, torch.cat([q_start[h * 16:(h + 1) * 16] for h in heads]))
    again = runner.candidate(run_spec("head_pruning", params={**recipe, "fraction": 0.25, "retrain_epochs": 1}))
    assert again.info["train_steps"] == 5


def test_head_fraction_outside_the_range_is_a_one_line_error(capsys, tmp_path):
    from bench.cli import main

    assert main(["run", "--method", "head_pruning", "--suite", "ood", "--param", "fraction=1.5", "--out", str(tmp_path)]) == 2
    assert "head fraction must be in [0, 1), got 1.5" in capsys.readouterr().err
