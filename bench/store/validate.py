"""What a run record read from disk must hold before anything uses it: records are untrusted
input (docs/records.md), so a field of the wrong type, or a predictions path that leaves the
study folder, is refused with one line naming the file."""

from __future__ import annotations

from pathlib import Path

from bench.errors import BenchError

_KINDS = {"str": (str,), "int": (int,), "dict": (dict,), "list": (list,), "None": (type(None),)}


def _field_types(annotation: str) -> tuple[type, ...]:
    """The JSON types a record field may hold, from its annotation (``dict[str, float] | None``
    -> dict or None)."""
    return tuple(t for part in annotation.split("|") for t in _KINDS[part.strip().split("[")[0]])


def check_types(data: dict, path: Path, record: type) -> None:
    """A record read from disk holds what the fields of ``record`` (the ``Record`` dataclass)
    declare: text where text is due, a whole number for the seed, numbers (or null) for metrics. Records are untrusted input; a string
    where a number belongs would reach the tables and the site as it is."""
    for f in record.__dataclass_fields__.values():
        if f.name == "where" or f.name not in data:
            continue
        value, allowed = data[f.name], _field_types(f.type)
        if isinstance(value, bool) or not isinstance(value, allowed):
            raise BenchError(f"{path}: field '{f.name}' holds {type(value).__name__} {str(value)[:40]!r}, "
                             f"not {' or '.join(t.__name__ for t in allowed)}")
    if data.get("seed", 0) < 0:
        raise BenchError(f"{path}: field 'seed' is negative")
    bad = next((k for k, v in data.get("metrics", {}).items()
                if isinstance(v, bool) or not isinstance(v, int | float | type(None))), None)
    if bad is not None:
        raise BenchError(f"{path}: metric '{bad}' is not a number")


def predictions_file(records_dir: Path, record) -> Path:
    """Where the record's per-example file is: its path is relative to its records folder and
    must stay inside the study folder above it. A record is untrusted; one pointing elsewhere
    (``../../../outside.jsonl`` with that file's checksum) would re-score a file that is not
    the study's."""
    study = records_dir.resolve().parent
    path = (records_dir / record.predictions).resolve()
    if not path.is_relative_to(study):
        raise BenchError(f"record {record.run_id}: its predictions path {record.predictions!r} leads outside its "
                         f"study folder {study}; refused")
    return path
