"""Records are untrusted input: a record that breaks the record schema (a field of the wrong type
included) is refused when read, a predictions path that leaves its study folder is refused, and
text from a record reaches the site escaped."""

from __future__ import annotations

import hashlib
import json
import re
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
    ("seed", MARKUP, f"seed: {MARKUP!r} is not of type 'integer'"),
    ("seed", True, "seed: True is not of type 'integer'"),
    ("seed", -1, "seed: -1 is less than the minimum of 0"),
    ("run_id", 7, "run_id: 7 is not of type 'string'"),
    ("metrics", {"id": "0.9"}, "metrics.id: '0.9' is not of type 'number', 'null'"),
    ("provenance", [], "provenance: [] is not of type 'object'"),
    ("surprise", 1, "Additional properties are not allowed ('surprise' was unexpected)"),
])
def test_a_field_of_the_wrong_type_is_refused_when_read(study, field, value, said, capsys):
    out, target, data = study
    target.write_text(json.dumps(data | {field: value}))
    with pytest.raises(BenchError, match=re.escape(f"{target}: {said}")):
        load_record(target)
    capsys.readouterr()
    assert main(["leaderboard", "--out", str(out)]) == 2  # left out, named in one line
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def _edited(data: dict, dotted: str, value) -> dict:
    """A copy of ``data`` with the field at ``dotted`` (``provenance.wall_seconds``) set to ``value``."""
    data = json.loads(json.dumps(data))
    *parents, last = dotted.split(".")
    inner = data
    for key in parents:
        inner = inner[key]
    inner[last] = value
    return data


@pytest.mark.parametrize("field,value,why", [
    ("seed", '<img src=x onerror=alert(1)>', "is not of type 'integer'"),
    ("provenance.wall_seconds", MARKUP, "is not of type 'number'"),
    ("sparsity.total_params", "22000000", "is not of type 'integer'"),
])
def test_a_record_breaking_the_schema_is_left_out_of_the_leaderboard_and_rescore_in_one_line(study, field, value, why, capsys):
    out, target, data = study
    target.write_text(json.dumps(_edited(data, field, value)))
    capsys.readouterr()
    for command in (["leaderboard", "--out", str(out), "--output", str(out / "t.md")], ["rescore", str(out)]):
        assert main(command) == 2, command
        said = capsys.readouterr()
        lines = [ln for ln in (said.out + said.err).splitlines() if target.name in ln]
        assert len(lines) == 1 and f"{field}: " in lines[0] and why in lines[0], (command, lines)
        assert "Traceback" not in said.err


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
    data["created"] = MARKUP  # any text is a valid text field: escaping it is the site's job
    data["provenance"].setdefault("device", {})["name"] = MARKUP
    target.write_text(json.dumps(data))
    site = tmp_path / "site"
    assert main(["site", str(out), "--to", str(site)]) == 0
    pages = "".join(p.read_text() for p in site.rglob("*.html"))
    assert pages and "<img src=x" not in pages and "&lt;img src=x" in pages
