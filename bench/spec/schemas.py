"""The run record and the sweep spec as JSON Schema (draft 2020-12), for tools outside Python.

Both are derived from the code that reads them: the record's properties from ``Record``'s
fields (a test fails when a field has no schema), the sweep spec's run keys from ``RunSpec``'s
fields and their kinds. ``bench publish`` writes them to ``docs/schema/``; a test validates
every committed record against the record schema and every shipped spec against the sweep one.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from bench.spec.run import FIELDS
from bench.spec.sweep import REFERENCE_KEYS, SPEC_KEYS
from bench.store.atomic import write_atomic
from bench.store.records import SCHEMA_VERSION, Column, Record

DRAFT = "https://json-schema.org/draft/2020-12/schema"
STRING, NUMBER, INT, OBJECT = {"type": "string"}, {"type": "number"}, {"type": "integer"}, {"type": "object"}
SHARE = {"type": "number", "minimum": 0, "maximum": 1}


def _nullable(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


_COLUMN = {"type": "object", "required": ["key", "label"], "additionalProperties": False, "properties": {
    "key": STRING, "label": STRING, "kind": {"enum": ["percent", "points", "ratio", "signed", "number"]},
    "higher_is_better": _nullable({"type": "boolean"}), "table": STRING, "rows": {"type": "array", "items": STRING},
    "primary": {"type": "boolean"}, "order": NUMBER}}

RECORD_PROPERTIES = {
    "schema_version": {"const": SCHEMA_VERSION},
    "run_id": {"type": "string", "pattern": "^[^/\\\\]+$"},
    "method": STRING, "label": STRING, "task": STRING, "backbone": STRING, "suite": STRING,
    "seed": {"type": "integer", "minimum": 0},
    "params": {**OBJECT, "description": "the method's parameters, all of them"},
    "variant": {"type": "array", "items": STRING, "description": "key=value of the parameters that tell the row apart"},
    "baseline": _nullable({**STRING, "description": "artifact key of the candidate this run is compared with"}),
    "sparsity": {"type": "object", "required": ["target"], "properties": {
        "target": _nullable({"type": "number", "minimum": 0, "exclusiveMaximum": 1}), "sparsity": SHARE,
        "head_sparsity": SHARE, "prunable": INT, "zeros": INT, "total_params": INT, "nonzero_params": INT,
        "per_matrix": {"type": "object", "additionalProperties": SHARE}}},
    "metrics": {"type": "object", "additionalProperties": _nullable(NUMBER), "description": "null: undefined (NaN)"},
    "details": OBJECT,
    "method_info": {"type": "object", "properties": {"kept": {"type": "array", "items": {
        "type": "array", "prefixItems": [STRING, INT, INT], "minItems": 3, "maxItems": 3}}}},
    "predictions": STRING,
    "predictions_sha256": {"type": "string", "pattern": "^([0-9a-f]{64})?$"},
    "reference": _nullable(STRING),
    "artifact": {"type": "object", "required": ["key"], "properties": {"key": STRING, "dir": STRING}},
    "provenance": {"type": "object", "required": ["config", "versions", "git", "data", "device"], "properties": {
        "config": {"type": "object", "not": {"required": ["params"]}, "description": "the run's fields; its params are `params`"},
        "versions": {"type": "object", "additionalProperties": _nullable(STRING)},
        "git": OBJECT, "data": OBJECT, "device": OBJECT, "backbone": OBJECT, "plugins": OBJECT,
        "wall_seconds": NUMBER, "memory": OBJECT, "migrated": OBJECT}},
    "created": STRING,
    "degenerate": _nullable(STRING),
    "one_class": _nullable({"type": "object", "additionalProperties": STRING}),
    "timing": _nullable({
        "type": "object", "required": ["metrics", "repeats", "attempts", "under_load"], "additionalProperties": False,
        "description": "how the timed eff/* metrics were measured; absent from records made before it was kept",
        "properties": {
            "metrics": {"type": "array", "items": STRING}, "repeats": {"type": "integer", "minimum": 1},
            "attempts": {"type": "integer", "minimum": 1}, "kept": {"type": "integer", "minimum": 1},
            "busy_threads": {"type": "integer", "minimum": 1}, "contended_below": NUMBER,
            "cpu_share": {"type": "array", "items": NUMBER},
            "load_1min": {"type": "array", "items": {"type": "array", "items": _nullable(NUMBER)}},
            "under_load": _nullable({**STRING, "description": "why the kept attempt was contended: never ranked"})}}),
    "columns": {"type": "array", "items": _COLUMN},
}


def record_schema() -> dict:
    required = [f.name for f in dataclasses.fields(Record) if f.name != "where"
                and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    return {"$schema": DRAFT, "$id": "record.schema.json", "title": "robust-compression bench run record",
            "description": "One run: a method's candidate judged by a suite (docs/records.md).", "type": "object",
            "required": required, "additionalProperties": False, "properties": RECORD_PROPERTIES}


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


assert set(RECORD_PROPERTIES) == {f.name for f in dataclasses.fields(Record)} - {"where"}, "a Record field has no schema"
assert set(_COLUMN["properties"]) == {f.name for f in dataclasses.fields(Column)}
