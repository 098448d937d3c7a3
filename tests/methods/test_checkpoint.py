"""A checkpoint judged as it is, and a candidate exported as one: same predictions as a plain
``transformers`` forward pass, labels matched by name, refused before anything runs otherwise."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bench.cli import main
from bench.spec.run import resolve
from bench.store.records import load_predictions, load_records

TASK_ORDER = ("entailment", "neutral", "contradiction")  # nli_synth's label ids


def _checkpoint(backbone: Path, out: Path, names: list[str]) -> Path:
    """A "fine-tuned elsewhere" classifier: the backbone with a seeded head whose outputs are
    ``names`` in that order, saved as transformers saves one."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(1)
    model = AutoModelForSequenceClassification.from_pretrained(
        backbone, num_labels=len(names), id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(backbone).save_pretrained(out)
    return out


def _plain_probs(ckpt: Path, examples) -> np.ndarray:
    """A plain forward pass, one example at a time, no harness code."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(ckpt).eval()
    tok = AutoTokenizer.from_pretrained(ckpt)
    out = []
    with torch.no_grad():
        for e in examples:
            enc = tok(e.text_a, e.text_b, truncation=True, max_length=64, return_tensors="pt")
            out.append(torch.softmax(model(**enc).logits[0], -1).numpy())
    return np.array(out)


def _by_uid(rows, names):
    return {r["uid"]: r for r in rows if r["set"] in names}


def test_a_checkpoint_is_judged_with_its_own_head_and_labels_matched_by_name(runner, tiny_bert, tmp_path):
    theirs = ["CONTRADICTION", "Entailment", "neutral"]  # another order and case than the task's
    ckpt = _checkpoint(tiny_bert, tmp_path / "ckpt", theirs)
    rec = runner.run(resolve("checkpoint", "ood", backbone=str(ckpt), max_examples=40))
    assert rec.label == "checkpoint (as is)" and rec.method_info["labels"] == {
        "entailment": "Entailment", "neutral": "neutral", "contradiction": "CONTRADICTION"}
    assert rec.provenance["backbone"]["name"] == str(ckpt) and len(rec.provenance["backbone"]["files"]) == 16
    # judged as it is: no F_bias reference fine-tuned on demand (issue 103), so no F_bias
    assert rec.reference is None and not any(k.startswith("f_bias/") for k in rec.metrics)
    assert [p.name.split("-")[0] for p in (runner.out / "artifacts").iterdir()] == ["checkpoint"]
    task = runner.task_data(resolve("checkpoint", "ood", backbone=str(ckpt), max_examples=40))
    rows = _by_uid(load_predictions(runner.out / "records", rec), {"test"})
    plain = _plain_probs(ckpt, task.test)
    reorder = [theirs.index(n) for n in ("Entailment", "neutral", "CONTRADICTION")]
    for e, p in zip(task.test, plain[:, reorder], strict=True):
        assert rows[e.uid]["pred"] == int(p.argmax())
        assert rows[e.uid]["probs"] == pytest.approx(p.tolist(), abs=2e-4)  # kept at 4 decimals


def test_labels_that_do_not_match_are_refused_before_anything_runs_and_label_map_names_them(tiny_bert, tmp_path, capsys):
    ckpt = _checkpoint(tiny_bert, tmp_path / "ckpt", ["LABEL_0", "LABEL_1", "LABEL_2"])
    out = tmp_path / "out"
    args = ["run", "--method", "checkpoint", "--suite", "ood", "--backbone", str(ckpt), "--max-examples", "40", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "['LABEL_0', 'LABEL_1', 'LABEL_2']" in err and "['entailment', 'neutral', 'contradiction']" in err
    assert "label_map" in err and len(err.splitlines()) == 1 and not (out / "artifacts").exists()
    assert main(args + ["--param", "label_map=LABEL_0:entailment+LABEL_1:neutral"]) == 2  # two of three: still refused
    capsys.readouterr()
    assert main(args + ["--param", "label_map=LABEL_0:contradiction+LABEL_1:entailment+LABEL_2:neutral"]) == 0
    rec = load_records(out / "records")[0]
    assert rec.method_info["labels"] == {"entailment": "LABEL_1", "neutral": "LABEL_2", "contradiction": "LABEL_0"}
    assert main(["run", "--method", "checkpoint", "--suite", "ood", "--backbone", str(tiny_bert), "--out", str(out)]) == 2
    assert "is not a sequence-classification checkpoint" in capsys.readouterr().err  # a bare encoder has no head
    assert main(args + ["--param", "label_map=LABEL_0=entailment"]) == 2
    assert "label_map must be theirs:ours pairs" in capsys.readouterr().err


def test_an_exported_candidate_is_a_standard_checkpoint_with_the_same_predictions(runner, run_spec, tmp_path, capsys):
    from transformers import AutoModelForSequenceClassification

    rec = runner.run(run_spec("imp", sparsity=0.5))
    record_file = runner.out / "records" / f"{rec.run_id}.json"
    assert main(["export", str(record_file), "--to", str(tmp_path / "exported")]) == 0
    files = {p.name for p in (tmp_path / "exported").iterdir()}
    assert "model.safetensors" in files and "config.json" in files and not files & {"masks.safetensors", "candidate.json"}
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "exported")
    assert model.config.id2label == dict(enumerate(TASK_ORDER))
    again = runner.run(resolve("checkpoint", "ood", backbone=str(tmp_path / "exported"), max_examples=40))
    a = _by_uid(load_predictions(runner.out / "records", rec), {"test", "hans_synth"})
    b = _by_uid(load_predictions(runner.out / "records", again), {"test", "hans_synth"})
    assert a.keys() == b.keys() and len(a) == 80
    assert all(a[u]["pred"] == b[u]["pred"] and a[u]["probs"] == b[u]["probs"] for u in a)
    assert again.sparsity["sparsity"] == pytest.approx(0.5, abs=1e-6)  # the zeros travel with the weights
    assert main(["export", str(record_file), "--to", str(tmp_path / "exported")]) == 2  # never over a folder
    assert "exists" in capsys.readouterr().err
    art = runner.out / "artifacts" / rec.artifact["key"]
    (art / "config.json").write_text((art / "config.json").read_text().replace("entailment", "entail"))
    assert main(["export", str(art), "--to", str(tmp_path / "other")]) == 2
    assert "damaged" in capsys.readouterr().err and not (tmp_path / "other").exists()


@pytest.mark.parametrize("arch", ["roberta", "distilbert"])
def test_other_architectures_keep_their_own_head(arch, tiny_backbones, tmp_path):
    from bench.core.runner import Runner

    ckpt = _checkpoint(tiny_backbones[arch], tmp_path / "ckpt", ["contradiction", "neutral", "entailment"])
    runner = Runner(tmp_path / "out", progress=False)
    spec = resolve("checkpoint", "ood", backbone=str(ckpt), max_examples=40)
    rec = runner.run(spec)
    rows = _by_uid(load_predictions(runner.out / "records", rec), {"test"})
    plain = _plain_probs(ckpt, runner.task_data(spec).test)[:, [2, 1, 0]]
    assert [rows[e.uid]["pred"] for e in runner.task_data(spec).test] == plain.argmax(1).tolist()
