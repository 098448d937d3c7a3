"""Run records: one JSON file per run and its per-example predictions, written atomically, with
full provenance. Readable without torch: the leaderboard needs nothing else.

Schema (``SCHEMA_VERSION`` 4; ``bench migrate`` rewrites records of schemas 1 to 3), one object per
file under ``<out>/records/``:

- ``schema_version``, ``run_id``, ``created`` (UTC ISO time)
- ``method``, ``label`` (leaderboard row), ``params`` (the method's parameters, all of them: the
  one place they are stored), ``variant`` (those of them that tell this row apart from others of
  its label, as ``key=value``: ``Method.variant``)
- ``task``, ``backbone``, ``seed``, ``suite``
- ``sparsity``: ``target`` (null for dense methods) and the achieved report: ``sparsity``,
  ``prunable`` (the denominator), ``zeros``, ``per_matrix``, ``head_sparsity``,
  ``total_params``, ``nonzero_params``
- ``metrics``: flat ``name -> number``: ``id``, ``id_acc``, ``ood/<set>``, ``ood/<set>/<cell>``,
  ``pool/<pool>``, ``f_bias/<pool>``, ``<recipe>/aua`` ...; from the rows of every clean set,
  ``ece/<set>`` and, against the baseline's record, ``loyalty/<set>``, ``loyalty_prob/<set>``,
  ``flips/<set>``, ``flips_cw/<set>``, ``flips_wc/<set>`` and ``kl/<set>`` (``bench.metrics``)
- ``details``: suite details (set sizes, pools; ``collapse``: set name -> the task-to-set label
  map of a set whose labels are not the task's, which its confidence sums over); ``method_info``: the method's own numbers, with
  ``kept`` ([stage, step kept, steps run] per stage, in the order shown) where it kept the best
  checkpoint on dev
- ``predictions``: path of the per-example file (gzipped JSON lines, one row per evaluated
  example: set, uid, gold, pred, and per suite the class probabilities or the attack's outcome,
  queries and perturbed text), relative to the record's directory; ``predictions_sha256`` its
  checksum
- ``reference``: run_id of the full standard-CE record F_bias was computed against, or of the
  one ``--reference`` named (null for a suite that compares nothing, and for a candidate that
  trains nothing and names none); ``baseline``: the artifact key of that candidate, named by every
  record (an attack study's too): the leaderboard's reference is the candidate named most
- ``artifact``: the cached candidate's directory and lineage key
- ``degenerate``: null, or why the candidate did not learn its task (one class on > 95 % of the
  test set, or accuracy within 1 point of the majority class): flagged, never ranked
- ``one_class``: per evaluated set, why the candidate answers one class on more than 95 % of a
  balanced set (``bench.metrics.one_class``): that cell is flagged and never ranked
- ``timing``: how the timed ``eff/*`` metrics (its ``metrics``) were measured: ``repeats``,
  ``attempts``, ``kept``, each attempt's ``cpu_share`` and ``load_1min``, and ``under_load``:
  null, or why they were measured under load (``bench.model.efficiency``): those cells are
  flagged and never ranked; absent from records made before it was kept
- ``columns``: how each metric is shown on the leaderboard (``Column``), as its suite declared it
- ``provenance``: ``config`` (the run's fields, its method parameters being ``params``),
  ``versions``, ``git``, ``backbone`` (its files' and its loaded weights' fingerprints),
  ``plugins`` (method, suite and task: package, version, module and a hash of its code),
  ``data`` (source descriptions and sha256 per file), ``device``, ``wall_seconds``, ``memory``
  (peak MB), and ``migrated`` where ``bench migrate`` rewrote it
"""

from __future__ import annotations

import gc
import gzip
import hashlib
import json
import math
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.errors import BenchError
from bench.store.atomic import exclusive, write_atomic
from bench.store.validate import check_schema, predictions_file, strict_json

SCHEMA_VERSION = 4


