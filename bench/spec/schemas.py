"""The run record and the sweep spec as JSON Schema (draft 2020-12), for tools outside Python.

Both are derived from the code that reads them: the record's from ``Record``'s fields
(``bench.store.schema``, which every reader of a record checks it against; a field without a
schema fails an assertion), the sweep spec's run keys from ``RunSpec``'s
fields and their kinds. ``bench publish`` writes them to ``docs/schema/``; a test validates
every committed record against the record schema and every shipped spec against the sweep one.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from bench.spec.run import FIELDS
from bench.spec.sweep import REFERENCE_KEYS, SPEC_KEYS
from bench.store import schema as store_schema
from bench.store.atomic import write_atomic
from bench.store.records import Column, Record
from bench.store.schema import DRAFT, NUMBER, OBJECT, STRING


def record_schema() -> dict:
    """The record's schema, as every reader of a record checks it (``bench.store.schema``)."""
    return store_schema.record_schema(Record)


_KIND = {"text": {"type": "string", "minLength": 1}, "number": NUMBER, "count": {"type": "integer", "minimum": 0},
         "flag": {"type": "boolean"}, "table": {"type": "object", "additionalProperties": {
             "anyOf": [{"type": ["string", "number", "boolean"]}, {"type": "array", "items": {"type": ["string", "number", "boolean"]}}]}}}


def _run_keys() -> dict:
    out = {}
    for f in FIELDS:
        kind = _KIND[f.metadata["kind"]]
        if f.metadata["choices"]:
            kind = {"enum": list(f.metadata["choices"])}
        if f.metadata["bounds"]:  # [low, high): bench.spec.run.check_field's range
            low, high = f.metadata["bounds"]
            kind = kind | {"minimum": low} | ({"exclusiveMaximum": high} if high is not None else {})
        out[f.name] = ({"anyOf": [kind, {"type": "array", "items": kind, "minItems": 1}]} if f.metadata["axis"] else kind) | {
            "description": f.metadata["help"]}
    return out


def sweep_schema() -> dict:
    run = {"type": "object", "additionalProperties": False, "properties": _run_keys()}
    defaults = {"type": "object", "properties": _run_keys(), "additionalProperties": {
        "type": "object", "description": "[defaults.<task>]: keys for one task"}}
    return {"$schema": DRAFT, "$id": "sweep.schema.json", "title": "robust-compression bench sweep spec",
            "description": "A TOML sweep spec (docs/usage.md#sweeps), as the JSON its TOML parses to.", "type": "object",
            "additionalProperties": False, "required": ["group"], "properties": {
                "description": STRING, "defaults": defaults,
                "estimate": {"type": "object", "properties": {"source": STRING},
                             "additionalProperties": {"anyOf": [NUMBER, OBJECT]}},
                "group": {"type": "array", "minItems": 1, "items": run},
                "reference": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                                          "properties": {k: {} for k in REFERENCE_KEYS}}}},
            "propertyNames": {"enum": list(SPEC_KEYS)}}


def write(root: Path) -> list[Path]:
    out = []
    for name, schema in (("record", record_schema()), ("sweep", sweep_schema())):
        path = root / "docs" / "schema" / f"{name}.schema.json"
        write_atomic(path, json.dumps(schema, indent=1) + "\n")
        out.append(path)
    return out


assert set(store_schema.COLUMN["properties"]) == {f.name for f in dataclasses.fields(Column)}
