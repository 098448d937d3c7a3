from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bench.api import Candidate
from bench.data.examples import DataSource, EvalSet, Example, TaskData
from bench.errors import BenchError
from suites.ood import OOD, OODParams


class FixedModel(torch.nn.Module):
    """Predicts the label written as the last word of the hypothesis ('p0', 'p1', 'p2')."""

    def __init__(self, tok):
        super().__init__()
        self.config = SimpleNamespace(num_labels=3)
        self.ids = {tok.convert_tokens_to_ids(f"{w}"): i for i, w in enumerate(["zero", "one", "two"])}
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, **_):
        out = torch.full((input_ids.shape[0], 3), -5.0)
        for row, ids in enumerate(input_ids.tolist()):
            for tid, label in self.ids.items():
                if tid in ids:
                    out[row, label] = 5.0
        return SimpleNamespace(logits=out)


WORDS = ["zero", "one", "two"]


def _ex(uid, label, pred, group=""):
    return Example(uid, "premise text", f"hypothesis {WORDS[pred]}", label, group)


@pytest.fixture
def ctx(tiny_bert):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    test = [_ex("t1", 0, 0), _ex("t2", 1, 1), _ex("t3", 2, 0), _ex("t4", 2, 2)]
    hans = [
        _ex("h1", 0, 0, "lexical_overlap"), _ex("h2", 1, 0, "lexical_overlap"),
        _ex("h3", 1, 2, "lexical_overlap"), _ex("h4", 0, 1, "subsequence"), _ex("h5", 1, 1, "subsequence"),
    ]
    src = DataSource("synthetic", "test")
    task = TaskData("t", ("entailment", "neutral", "contradiction"), True, "accuracy", 32, "overlap",
                    train=test, dev=test, test=test, sources=[src],
                    ood={"hans": EvalSet("hans", ("entailment", "non-entailment"), (0, 1, 1), "accuracy", "hans", lambda: (hans, src))})
    cand = Candidate(model=FixedModel(tok), tokenizer=tok, lineage={}, sparsity=SimpleNamespace())
    return SimpleNamespace(task=task, device=torch.device("cpu"), precision="fp32", suite_params=None), cand


def _pools(c, pools: str):
    return SimpleNamespace(**{**vars(c), "suite_params": OODParams(pools=pools)})


def test_ood_suite_metrics_by_hand(ctx):
    c, cand = ctx
    res = OOD().evaluate(cand, c)
    m = res.metrics
    assert m["id"] == 0.75
    # HANS: preds collapse to [0, 0, 1, 1, 1] vs gold [0, 1, 1, 0, 1] -> 3/5
    assert m["ood/hans"] == pytest.approx(0.6)
    assert m["ood/hans/lexical_overlap/entailment"] == 1.0
    assert m["ood/hans/lexical_overlap/non-entailment"] == 0.5
    assert m["ood/hans/subsequence/entailment"] == 0.0
    assert m["ood/hans/mean/non-entailment"] == pytest.approx(0.75)
    assert m["ood/hans/share/entailment"] == pytest.approx(0.4)
    assert m["pool/hans"] == pytest.approx(0.6)
    assert len(res.predictions) == 4 + 5
    fb = OOD().compare(m, {"id": 0.8, "pool/hans": 0.4})
    assert fb["f_bias/hans"] == pytest.approx(((0.75 - 0.6) / 0.75) / 0.5)
    assert OOD().evaluate(cand, _pools(c, "hans")).metrics["ood/hans"] == m["ood/hans"]


def test_a_pool_the_task_lacks_is_an_error_before_anything_runs(ctx):
    c, cand = ctx
    with pytest.raises(BenchError, match=r"suite 'ood' has no OOD set in pools paws for task 't' \(its pools: hans\)"):
        OOD().check(OODParams(pools="paws"), c.task, None)
    with pytest.raises(BenchError, match="has no OOD set in pools paws"):
        OOD().evaluate(cand, _pools(c, "paws"))


