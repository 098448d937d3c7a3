"""`bench rescore`: a record's numbers are recomputed from its predictions and the data."""

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.rescore import rescore
from bench.store.records import load_record
from tests.conftest import REAL_DATA

ROOT = Path(__file__).resolve().parents[2]


def _rewrite(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def test_a_fresh_record_and_its_f_bias_rescore_exactly(runner, run_spec, capsys):
    rec = runner.run(run_spec("finetune", params={"loss": "poe", "epochs": 1, "batch_size": 8}))
    results = {r.run_id: r for r in rescore(runner.out)}
    assert len(results) == 2 and all(r.status == "exact" and r.gold == "checked" for r in results.values())
    assert results[rec.run_id].checked == len([k for k in rec.metrics if not k.startswith("eff/")])  # F_bias too
    assert main(["rescore", str(runner.out)]) == 0
    assert "2 re-scored exactly" in capsys.readouterr().out


def test_each_distinct_data_is_read_once_and_each_record_is_checked_against_its_own(runner, run_spec, monkeypatch):
    """Re-scoring a study reads its data once, not once per record (a study holds up
    to 135 records on the same MNLI files), nor once per study when studies share it, yet a
    record with another example cap is still checked against the examples it was evaluated on."""
    from bench.registry import TASKS

    task = type(TASKS.get("nli_synth"))
    load, reads = task.load, []
    monkeypatch.setattr(task, "load", lambda self, d: reads.append(d) or load(self, d))
    for seed, cap in ((0, 40), (1, 40), (0, 30)):
        runner.run(run_spec("finetune", seed=seed, max_examples=cap, params={"epochs": 1, "batch_size": 8}))
    reads.clear()
    results = rescore(runner.out)
    assert len(results) == 3 and all(r.status == "exact" and r.gold == "checked" for r in results)
    assert len(reads) == 2  # one per example cap
    shared: dict = {}  # several studies of one data, as `bench rescore` of several folders passes
    reads.clear()
    for _ in range(2):
        assert all(r.status == "exact" for r in rescore(runner.out, None, shared))
    assert len(reads) == 2


def test_an_edited_metric_an_edited_prediction_or_a_wrong_gold_label_is_a_mismatch(runner, run_spec, capsys):
    rec = runner.run(run_spec("finetune"))
    path = runner.out / "records" / f"{rec.run_id}.json"
    _rewrite(path, lambda d: d["metrics"].update({"ood/hans_synth": d["metrics"]["ood/hans_synth"] + 0.01}))
    assert main(["rescore", str(runner.out)]) == 2
    out = capsys.readouterr()
    assert "ood/hans_synth: recorded" in out.out and "1 records do not re-score" in out.err

    runner.run(run_spec("finetune"), force=True)  # a clean record again
    rec = load_record(path)
    preds = (path.parent / rec.predictions).resolve()
    original = [json.loads(x) for x in gzip.decompress(preds.read_bytes()).decode().splitlines()]
    rows = [dict(r) for r in original]
    rows[0]["pred"] = (rows[0]["pred"] + 1) % 3
    preds.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode(), mtime=0))
    (res,) = [r for r in rescore(runner.out) if r.run_id == rec.run_id]
    assert res.status == "mismatch" and "checksum differs" in res.problems[0]
    _rewrite(path, lambda d: d.update(predictions_sha256=""))  # dropping the checksum does not hide the edit
    (res,) = [r for r in rescore(runner.out) if r.run_id == rec.run_id]
    assert res.status == "mismatch" and "no predictions checksum" in res.problems[0]

    _rewrite(path, lambda d: d.update(predictions_sha256=hashlib.sha256(preds.read_bytes()).hexdigest()))
    (res,) = [r for r in rescore(runner.out) if r.run_id == rec.run_id]
    assert res.status == "mismatch" and any(p.startswith(("id", "id_acc")) for p in res.problems)

    rows = [dict(r) for r in original]
    rows[1]["gold"] = (rows[1]["gold"] + 1) % 3  # a label the data does not have for this example
    preds.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode(), mtime=0))
    _rewrite(path, lambda d: d.update(predictions_sha256=hashlib.sha256(preds.read_bytes()).hexdigest()))
    (res,) = [r for r in rescore(runner.out) if r.run_id == rec.run_id]
    assert any(f"has gold {rows[1]['gold']}" in p for p in res.problems)


STUDIES = sorted(str(p.parent.relative_to(ROOT / "results")) for p in (ROOT / "results").rglob("records") if p.is_dir())


REAL_SETS: dict = {}  # the real data's evaluation sets, built once for every study (as `bench rescore results`)


@pytest.mark.parametrize("study", STUDIES)
def test_every_committed_study_rescores_without_a_mismatch(study):
    results = rescore(ROOT / "results" / study, str(REAL_DATA), REAL_SETS)
    assert [r.problems for r in results if r.status == "mismatch"] == []


def test_a_records_one_class_flags_are_recorded_and_re_scored(runner, run_spec, capsys):
    """A run records, per evaluated set, where it answers one class; an edit of that field is a
    mismatch (records made before the field existed hold null and are not checked on it)."""
    rec = runner.run(run_spec("finetune"))
    assert isinstance(rec.one_class, dict)
    assert len(rec.provenance["backbone"]["loaded_weights"]) == 16  # what the backbone loaded, fingerprinted
    path = runner.out / "records" / f"{rec.run_id}.json"
    _rewrite(path, lambda d: d.update(one_class={"hans_synth": "answers class 0 on 99.0% of 10 examples"}))
    assert main(["rescore", str(runner.out)]) == 2
    assert "one_class: recorded" in capsys.readouterr().out
    _rewrite(path, lambda d: d.update(one_class=None))
    assert main(["rescore", str(runner.out)]) == 0
