"""Training for randomized smoothing (``methods.smoothing_aware``): each batch trains on fresh random
copies drawn from the certified suite's own distribution (SAFER's released ``train.py``: one fresh
substitution of every example each epoch; RanMASK's ``trainer/mask.py``: a fresh mask each batch,
at the same rate), from the backbone or from a given model; the run is then certified."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest
import torch

from bench.data.perturb import kept
from bench.errors import BenchError
from bench.store.records import load_predictions
from methods.smoothing_aware import SmoothedParams


def test_its_parameters_are_checked():
    with pytest.raises(BenchError, match="smoothing must be one of safer, ranmask"):
        SmoothedParams(smoothing="gauss")
    with pytest.raises(BenchError, match="start must be one of backbone, finetune, checkpoint"):
        SmoothedParams(start="imp")
    assert SmoothedParams().mask_rate == 0.7 and SmoothedParams().neighbours == 100  # RanMASK args.py; SAFER run.sh


def test_ranmask_training_sees_fresh_masks_at_the_suites_rate(run_spec, runner, monkeypatch):
    import methods.smoothing_aware as smoothed

    copies = defaultdict(list)
    draw = smoothed.perturbed

    def spy(ex, perturb, rng):
        out = draw(ex, perturb, rng)
        copies[ex.uid].append(out.text_b if out.text_b is not None else out.text_a)
        return out

    monkeypatch.setattr(smoothed, "perturbed", spy)
    spec = run_spec("smoothing_aware", "certified", params={"smoothing": "ranmask", "epochs": 2, "batch_size": 8},
                    suite_params={"smoothing": "ranmask", "n": 4, "samples": 10, "select": 3})
    record = runner.run(spec)
    texts = [t for got in copies.values() for t in got]
    assert texts and all(len(t.split()) - t.split().count("[MASK]") == kept(len(t.split()), 0.7) for t in texts)
    assert all(len(got) == 2 for got in copies.values())  # every example, once an epoch
    assert sum(a != b for a, b in copies.values()) > len(copies) / 2  # drawn afresh each time
    assert record.label == "RanMASK-trained" and "cert/ranmask" in record.metrics
    assert any(r["set"] == "ranmask" for r in load_predictions(record.where, record))


def test_safer_training_substitutes_from_the_neighbour_lists(run_spec, runner, tmp_path, monkeypatch):
    import bench.train.loop as loop

    words = Counter(w for ex in _train_texts(run_spec) for w in ex.lower().split())
    common = [w for w, _ in words.most_common(6)]
    data = tmp_path / "data"
    (data / "wordsub").mkdir(parents=True)
    (data / "wordsub" / "counterfitted_neighbors.json").write_text(json.dumps({w: [f"{w}zz"] for w in common}))
    calls = []
    encode = loop.encode
    monkeypatch.setattr(loop, "encode", lambda tok, exs, n: calls.append([e.text_b or e.text_a for e in exs]) or encode(tok, exs, n))
    spec = run_spec("smoothing_aware", "certified", params={"epochs": 1, "batch_size": 8}, data_dir=str(data),
                    suite_params={"n": 4, "samples": 10, "select": 3})
    record = runner.run(spec)
    seen = [t.lower() for batch in calls if len(batch) <= 8 for t in batch]  # the batches, not a whole clean split
    assert not any("zz" in t for batch in calls if len(batch) > 8 for t in batch)  # the clean splits stay clean
    assert record.label == "SAFER-trained" and "cert/safer" in record.metrics
    share = sum(t.count("zz") for t in seen) / max(1, sum(sum(t.split().count(w) for w in common) for t in seen)
                                                  + sum(t.count("zz") for t in seen))
    assert 0.3 < share < 0.7  # each listed word replaced by its one neighbour about half the time


def _train_texts(run_spec) -> list[str]:
    from bench.registry import TASKS

    spec = run_spec("smoothing_aware", "certified")
    task = TASKS.get(spec.task).load(None).limited(spec.max_examples)
    return [ex.text_b if ex.text_b is not None else ex.text_a for ex in task.train]


def test_a_compression_starts_from_the_smoothing_trained_model(run_spec, runner):
    """``start=ranmask`` (or ``safer``): quantized or pruned from the recipe's model trained for
    smoothing, the twin the certified study compresses beside the CE model."""
    spec = run_spec("wanda", "certified", sparsity=0.5,
                    params={"start": "ranmask", "retrain_epochs": 0.0, "epochs": 1, "batch_size": 8},
                    suite_params={"smoothing": "ranmask", "n": 4, "samples": 10, "select": 3})
    record = runner.run(spec)
    assert record.label == "wanda (from RanMASK-trained)"
    assert record.baseline and "smoothing_aware" in record.baseline  # compared with the model it was pruned from
    with pytest.raises(BenchError, match="start must be one of finetune, checkpoint, safer, ranmask"):
        run_spec("quantize", "certified", params={"start": "gauss"})


def test_a_pruned_model_trained_for_smoothing_stays_as_sparse(runner, tiny_bert, tmp_path):
    """A compressed candidate exported (its masks baked into zeros) and trained for smoothing from
    that checkpoint keeps every zero: training moves only the weights the pruning kept."""
    from bench.model.masking import magnitude_masks, prunable_linears
    from bench.spec.run import resolve
    from tests.methods.test_checkpoint import _checkpoint

    ckpt = _checkpoint(tiny_bert, tmp_path / "ckpt", ["entailment", "neutral", "contradiction"])
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(ckpt)
    masks = magnitude_masks(model, 0.5)
    with torch.no_grad():
        for name, lin in prunable_linears(model).items():
            lin.weight.mul_(masks[name])
    model.save_pretrained(ckpt, safe_serialization=True)
    spec = resolve("smoothing_aware", "certified", backbone=str(ckpt), max_examples=40,
                   params={"smoothing": "ranmask", "start": "checkpoint", "epochs": 1, "batch_size": 8},
                   suite_params={"smoothing": "ranmask", "n": 4, "samples": 10, "select": 3})
    cand = runner.candidate(spec)
    assert cand.info["start_zeros_kept"] == pytest.approx(0.5, abs=1e-3)
    trained = prunable_linears(cand.model)
    assert all(torch.equal(trained[n].weight.detach() != 0, m) for n, m in masks.items())  # the same zeros
    before = prunable_linears(model)
    assert any(not torch.equal(trained[n].weight.detach(), before[n].weight.detach()) for n in masks)  # and it trained
    assert cand.sparsity.sparsity == pytest.approx(0.5, abs=1e-3)
