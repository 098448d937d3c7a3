"""SRNet mask training (Liu et al. 2022) on the tiny BERT."""

import builtins
import dataclasses
import io
import json
from pathlib import Path

import pytest
import torch

from bench.errors import BenchError
from bench.model.backbone import load_classifier, resolve
from bench.spec.run import resolve as resolve_run
from bench.store.atomic import sha256_file
from methods.srnet import mix_ood, rewound

P = {"epochs": 2, "batch_size": 8, "mask_epochs": 3, "mask_eval_every": 2, "mask_lr": 0.05}


def _module(param_name: str) -> str:
    return param_name.rsplit(".", 1)[0]


def test_mask_training_leaves_every_weight_bit_identical(runner, run_spec):
    start = runner.candidate(run_spec("finetune"))
    cand = runner.candidate(run_spec("srnet", sparsity=0.5, params=P))
    assert cand.info["start_model"] == start.lineage["key"]
    assert cand.info["mask_changed"] > 0  # the masks really trained
    assert any("classifier" in k for k in cand.masks)  # the head is masked too (as the paper)
    before, after = start.model.state_dict(), cand.model.state_dict()
    assert before.keys() == after.keys()
    for name, w in before.items():
        mask = cand.masks.get(_module(name)) if name.endswith("weight") else None
        expected = w * mask if mask is not None else w
        assert torch.equal(after[name], expected), name


def test_every_matrix_meets_its_sparsity_after_every_reset(runner, run_spec):
    cand = runner.candidate(run_spec("srnet", sparsity=0.5, params=P))
    resets = cand.info["resets"]
    assert len(resets) >= 5
    assert all(r["min"] == r["max"] == 0.5 and r["off_by"] == 0 for r in resets)
    assert cand.sparsity.sparsity == 0.5 and set(cand.sparsity.per_matrix.values()) == {0.5}


def test_gradual_schedule_resets_follow_the_cubic_and_end_at_the_target(runner, run_spec):
    cand = runner.candidate(run_spec("srnet", sparsity=0.9, params={**P, "schedule": "gradual", "init": "soft"}))
    resets = cand.info["resets"]
    targets = [r["target"] for r in resets]
    assert targets == sorted(targets) and targets[-1] == 0.9 and targets[0] < 0.9
    assert all(r["off_by"] == 0 for r in resets)  # exact, up to rounding target * numel
    # the published code saved the mask at the initial sparsity (docs/design.md section 7)
    assert cand.sparsity.sparsity == pytest.approx(0.9, abs=1e-3)
    reached = [r["step"] for r in resets if r["target"] == 0.9]
    assert reached and min(reached) <= 0.7 * cand.info["train_steps"] + 2  # ramp: 0.7 of mask training
    assert cand.info["best_step"] in reached  # selected only once the target is reached


def test_model_selection_only_after_seven_tenths_of_training(runner, run_spec):
    cand = runner.candidate(run_spec("srnet", sparsity=0.5, params=P))
    assert cand.info["best_step"] >= 0.7 * cand.info["train_steps"]


def test_rewinding_restores_the_pretrained_values_exactly_under_the_mask(runner, run_spec, tiny_bert):
    found = runner.candidate(run_spec("srnet", sparsity=0.5, params=P))
    spec = run_spec("srnet", sparsity=0.5, params={**P, "paradigm": "rewind"})
    ctx = runner.context(spec.candidate(), for_suite=False)
    model = rewound(ctx, found.masks)
    pre = load_classifier(resolve(str(tiny_bert)), 3, seed=0).state_dict()
    from bench.model.masking import bake

    bake(model)
    for name, w in model.state_dict().items():
        mask = found.masks.get(_module(name)) if name.endswith("weight") else None
        assert torch.equal(w, pre[name] * mask if mask is not None else pre[name]), name
    ticket = runner.candidate(spec)
    assert ticket.info["mask_from"] == found.lineage["key"]
    assert all(torch.equal(ticket.masks[k], found.masks[k]) for k in found.masks)
    assert ticket.info["train_steps"] > 0