@dataclass(frozen=True)
class Column:
    """How one metric is shown on the leaderboard, declared by whoever computed it (a suite, or
    the core's efficiency measurement), so that the leaderboard names no metric itself.

    ``kind``: ``percent`` (a share of examples, a fraction shown x100, its intervals kept in
    [0, 100]), ``points`` (a difference of two such shares, shown x100, kept in ±100), ``ratio``
    (a quotient of two non-negative quantities, such as a speed-up) or ``number`` (a count, a
    size, a time, a rate), both non-negative and shown as is, their intervals kept at or above
    0, ``signed`` (a ratio that may be negative, such as F_bias: unbounded), ``divergence`` (KL, nats, 3 decimals).
    ``table``: ``main`` (one row per candidate, every suite's main columns side by side) or the
    title of a details table below it. ``rows``: the prediction sets whose per-example
    ``correct`` outcomes a paired test against the reference compares (empty: no test).
    ``primary``: the suite's ranking metric. ``order``: columns of a table are shown by it, then
    as declared (the core's measurements come after the suites')."""

    key: str
    label: str
    kind: str = "percent"
    higher_is_better: bool | None = True
    table: str = "main"
    rows: tuple[str, ...] = ()
    primary: bool = False
    order: int = 0

    def to_dict(self) -> dict:
        return {**asdict(self), "rows": list(self.rows)}

    @classmethod
    def from_dict(cls, d: dict) -> Column:
        d = {**d, "rows": tuple(d.get("rows", ()))}
        if d["key"] == "id/gap" and d.get("kind") == "percent":  # declared so before ``points`` existed
            d["kind"] = "points"
        if d["key"].startswith("f_bias/") and d.get("kind") == "ratio":  # declared so before ``signed`` existed
            d["kind"] = "signed"
        return cls(**d)


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
    variant: list[str] = field(default_factory=list)
    baseline: str | None = None
    created: str = ""
    degenerate: str | None = None  # why the candidate did not learn the task (bench.metrics.degenerate)
    one_class: dict[str, str] | None = None  # set -> why it answers one class there
    timing: dict | None = None  # how the eff/* speeds were timed (bench.model.efficiency.timing); None before it was kept
    predictions_sha256: str = ""
    columns: list[dict] = field(default_factory=list)  # Column.to_dict() of every metric, as declared
    schema_version: int = SCHEMA_VERSION
    # the directory the record was read from (not stored): where its predictions path starts, so
    # that records of several studies can share one table
    where: Path | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> str:
        """Strict JSON: non-finite numbers (an undefined F_bias) are written as null."""
        data = {k: v for k, v in asdict(self).items() if k != "where"}
        return json.dumps(_finite(data), indent=1, sort_keys=True, allow_nan=False, default=str)  # paths as text


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
        text = path.read_text()
        data = strict_json(text)
        if not isinstance(data, dict):
            raise BenchError(f"{path}: not a run record (a JSON object is expected)")
        if data.get("schema_version") in (1, 2, 3):
            raise BenchError(f"{path}: record of schema {data['schema_version']}; rewrite its folder with: "
                             f"python -m bench migrate {path.parent.parent}")
        if data.get("schema_version") != SCHEMA_VERSION:
            raise BenchError(f"{path}: record schema {data.get('schema_version')} is not {SCHEMA_VERSION}")
        check_schema(data, path, Record, text)
        return Record(**data, where=path.parent)
    except (OSError, ValueError, TypeError) as e:
        raise BenchError(f"{path}: not a readable run record ({e})") from e


def read_records(records_dir: Path) -> tuple[list[Record], list[str]]:
    """The readable records of ``records_dir``, and one line for each file that is not one: a
    reader lists those and goes on with the rest (``bench leaderboard``, ``bench rescore``)."""
    if not records_dir.is_dir():
        raise BenchError(f"no records directory {records_dir}: run something first (python -m bench run ...)")
    records, bad = [], []
    for p in sorted(records_dir.glob("*.json")):
        try:
            records.append(load_record(p))
        except BenchError as e:
            bad.append(str(e))
    return records, bad


def load_records(records_dir: Path) -> list[Record]:
    """Every record of ``records_dir``; the first unreadable one is an error."""
    records, bad = read_records(records_dir)
    if bad:
        raise BenchError(bad[0])
    return records


STUDIES = "studies.toml"


def study_folders(out: Path) -> list[Path]:
    """The study folders ``out`` stands for: itself (none, said, while its claims are registered
    and nothing has run), or those its ``studies.toml`` names (``studies = ["../rmc", ...]``,
    relative to it; their shared table is its LEADERBOARD.md)."""
    path = out / STUDIES
    if not path.is_file():
        if (waiting := (out / "claims.toml").is_file() and not (out / "records").is_dir()):
            print(f"{out}: no records yet (its claims are registered; nothing has run)")
        return [] if waiting else [out]
    try:
        names = tomllib.loads(path.read_text()).get("studies")
    except tomllib.TOMLDecodeError as e:
        raise BenchError(f"{path}: needs studies = [\"../<study>\", ...], a list of folders (not TOML: {e})") from None
    if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
        raise BenchError(f"{path}: needs studies = [\"../<study>\", ...], a list of folders")
    missing = [n for n in names if not (out / n / "records").is_dir()]
    if missing:
        raise BenchError(f"{path}: no records/ folder in {', '.join(missing)}")
    return [out / n for n in names]


