"""`bench dataset`: the records and their per-example predictions as Parquet that pandas and
`datasets` read, the same numbers as the records, and nothing from a record that fails its checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from bench.cli import main
from bench.store.records import load_predictions, load_records

STUDY = Path(__file__).resolve().parents[2] / "results" / "quickstart"


def test_a_study_as_parquet_that_pandas_and_datasets_read(tmp_path, capsys):
    import datasets

    assert main(["dataset", str(STUDY), "--to", str(tmp_path / "ds")]) == 0
    records = pd.read_parquet(tmp_path / "ds" / "records.parquet")
    preds = pd.read_parquet(tmp_path / "ds" / "predictions.parquet")
    ours = {r.run_id: r for r in load_records(STUDY / "records")}
    assert set(records["run_id"]) == set(ours) and set(records["study"]) == {"quickstart"}
    for _, row in records.iterrows():
        rec = ours[row["run_id"]]
        assert row["metric/id"] == rec.metrics["id"] and json.loads(row["params_json"]) == rec.params
    one = next(iter(ours.values()))
    kept = load_predictions(STUDY / "records", one)
    mine = preds[preds["run_id"] == one.run_id]
    assert len(mine) == len(kept) and mine["correct"].sum() == sum(r["correct"] for r in kept)
    loaded = datasets.load_dataset("parquet", data_files=str(tmp_path / "ds" / "predictions.parquet"), split="train")
    assert loaded.num_rows == len(preds) and {"run_id", "uid", "probs", "correct"} <= set(loaded.column_names)


def test_a_record_that_fails_its_checks_is_left_out_and_said(tmp_path, capsys):
    study = tmp_path / "quickstart"
    shutil.copytree(STUDY / "records", study / "records")
    shutil.copytree(STUDY / "predictions", study / "predictions")
    victim = sorted((study / "records").glob("*.json"))[0]
    data = json.loads(victim.read_text())
    data["metrics"]["id"] = 0.999
    victim.write_text(json.dumps(data))
    assert main(["dataset", str(study), "--to", str(tmp_path / "ds")]) == 2
    assert data["run_id"] in capsys.readouterr().err
    assert data["run_id"] not in set(pd.read_parquet(tmp_path / "ds" / "records.parquet")["run_id"])
