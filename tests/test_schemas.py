"""The record and sweep-spec formats as JSON Schema: published, in step with the code, and
holding for every committed record and every shipped spec."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema
import pytest

from bench.spec.schemas import record_schema, sweep_schema

ROOT = Path(__file__).resolve().parents[1]
RECORDS = sorted(ROOT.glob("results/*/records/*.json"))
SPECS = sorted(p for p in (ROOT / "sweeps").glob("*.toml") if p.stem != "conformance")


@pytest.mark.parametrize("name,schema", [("record", record_schema), ("sweep", sweep_schema)])
def test_the_published_schemas_are_what_the_code_gives(name, schema):
    published = json.loads((ROOT / "docs" / "schema" / f"{name}.schema.json").read_text())
    assert published == schema(), f"docs/schema/{name}.schema.json is out of date: bench publish"
    jsonschema.Draft202012Validator.check_schema(published)


def test_every_committed_record_holds_the_record_schema_and_a_broken_one_does_not():
    assert len(RECORDS) > 100
    check = jsonschema.Draft202012Validator(record_schema())
    for path in RECORDS:
        errors = list(check.iter_errors(json.loads(path.read_text())))
        assert not errors, f"{path.name}: {errors[0].message}"
    good = json.loads(RECORDS[0].read_text())
    for broken in ({**good, "metrics": {"id": "98.1"}}, {**good, "provenance": {**good["provenance"], "config": {
            **good["provenance"]["config"], "params": {}}}}, {**good, "schema_version": 1}, {**good, "surprise": 1},
            {**good, "sparsity": {**good["sparsity"], "target": 1.0}}):
        assert list(check.iter_errors(broken))


def test_every_shipped_spec_holds_the_sweep_schema_and_a_misspelt_one_does_not():
    check = jsonschema.Draft202012Validator(sweep_schema())
    for path in SPECS:
        errors = list(check.iter_errors(tomllib.loads(path.read_text())))
        assert not errors, f"{path.name}: {errors[0].message}"
    spec = tomllib.loads((ROOT / "sweeps" / "smoke.toml").read_text())
    assert list(check.iter_errors({**spec, "groups": spec["group"]}))
    assert list(check.iter_errors({**spec, "group": [{**spec["group"][0], "seeds": [0, 1]}]}))
    assert list(check.iter_errors({**spec, "group": [{**spec["group"][0], "device": "tpu"}]}))
