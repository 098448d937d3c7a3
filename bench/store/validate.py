"""What a run record read from disk must hold before anything uses it: records are untrusted
input (docs/records.md), so a record that breaks the record schema (``bench.store.schema``: a
field of the wrong type, a negative seed, text where a metric belongs), or whose predictions path
leaves its study folder, is refused with one line naming the file, the field and why."""

from __future__ import annotations

import functools
import hashlib
import json
import reprlib
from pathlib import Path

from bench.errors import BenchError
from bench.store.schema import record_schema

_PASSED: set[tuple[type, bytes]] = set()  # (record class, digest of a text that passed)
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 40  # attributes: keyword arguments need Python 3.12


@functools.cache
def _validator(record: type):
    """Built once a process: ``bench publish`` reads every record of every study. jsonschema is
    imported here, not at start, so a command that reads no record does not pay for it."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(record_schema(record))


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def strict_json(text: str):
    """``text`` parsed as strict JSON, as ``Record.to_json`` writes it: a NaN or Infinity in a
    record was put there by something else (a ValueError, as for any text that is not JSON)."""
    return json.loads(text, parse_constant=_no_constant)


def _field(error) -> str:
    """The failing value's place in the record (``provenance.wall_seconds``, ``columns[3].kind``);
    a key that is not plain printable text (it comes from the file) is quoted."""
    parts = [f"[{p}]" if isinstance(p, int) else (f".{p}" if p.isprintable() and p else f"[{p!r}]")
             for p in error.absolute_path]
    return "".join(parts).lstrip(".")


def check_schema(data: dict, path: Path, record: type, text: str) -> None:
    """``data`` (parsed from ``text``) holds the record schema of ``record`` (the ``Record``
    dataclass), or one line naming the first failing field and why is raised: ``a.json: seed:
    'x' is not of type 'integer'``. The value is shortened: it comes from the file and may be any
    size. A text that passed once in this process is not checked again (a check costs about 2 ms;
    ``bench publish`` reads each record for a study's table, its group's, the README and the site)."""
    digest = (record, hashlib.blake2b(text.encode(), digest_size=16).digest())
    if digest in _PASSED:
        return
    validator = _validator(record)
    if validator.is_valid(data):
        _PASSED.add(digest)
        return
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(data))
    why = error.message.replace(repr(error.instance), _SHORT.repr(error.instance), 1)[:200]
    where = _field(error)
    raise BenchError(f"{path}: {where + ': ' if where else ''}{why}")


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