def test_paws_uses_weighted_f1(ctx):
    c, cand = ctx
    src = DataSource("synthetic", "x")
    paws = [_ex("p1", 0, 0), _ex("p2", 0, 0), _ex("p3", 1, 0), _ex("p4", 1, 1), _ex("p5", 1, 1), _ex("p6", 1, 1)]
    c.task.ood = {"paws_wiki": EvalSet("paws_wiki", ("no", "yes"), (0, 1, 1), "f1_weighted", "paws", lambda: (paws, src))}
    m = OOD().evaluate(cand, _pools(c, "paws")).metrics
    # class 0: P 2/3 R 1 F1 .8 (support 2); class 1: P 1 R 3/4 F1 6/7 (support 4)
    assert m["ood/paws_wiki"] == pytest.approx((2 * 0.8 + 4 * 6 / 7) / 6)
    assert m["ood/paws_wiki/acc"] == pytest.approx(5 / 6)
    assert np.isclose(m["pool/paws"], m["ood/paws_wiki"])


def test_easy_and_hard_halves_of_the_test_set(ctx):
    import dataclasses

    c, cand = ctx
    c.task.test = [dataclasses.replace(e, group=g) for e, g in zip(c.task.test, ["easy", "easy", "hard", "hard"], strict=True)]
    m = OOD().evaluate(cand, c).metrics
    # the fixed model is right on t1, t2, t4 and wrong on t3 (see ctx)
    assert m["id/easy"] == 1.0 and m["id/hard"] == 0.5 and m["id/gap"] == 0.5


