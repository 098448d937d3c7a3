"""The run record as JSON Schema (draft 2020-12): what every reader checks a record against when
it reads one (``bench.store.validate``), and what ``bench publish`` writes to
``docs/schema/record.schema.json`` for tools outside Python (``bench.spec.schemas``; a test keeps
that file equal to this). It is built from code in the package, not read from ``docs/``, so an
installed bench checks records as a checkout does.

Records are untrusted input: every number a table or the site shows is typed here (a seed, a
metric, a wall time, a parameter count), so text where a number belongs is refused when read.
Text fields may hold any text: escaping it is the renderer's job."""

from __future__ import annotations

import dataclasses

DRAFT = "https://json-schema.org/draft/2020-12/schema"
STRING, NUMBER, INT, OBJECT = {"type": "string"}, {"type": "number"}, {"type": "integer"}, {"type": "object"}
COUNT, SHARE, AMOUNT = {"type": "integer", "minimum": 0}, {"type": "number", "minimum": 0, "maximum": 1}, {"type": "number", "minimum": 0}


def nullable(schema: dict) -> dict:
    """``schema`` or null, as a list of types rather than ``anyOf``: the same records pass, a
    reader's check is faster, and a refusal names both types."""
    return {**schema, "type": [schema["type"], "null"]}


COLUMN = {"type": "object", "required": ["key", "label"], "additionalProperties": False, "properties": {
    "key": STRING, "label": STRING, "kind": {"enum": ["percent", "points", "ratio", "signed", "number", "divergence"]},
    "higher_is_better": nullable({"type": "boolean"}), "table": STRING, "rows": {"type": "array", "items": STRING},
    "primary": {"type": "boolean"}, "order": NUMBER}}

_PROVENANCE = {
    "config": {"type": "object", "not": {"required": ["params"]}, "description": "the run's fields; its params are `params`"},
    "versions": {"type": "object", "additionalProperties": nullable(STRING)},
    "git": {"type": "object", "properties": {"commit": STRING, "dirty": {"type": "boolean"}}},
    "data": OBJECT,
    "device": {"type": "object", "properties": {
        "name": STRING, "type": STRING, "platform": STRING, "torch_threads": {"type": "integer", "minimum": 1},
        "cores": nullable({"type": "integer", "minimum": 1}), "tf32": {"type": "boolean"}}},
    "backbone": OBJECT, "plugins": OBJECT,
    "wall_seconds": AMOUNT,
    "memory": {"type": "object", "additionalProperties": AMOUNT, "description": "peak MB"},
    "migrated": OBJECT}

RECORD_PROPERTIES = {
    "run_id": {"type": "string", "pattern": "^[^/\\\\]+$"},
    "method": STRING, "label": STRING, "task": STRING, "backbone": STRING, "suite": STRING,
    "seed": COUNT,
    "params": {**OBJECT, "description": "the method's parameters, all of them"},
    "variant": {"type": "array", "items": STRING, "description": "key=value of the parameters that tell the row apart"},
    "baseline": nullable({**STRING, "description": "artifact key of the candidate this run is compared with"}),
    "sparsity": {"type": "object", "required": ["target"], "properties": {
        "target": nullable({"type": "number", "minimum": 0, "exclusiveMaximum": 1}), "sparsity": SHARE,
        "head_sparsity": SHARE, "prunable": COUNT, "zeros": COUNT, "total_params": COUNT, "nonzero_params": COUNT,
        "per_matrix": {"type": "object", "additionalProperties": SHARE}}},
    "metrics": {"type": "object", "additionalProperties": nullable(NUMBER), "description": "null: undefined (NaN)"},
    "details": {"type": "object", "properties": {"id_metric": STRING, "sizes": {"type": "object", "additionalProperties": COUNT}}},
    "method_info": {"type": "object", "properties": {"kept": {"type": "array", "items": {
        "type": "array", "prefixItems": [STRING, INT, INT], "minItems": 3, "maxItems": 3}}}},
    "predictions": STRING,
    "predictions_sha256": {"type": "string", "pattern": "^([0-9a-f]{64})?$"},
    "reference": nullable(STRING),
    "artifact": {"type": "object", "required": ["key"], "properties": {"key": STRING, "dir": STRING}},
    "provenance": {"type": "object", "required": ["config", "versions", "git", "data", "device"], "properties": _PROVENANCE},
    "created": STRING,
    "degenerate": nullable(STRING),
    "one_class": nullable({"type": "object", "additionalProperties": STRING}),
    "timing": nullable({
        "type": "object", "required": ["metrics", "repeats", "attempts", "under_load"], "additionalProperties": False,
        "description": "how the timed eff/* metrics were measured; absent from records made before it was kept",
        "properties": {
            "metrics": {"type": "array", "items": STRING}, "repeats": {"type": "integer", "minimum": 1},
            "attempts": {"type": "integer", "minimum": 1}, "kept": {"type": "integer", "minimum": 1},
            "busy_threads": {"type": "integer", "minimum": 1}, "contended_below": NUMBER,
            "cpu_share": {"type": "array", "items": NUMBER},
            "load_1min": {"type": "array", "items": {"type": "array", "items": nullable(NUMBER)}},
            "under_load": nullable({**STRING, "description": "why the kept attempt was contended: never ranked"})}}),
    "columns": {"type": "array", "items": COLUMN},
}


def record_schema(record: type) -> dict:
    """The schema of ``record`` (the ``Record`` dataclass, passed in: ``bench.store.records``
    reads through this module): its fields without a default are required, its
    ``schema_version`` the only one accepted."""
    fields = [f for f in dataclasses.fields(record) if f.name != "where"]
    assert {f.name for f in fields} == {*RECORD_PROPERTIES, "schema_version"}, "a Record field has no schema"
    required = [f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    version = record.__dataclass_fields__["schema_version"].default
    return {"$schema": DRAFT, "$id": "record.schema.json", "title": "robust-compression bench run record",
            "description": "One run: a method's candidate judged by a suite (docs/records.md).", "type": "object",
            "required": required, "additionalProperties": False,
            "properties": {"schema_version": {"const": version}, **RECORD_PROPERTIES}}
