"""Records are untrusted input: a field of the wrong type is refused when read, a predictions path
that leaves its study folder is refused, and text from a record reaches the site escaped."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from bench.cli import main
from bench.errors import BenchError
from bench.store.records import load_record, read_predictions

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "results" / "quickstart"
MARKUP = '<img src=x onerror="alert(1)">'


@pytest.fixture
def study(tmp_path):
    """A one-record copy of the quickstart study: (folder, record path, its JSON)."""
    path = sorted((SOURCE / "records").glob("*.json"))[0]
    data = json.loads(path.read_text())
    out = tmp_path / "study"
    (out / "records").mkdir(parents=True)
    (out / "predictions").mkdir()
    shutil.copy(SOURCE / "records" / data["predictions"], out / "predictions")
    target = out / "records" / path.name
    target.write_text(json.dumps(data))
    return out, target, data


@pytest.mark.parametrize("field,value,said", [
    ("seed", MARKUP, "field 'seed' holds str"),
    ("seed", True, "field 'seed' holds bool"),
    ("seed", -1, "field 'seed' is negative"),
    ("run_id", 7, "field 'run_id' holds int"),
    ("metrics", {"id": "0.9"}, "metric 'id' is not a number"),
    ("provenance", [], "field 'provenance' holds list"),
])
def test_a_field_of_the_wrong_type_is_refused_when_read(study, field, value, said, capsys):
    out, target, data = study
    target.write_text(json.dumps(data | {field: value}))
    with pytest.raises(BenchError, match=said):
        load_record(target)
    capsys.readouterr()
    assert main(["leaderboard", "--out", str(out)]) == 2  # left out, named in one line
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_a_predictions_path_outside_the_study_is_refused(study, tmp_path):
    out, target, data = study
    outside = tmp_path / "outside.jsonl.gz"
    shutil.copy(out / "predictions" / Path(data["predictions"]).name, outside)
    evil = data | {"predictions": "../../outside.jsonl.gz",
                   "predictions_sha256": hashlib.sha256(outside.read_bytes()).hexdigest()}
    target.write_text(json.dumps(evil))
    record = load_record(target)
    with pytest.raises(BenchError, match="leads outside its study folder"):
        read_predictions(target.parent, record)
    assert main(["rescore", str(out)]) == 2  # not "exact"


def test_text_from_a_record_reaches_the_site_escaped(study, tmp_path):
    out, target, data = study
    data["provenance"]["wall_seconds"] = MARKUP
    data["provenance"].setdefault("device", {})["name"] = MARKUP
    target.write_text(json.dumps(data))
    site = tmp_path / "site"
    assert main(["site", str(out), "--to", str(site)]) == 0
    pages = "".join(p.read_text() for p in site.rglob("*.html"))
    assert pages and "<img src=x" not in pages and "&lt;img src=x" in pages