def _write_eval(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_users_own_evaluation_file_becomes_a_leaderboard_column(tmp_path, tiny_bert, capsys):
    """No code, one suite parameter; labels by name (any case) or index, groups
    scored per group x label, the column declared for the leaderboard, F_bias against the
    reference on the same file; a ``cluster`` column is kept beside the records, where the paired
    tests find it (``bench.store.clusters``)."""
    import json

    from bench.cli import main
    from bench.store.records import load_records

    lines = [{"premise": f"the cat {i} sat", "hypothesis": "the cat sat" if i % 2 else "a dog ran", "label":
              ["Entailment", "2", "neutral"][i % 3], "group": ["g1", "g2"][i % 2], "cluster": f"t{i // 4}"} for i in range(12)]
    path = _write_eval(tmp_path, "my-hard.split.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out"
    argv = ["run", "--method", "finetune", "--suite", "ood", "--backbone", str(tiny_bert), "--max-examples", "40",
            "--param", "epochs=1", "--param", "batch_size=8", "--suite-param", f"eval_file={path}", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    (rec,) = [r for r in load_records(out / "records") if r.method == "finetune"]
    assert rec.details["sizes"]["my_hard_split"] == 12 and "ood/my_hard_split" in rec.metrics
    assert {"ood/my_hard_split/g1/entailment", "f_bias/my_hard_split"} <= set(rec.metrics)
    assert any(c["key"] == "ood/my_hard_split" and c["table"] == "main" for c in rec.columns)
    header = next(ln for ln in (out / "LEADERBOARD.md").read_text().splitlines() if ln.startswith("| rank"))
    assert "| my_hard_split " in header and "F_bias my_hard_split" in header
    from bench.store import clusters

    (kept,) = clusters.read(out)
    assert kept.set == "my_hard_split" and kept.of == {f"my_hard_split-{i + 1}": f"t{i // 4}" for i in range(12)}
    first = rec.run_id
    _write_eval(tmp_path, "my-hard.split.jsonl", "".join(json.dumps({**x, "label": "neutral"}) + "\n" for x in lines))
    assert main(argv) == 0  # other contents under the same path: another run, not the cached record
    assert len([r for r in load_records(out / "records") if r.method == "finetune"]) == 2 and first


@pytest.mark.parametrize("name, text, message", [
    ("e.jsonl", "", "no examples in it"),
    ("e.jsonl", '{"premise": "a", "label": "entailment"}\n', "no text fields for a pair task"),
    ("e.tsv", "premise\thypothesis\tlabel\na\tb\tmaybe\n", "label 'maybe', not one of entailment, neutral, contradiction"),
    ("e.csv", "premise,hypothesis\na,b\n", "example 1 has no 'label'"),
    ("e.txt", "x", "unknown format '.txt'"),
    ("e.jsonl", "not json\n", "line 1 is not JSON"),
])
def test_a_bad_evaluation_file_is_one_line_before_anything_trains(tmp_path, tiny_bert, capsys, name, text, message):
    from bench.cli import main

    path = _write_eval(tmp_path, name, text)
    code = main(["run", "--method", "finetune", "--suite", "ood", "--backbone", str(tiny_bert), "--suite-param",
                 f"eval_file={path}", "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out" / "artifacts").exists()  # nothing trained
    missing = main(["run", "--method", "finetune", "--suite", "ood", "--suite-param", "eval_file=/no/such.jsonl",
                    "--out", str(tmp_path / "out"), "--quiet"])
    assert missing == 2 and "parameter 'eval_file': /no/such.jsonl does not exist" in capsys.readouterr().err


def test_an_evaluation_file_with_a_byte_order_mark_snli_gold_labels_and_a_cap(tmp_path):
    """A spreadsheet's CSV starts with a byte-order mark; SNLI names its label column gold_label and
    marks the pairs its annotators did not agree on with '-'; --max-examples caps the file as it
    caps every split."""
    import dataclasses
    import json

    from bench.data.evalfile import load
    from bench.data.examples import TaskData

    task = TaskData(name="t", labels=("entailment", "neutral", "contradiction"), pair=True, id_metric="accuracy",
                    max_length=64, bias_features="none", train=[], dev=[], test=[], ood={}, sources=[])
    bom = tmp_path / "sheet.csv"
    bom.write_bytes("\ufeffpremise,hypothesis,label\na,b,entailment\nc,d,neutral\n".encode())
    examples, _, _ = load(str(bom), task)
    assert [e.label for e in examples] == [0, 1]
    rows = [{"sentence1": f"s{i}", "sentence2": "t", "gold_label": ["entailment", "-", "contradiction"][i % 3]}
            for i in range(30)]
    snli = tmp_path / "snli_dev.jsonl"
    snli.write_text("".join(json.dumps(r) + "\n" for r in rows))
    examples, source, _ = load(str(snli), task)
    assert len(examples) == 20 and {e.label for e in examples} == {0, 2} and "10 rows without a gold label" in source.detail
    capped, source, _ = load(str(snli), dataclasses.replace(task, cap=8))
    assert len(capped) == 8 and {e.label for e in capped} == {0, 2} and "capped at 8" in source.detail


def test_a_parameter_given_twice_is_refused_not_the_last_one_kept():
    from bench.errors import BenchError
    from bench.spec.params import split_assignments

    with pytest.raises(BenchError, match="parameter 'eval_file' given twice"):
        split_assignments(["eval_file=a.jsonl", "eval_file=b.jsonl"])


def test_several_evaluation_files_are_one_run_with_a_column_each(tmp_path, tiny_bert):
    """Several eval files in one run, each its own column, one row per candidate;
    as a comma list on the command line or a TOML list in a sweep spec."""
    import json

    from bench.cli import main
    from bench.spec.run import resolve
    from bench.store.records import load_records

    lines = [{"premise": f"the cat {i} sat", "hypothesis": "the cat sat", "label": ["entailment", "neutral"][i % 2]}
             for i in range(10)]
    a = _write_eval(tmp_path, "set_a.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    b = _write_eval(tmp_path, "set_b.jsonl", "".join(json.dumps(x) + "\n" for x in lines[:6]))
    out = tmp_path / "out"
    assert main(["run", "--method", "finetune", "--suite", "ood", "--backbone", str(tiny_bert), "--max-examples", "40",
                 "--param", "epochs=1", "--param", "batch_size=8", "--suite-param", f"eval_file={a},{b}",
                 "--out", str(out), "--quiet"]) == 0
    (rec,) = [r for r in load_records(out / "records") if r.method == "finetune"]
    assert rec.details["sizes"]["set_a"] == 10 and rec.details["sizes"]["set_b"] == 6
    assert {"ood/set_a", "ood/set_b", "f_bias/set_a", "f_bias/set_b"} <= set(rec.metrics)
    table = (out / "LEADERBOARD.md").read_text().splitlines()
    header = next(ln for ln in table if ln.startswith("| rank"))
    assert "| set_a " in header and "| set_b " in header
    assert sum(ln.startswith("| ") and "finetune (ce)" in ln for ln in table[table.index(header):]) >= 1
    listed = resolve("finetune", "ood", backbone=str(tiny_bert), suite_params={"eval_file": [str(a), str(b)]})
    assert listed.suite_params.eval_file == (a, b)  # a sweep spec's TOML list
    (tmp_path / "x").mkdir()
    twin = _write_eval(tmp_path / "x", "set_a.jsonl", a.read_text())
    from bench.registry import SUITES, TASKS
    from suites.ood import OODParams

    with pytest.raises(BenchError, match="two evaluation sets are named 'set_a'"):
        SUITES.get("ood").check(OODParams(eval_file=(a, twin)), TASKS.get("nli_synth").load(None), None)
