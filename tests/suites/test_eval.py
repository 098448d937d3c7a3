"""The eval suite and the files both suites read (bench/data/evalfile.py): any task, AdvGLUE's
dev.json and GLUE's TSVs, HANS-style binary labels on a 3-way NLI task, one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bench.cli import main
from bench.data.evalfile import GLUE_LABELS, eval_set, load
from bench.data.examples import TaskData
from bench.errors import BenchError
from bench.store.records import load_predictions, load_records
from suites.eval import Eval, EvalParams
from suites.ood import OOD, OODParams
from tests.methods.test_checkpoint import _checkpoint
from tests.suites.test_ood import FixedModel, _ex

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ADVGLUE = ASSETS / "advglue_dev.json"  # AdvGLUE's dev.json format: one object keyed by task, GLUE's label ids
HANS_VARIANT = ASSETS / "hans_variant.jsonl"  # HANS's fields; the hypothesis's last word fixes FixedModel's answer
NLI = ("entailment", "neutral", "contradiction")
SENTIMENT = ("negative", "positive")


def _task(labels: tuple[str, ...], pair: bool, name: str = "t", test=()) -> TaskData:
    return TaskData(name=name, labels=labels, pair=pair, id_metric="accuracy", max_length=32, bias_features="none",
                    train=list(test), dev=list(test), test=list(test), ood={}, sources=[])


def _data(root: Path) -> Path:
    """SST-2 and MNLI in the layout of docs/data.md, generated, and a one-pair HANS (a run's id holds
    the checksums of its task's OOD sets, whatever its suite judges)."""
    (root / "sst2").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        rows = [f"review {i} of the {split} split was {'good' if i % 2 else 'bad'}\t{i % 2}" for i in range(24)]
        (root / f"sst2/{split}.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    (root / "mnli").mkdir()
    rows = [f"{i}\tThe man {i} sat on the {NLI[i % 3]} mat.\tA man sat.\t{NLI[i % 3]}" for i in range(1600)]
    (root / "mnli/dev_matched.tsv").write_text("index\tpremise\thypothesis\tgold_label\n" + "\n".join(rows) + "\n")
    (root / "hans").mkdir()
    hans = {"sentence1": "The doctor saw the cat .", "sentence2": "The cat saw the doctor .", "gold_label": "non-entailment",
            "heuristic": "lexical_overlap"}
    (root / "hans/hans_eval.jsonl").write_text(json.dumps(hans) + "\n")
    return root


@pytest.mark.parametrize("task, labels, files", [("sst2", SENTIMENT, [ADVGLUE]), ("mnli", NLI, [ADVGLUE, HANS_VARIANT])])
def test_an_advglue_file_is_judged_on_sst2_and_mnli_with_no_code(tiny_bert, tmp_path, capsys, task, labels, files):
    """docs/suites.md's held-out-style trial: AdvGLUE's dev.json as it is distributed, a checkpoint
    judged as it is, the task's rows of the file selected by the task's name and their GLUE label
    ids read by name, and on MNLI a HANS variant beside it; each file is its own column beside the
    ID test metric, and nothing trains (no reference either: no F_bias)."""
    data, out = _data(tmp_path / "data"), tmp_path / "out"
    ckpt = _checkpoint(tiny_bert, tmp_path / "ckpt", list(labels))
    argv = ["run", "--method", "checkpoint", "--suite", "eval", "--task", task, "--backbone", str(ckpt), "--data-dir",
            str(data), "--max-examples", "40", "--out", str(out), "--quiet"]
    assert main(argv + ["--suite-param", f"eval_file={','.join(map(str, files))}"]) == 0
    (rec,) = load_records(out / "records")
    assert rec.method == "checkpoint" and rec.suite == "eval"  # no reference was trained for F_bias
    given = json.loads(ADVGLUE.read_text())[task]
    rows = [r for r in load_predictions(out / "records", rec) if r["set"] == "advglue_dev"]
    names = rec.details["labels"]["advglue_dev"]
    assert {r["uid"]: r["gold"] for r in rows} == {str(x["idx"]): names.index(GLUE_LABELS[task][x["label"]]) for x in given}
    assert rec.metrics["ood/advglue_dev"] == pytest.approx(np.mean([r["pred"] == r["gold"] for r in rows]))
    assert "id" in rec.metrics and not any(k.startswith("f_bias/") for k in rec.metrics)
    assert any(c["key"] == "ood/advglue_dev" and c["table"] == "main" for c in rec.columns)
    assert f"key '{task}'" in json.dumps(rec.provenance["data"]["sources"])
    header = next(ln for ln in (out / "LEADERBOARD.md").read_text().splitlines() if ln.startswith("| rank"))
    assert "| advglue_dev " in header and "ID acc" in header
    binary = {"hans_variant": [0, 1, 1]} if HANS_VARIANT in files else {}
    assert rec.details["collapse"] == binary and ("| hans_variant " in header) == bool(binary)
    capsys.readouterr()
    assert main(argv) == 2  # the files are the suite's point
    err = capsys.readouterr().err.strip()
    assert "suite 'eval' needs --suite-param eval_file=PATH" in err and len(err.splitlines()) == 1
    other = tmp_path / "other_tasks.json"
    other.write_text(json.dumps({"qnli": [{"question": "q", "sentence": "s", "label": 0}], "rte": []}))
    assert main(argv + ["--suite-param", f"eval_file={other}"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"no rows for task '{task}'" in err and "(its keys: qnli, rte)" in err and len(err.splitlines()) == 1
    assert len(load_records(out / "records")) == 1


@pytest.fixture
def nli(tiny_bert):
    """nli_synth's labels, a model whose answer is the hypothesis's last word (zero, one, two)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    task = _task(NLI, True, "nli_synth", [_ex("t1", 0, 0), _ex("t2", 1, 1), _ex("t3", 2, 0), _ex("t4", 2, 2)])
    cand = SimpleNamespace(model=FixedModel(tok), tokenizer=tok)
    return task, cand


def _ctx(task, params):
    return SimpleNamespace(task=task, device=torch.device("cpu"), precision="fp32", suite_params=params)


def test_a_binary_nli_file_is_scored_with_the_collapse_hans_uses(nli):
    """A HANS variant: entailment / non-entailment in any case, HANS's gold_label and heuristic
    columns; neutral and contradiction answers count as non-entailment, as on the task's own HANS
    set, in both suites, and the set's description says so."""
    from bench.registry import TASKS

    task, cand = nli
    res = Eval().evaluate(cand, _ctx(task, EvalParams(eval_file=(HANS_VARIANT,))))
    m = res.metrics
    # gold [non, non, non, ent, ent], answers [ent, neutral, contradiction, ent, contradiction]
    # -> collapsed [ent, non, non, ent, non]: right on rows 2, 3, 4
    assert m["ood/hans_variant"] == pytest.approx(3 / 5)
    assert m["ood/hans_variant/lexical_overlap/non-entailment"] == 0.0
    assert m["ood/hans_variant/constituent/non-entailment"] == 1.0 and m["ood/hans_variant/constituent/entailment"] == 0.0
    assert m["ood/hans_variant/share/entailment"] == pytest.approx(2 / 5)
    assert m["id"] == 0.75  # the ID reference: right on t1, t2, t4
    assert res.details["collapse"] == {"hans_variant": [0, 1, 1]}
    assert res.details["labels"]["hans_variant"] == ["entailment", "non-entailment"]
    own = TASKS.get("nli_synth").load(None).ood["hans_synth"]
    judged = eval_set(str(HANS_VARIANT), task)
    assert (judged.labels, judged.collapse) == (own.labels, own.collapse)
    assert "neutral and contradiction answers count as non-entailment" in judged.source.detail
    ood = OOD().evaluate(cand, _ctx(task, OODParams(eval_file=(HANS_VARIANT,)))).metrics
    assert {k: v for k, v in ood.items() if k.startswith("ood/")} == {k: v for k, v in m.items() if k.startswith("ood/")}
    assert Eval().compare(m, {"id": 0.8, "pool/hans_variant": 0.4})["f_bias/hans_variant"] == pytest.approx(
        ((0.75 - 0.6) / 0.75) / 0.5)  # F_bias per file where a reference exists


def test_glue_tsvs_are_read_unquoted_and_glue_label_ids_match_the_tasks_orders():
    """GLUE's TSVs hold quotes in their text, even at a field's start: a quoted reading would
    join rows. Integer labels of a TSV are the task's indices, which are GLUE's for these tasks."""
    from bench.data.tasks.glue import NLI_LABELS
    from bench.data.tasks.sentiment import SST2_LABELS

    examples, _, labels = load(str(ASSETS / "glue_sst2_dev.tsv"), _task(SENTIMENT, False))
    assert [e.label for e in examples] == [0, 1, 0] and labels == SENTIMENT
    assert examples[2].text_a.startswith('" flat') and '"superb"' in examples[0].text_a
    examples, _, _ = load(str(ASSETS / "glue_mnli_dev_matched.tsv"), _task(NLI, True))
    assert [e.label for e in examples] == [0, 2, 1]  # gold_label, by name
    assert (examples[0].text_a, examples[0].text_b) == ('He said "wait here" and left.', "He left.")
    assert GLUE_LABELS["sst2"] == SST2_LABELS and GLUE_LABELS["mnli"] == NLI_LABELS


def test_the_task_s_rows_of_a_file_keyed_by_task_and_glue_ids_by_name(tmp_path):
    """AdvGLUE's label ids are GLUE's, read by name: a task whose labels are in another order
    still gets the right ones (never the integer trusted as the task's index)."""
    reordered = _task(("contradiction", "entailment", "neutral"), True, "mnli_full")  # "mnli" before the "_"
    examples, source, _ = load(str(ADVGLUE), reordered)
    assert [e.label for e in examples] == [1, 2, 0] and [e.uid for e in examples] == ["0", "1", "2"]
    assert "0 entailment, 1 neutral, 2 contradiction" in source.detail
    examples, _, _ = load(str(ADVGLUE), _task(("positive", "negative"), False, "sst2"))
    assert [e.label for e in examples] == [0, 1, 0, 1]


@pytest.mark.parametrize("name, text, labels, message", [
    ("b.jsonl", '{"premise": "a", "hypothesis": "b", "label": "non-entailment"}\n'
                '{"premise": "a", "hypothesis": "b", "label": "neutral"}\n', NLI,
     "example 2 has label 'neutral', but the file's labels are HANS's entailment / non-entailment"),
    ("b.jsonl", '{"premise": "a", "hypothesis": "b", "label": "not_entailment"}\n'
                '{"premise": "a", "hypothesis": "b", "label": 1}\n', NLI, "example 2 has label '1', but the file's labels"),
    ("s.jsonl", '{"sentence": "a", "label": "non-entailment"}\n', SENTIMENT,
     "label 'non-entailment', not one of negative, positive"),
    ("k.json", '{"mnli": [], "qqp": []}', SENTIMENT, "no rows for task 't' in this file keyed by task (its keys: mnli, qqp)"),
    ("k.json", '"sst2"', SENTIMENT, "neither a list of examples nor an object keyed by task"),
    ("l.json", '[{"sentence": "a", "label": 1}, ["b", 0]]', SENTIMENT, "example 2 is not a JSON object"),
    ("t.tsv", "sentence\tlabel\na\t1\nb\tc\t0\n", SENTIMENT, "line 3 has 3 tab-separated fields, the header 2"),
])
def test_bad_labels_and_keys_are_one_line(tmp_path, name, text, labels, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(BenchError, match="^eval_file ") as err:
        load(str(path), _task(labels, labels == NLI))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_ood_suite_judges_a_file_on_a_task_without_ood_sets(tiny_bert, tmp_path, capsys):
    """SST-2 has no OOD set of its own: the ood suite judges the ID test split and the file, with
    F_bias for the file against the reference on the same file; without a file it says how."""
    data, out = _data(tmp_path / "data"), tmp_path / "out"
    argv = ["run", "--method", "finetune", "--suite", "ood", "--task", "sst2", "--backbone", str(tiny_bert),
            "--data-dir", str(data), "--max-examples", "24", "--param", "epochs=1", "--param", "batch_size=8",
            "--out", str(out), "--quiet"]
    assert main(argv + ["--suite-param", f"eval_file={ASSETS / 'glue_sst2_dev.tsv'}"]) == 0
    (rec,) = load_records(out / "records")
    assert {"id", "ood/glue_sst2_dev", "f_bias/glue_sst2_dev"} <= set(rec.metrics)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "suite 'ood' has no OOD set for task 'sst2'" in err and "eval_file=PATH" in err and len(err.splitlines()) == 1


def test_the_eval_suite_is_listed_with_its_parameter(capsys):
    assert main(["ls"]) == 0
    listing = capsys.readouterr().out
    assert "  eval " in listing and "eval_file (paths) = ()" in listing.split("  eval ", 1)[1].split("\n  ood ", 1)[0]