def record_path(out: Path, run_id: str) -> Path:
    return out / "records" / f"{run_id}.json"


def predictions_path(out: Path, run_id: str) -> Path:
    return out / "predictions" / f"{run_id}.jsonl.gz"


def finished(out: Path, run_id: str) -> bool:
    """Whether ``out`` holds the run's record and its predictions. A record without them (made
    before every record kept its per-example predictions) cannot be re-scored, so a run or sweep
    makes it again rather than skipping it."""
    return record_path(out, run_id).is_file() and predictions_path(out, run_id).is_file()


def write_predictions(out: Path, run_id: str, rows: list[dict]) -> tuple[str, str]:
    """The per-example rows as gzipped JSON lines under ``out/predictions`` (written atomically,
    byte-identical for identical rows); returns its path relative to the records and its sha256."""
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    data = gzip.compress(text.encode("utf-8"), mtime=0)
    write_atomic(predictions_path(out, run_id), data)
    return f"../predictions/{run_id}.jsonl.gz", hashlib.sha256(data).hexdigest()


def write_run(out: Path, run_id: str, rows: list[dict], record_of: Callable[[str, str], Record]) -> Path:
    """A run's predictions and its record as one unit: under the run's lock, the per-example file
    is written, then the record that names its checksum (``record_of(path, sha256)``). Two
    writers of one run (a sweep and a ``bench run`` of the same job, at other thread counts) take
    turns, so the last record always pairs with the last predictions, never with the other
    writer's. Each write is atomic, so a reader never sees half a file."""
    path = record_path(out, run_id)
    with exclusive(predictions_path(out, run_id)):
        predictions, checksum = write_predictions(out, run_id, rows)
        write_atomic(path, record_of(predictions, checksum).to_json())
    return path


def read_predictions(records_dir: Path, record: Record) -> tuple[Path, bytes]:
    """The record's per-example file and its bytes, checked against the record's checksum."""
    if not record.predictions:
        raise BenchError(f"record {record.run_id} keeps no per-example predictions")
    path = predictions_file(Path(records_dir), record)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BenchError(f"{path}: predictions of {record.run_id} not readable ({e.strerror})") from e
    if not record.predictions_sha256:  # without it, an edited file would re-score as if it were the run's
        raise BenchError(f"record {record.run_id} has no predictions checksum: its per-example file cannot be verified")
    if hashlib.sha256(data).hexdigest() != record.predictions_sha256:
        raise BenchError(f"{path}: checksum differs from the one in record {record.run_id} (edited or corrupt)")
    return path, data


@contextmanager
def gc_paused() -> Iterator[None]:
    """Cyclic garbage collection off while tens of thousands of rows are made: they form no
    cycles, and each collection the allocations trigger would walk every object already held
    (a table's outcomes of a hundred records), about a third of a leaderboard build's time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_predictions(path: Path, data: bytes, keep: Callable[[str], bool] | None = None) -> list[dict]:
    """The rows of a per-example file (gzipped or plain JSON lines); with ``keep``, only those
    whose JSON line it keeps (a reader that needs a few rows need not decode them all)."""
    try:
        text = gzip.decompress(data).decode("utf-8") if path.suffix == ".gz" else data.decode("utf-8")
        lines = [line for line in text.splitlines() if line.strip() and (keep is None or keep(line))]
        with gc_paused():
            rows = json.loads(f"[{','.join(lines)}]")  # one parse, about twice as fast as one per line
    except (OSError, ValueError, EOFError) as e:
        raise BenchError(f"{path}: not readable per-example predictions ({e})") from e
    if len(rows) != len(lines) or not all(isinstance(r, dict) for r in rows):
        raise BenchError(f"{path}: not readable per-example predictions (not one JSON object per line)")
    return rows


def load_predictions(records_dir: Path, record: Record) -> list[dict]:
    """The record's per-example rows, checked against its checksum."""
    return parse_predictions(*read_predictions(records_dir, record))