def test_pretrained_paradigm_trains_the_head_and_masks_the_encoder(runner, run_spec, tiny_bert):
    cand = runner.candidate(run_spec("srnet", sparsity=0.5, params={**P, "paradigm": "pretrained"}))
    assert "start_model" not in cand.info
    assert not any("classifier" in k or "pooler" in k for k in cand.masks)
    assert cand.sparsity.sparsity == 0.5
    pre = load_classifier(resolve(str(tiny_bert)), 3, seed=0).state_dict()
    for name, w in cand.model.state_dict().items():
        if "classifier" in name or "pooler" in name:
            continue
        mask = cand.masks.get(_module(name)) if name.endswith("weight") else None
        assert torch.equal(w, pre[name] * mask if mask is not None else pre[name]), name  # masked, never trained
    head = cand.model.state_dict()["classifier.weight"]
    assert not torch.equal(head, pre["classifier.weight"])  # the random head was trained


def _mnli_dir(root: Path) -> Path:
    (root / "mnli").mkdir(parents=True)
    (root / "hans").mkdir()
    labels = ["entailment", "neutral", "contradiction"]
    rows = ["index\tpremise\thypothesis\tgold_label\tnum"]
    rows += [f"{i}\tThe man {i} sat on the {labels[i % 3]} mat.\tA man sat.\t{labels[i % 3]}\t5" for i in range(1600)]
    (root / "mnli/dev_matched.tsv").write_text("\n".join(rows) + "\n")
    heur = ["lexical_overlap", "subsequence", "constituent"]
    hans = [json.dumps({"sentence1": f"the doctor {i} saw the cat", "sentence2": "the cat saw the doctor",
                        "gold_label": "non-entailment" if i % 2 else "entailment", "heuristic": heur[i % 3]})
            for i in range(60)]
    (root / "hans/hans_train.jsonl").write_text("\n".join(hans) + "\n")
    (root / "hans/hans_eval.jsonl").write_text("this would not even parse\n")
    return root


def test_ood_information_mode_never_reads_an_ood_test_file(runner, tiny_bert, tmp_path, monkeypatch):
    data = _mnli_dir(tmp_path / "data")
    secret = (data / "hans/hans_eval.jsonl").resolve()
    secret.chmod(0)  # unreadable for a normal user; root needs the open() guard below
    real_open = builtins.open

    def guarded(file, *a, **k):
        if isinstance(file, str | Path) and Path(file).resolve() == secret:
            raise PermissionError(13, "unreadable OOD test file", str(file))
        return real_open(file, *a, **k)

    monkeypatch.setattr(builtins, "open", guarded)
    monkeypatch.setattr(io, "open", guarded)
    spec = resolve_run("srnet", "ood", task="mnli", backbone=str(tiny_bert), data_dir=str(data), max_examples=40,
                   sparsity=0.5, params={**P, "ood_mix": 0.5})
    cand = runner.candidate(spec)
    assert cand.info["ood_train_examples"] == 20
    assert cand.info["ood_train"]["sha256"] == {"hans/hans_train.jsonl": sha256_file(data / "hans/hans_train.jsonl")}
    with pytest.raises((BenchError, PermissionError)) as err:
        runner.run(spec)  # judging it is what needs the test file
    assert "unreadable OOD test file" in str(err.value)  # the guard, not some other failure


def test_ood_mix_labels_hans_non_entailment_as_neutral_and_cycles_small_sets():
    from bench.registry import TASKS

    task = TASKS.get("nli_synth").load(None)
    mixed, info = mix_ood(task, 0.5, seed=0)
    extra = mixed.train[len(task.train):]
    assert len(extra) == 1500 and info["ood_train_examples"] == 1500
    assert {e.label for e in extra} == {0, 1}  # entailment, neutral
    assert all(e.uid.startswith("synth-hans-train") for e in extra)
    test_pairs = {(e.text_a, e.text_b) for e in task.ood["hans_synth"].examples}
    assert not test_pairs & {(e.text_a, e.text_b) for e in extra}


def test_ood_mode_on_a_task_without_ood_training_data_is_an_error():
    from bench.registry import TASKS

    task = dataclasses.replace(TASKS.get("nli_synth").load(None), ood_train=None)
    with pytest.raises(BenchError, match="has no OOD training data"):
        mix_ood(task, 0.1, seed=0)


def test_ood_mode_names_the_missing_training_file(runner, tiny_bert, tmp_path):
    data = _mnli_dir(tmp_path / "data")
    (data / "hans/hans_train.jsonl").unlink()
    spec = resolve_run("srnet", "ood", task="mnli", backbone=str(tiny_bert), data_dir=str(data), max_examples=40,
                   sparsity=0.5, params={**P, "ood_mix": 0.5})
    with pytest.raises(BenchError, match="ood_mix: HANS training set"):
        runner.candidate(spec)
