"""Run records: one JSON file per run, written atomically, with full provenance; and the
published reference numbers a sweep spec carries. Readable without torch: the leaderboard
needs nothing else.

Schema (``SCHEMA_VERSION`` 1), one object per file under ``<out>/records/``:

- ``schema_version``, ``run_id``, ``created`` (UTC ISO time)
- ``method``, ``label`` (leaderboard row), ``params`` (resolved method parameters)
- ``task``, ``backbone``, ``seed``, ``suite``
- ``sparsity``: ``target`` (null for dense methods) and the achieved report: ``sparsity``,
  ``prunable`` (the denominator), ``zeros``, ``per_matrix``, ``head_sparsity``,
  ``total_params``, ``nonzero_params``
- ``metrics``: flat ``name -> number``: ``id``, ``id_acc``, ``ood/<set>``, ``ood/<set>/<cell>``,
  ``pool/<pool>``, ``f_bias/<pool>``
- ``details``: suite details (set sizes, pools); ``method_info``: the method's own numbers
- ``predictions``: path of the per-example JSONL file, relative to the record's directory
- ``reference``: run_id of the full standard-CE record F_bias was computed against
- ``artifact``: the cached candidate's directory and lineage key
- ``provenance``: ``config`` (the whole run spec), ``versions``, ``git``, ``data``
  (source descriptions and sha256 per file), ``device``, ``wall_seconds``
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.core.atomic import write_atomic
from bench.errors import BenchError

SCHEMA_VERSION = 1


@dataclass
class Record:
    run_id: str
    method: str
    label: str
    params: dict
    task: str
    backbone: str
    seed: int
    suite: str
    sparsity: dict
    metrics: dict[str, float]
    details: dict
    method_info: dict
    predictions: str
    reference: str | None
    artifact: dict
    provenance: dict
    created: str = ""
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> str:
        """Strict JSON: non-finite numbers (an undefined F_bias) are written as null."""
        return json.dumps(_finite(asdict(self)), indent=1, sort_keys=True, allow_nan=False)


def _finite(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def load_record(path: Path) -> Record:
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise BenchError(f"{path}: not a run record (a JSON object is expected)")
        if data.get("schema_version") != SCHEMA_VERSION:
            raise BenchError(f"{path}: record schema {data.get('schema_version')} is not {SCHEMA_VERSION}")
        return Record(**data)
    except (OSError, ValueError, TypeError) as e:
        raise BenchError(f"{path}: not a readable run record ({e})") from e


def load_records(records_dir: Path) -> list[Record]:
    if not records_dir.is_dir():
        raise BenchError(f"no records directory {records_dir}: run something first (python -m bench run ...)")
    return [load_record(p) for p in sorted(records_dir.glob("*.json"))]


@dataclass(frozen=True)
class Reference:
    """A published number set, shown in the leaderboard as a labelled row, never averaged."""

    source: str
    task: str
    suite: str
    backbone: str
    label: str
    metrics: dict[str, float]
    sparsity: float | None = None
    note: str = ""


def write_references(out: Path, name: str, references: list[Reference]) -> None:
    """A sweep spec's published numbers beside the records, for every later leaderboard."""
    if references:
        write_atomic(out / "references" / f"{name}.json", json.dumps([asdict(r) for r in references], indent=1))


def load_references(out: Path) -> list[Reference]:
    refs = []
    for p in sorted((out / "references").glob("*.json")):
        try:
            refs += [Reference(**r) for r in json.loads(p.read_text())]
        except (OSError, ValueError, TypeError) as e:
            raise BenchError(f"{p}: not a readable list of published references ({e})") from e
    return refs
