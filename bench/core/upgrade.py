"""``bench migrate``: every record of an older schema rewritten as the current one, step by
step, each file atomically. The run, its id, its metrics and its predictions are unchanged;
the record says it was migrated (``provenance.migrated``: from which schema, by which version,
when, and which metrics a step added).

Schema 1 to 2: ``bench.store.migrate`` (what the schema-1 leaderboard inferred, written in).

Schemas 2 and 3 to 4: the metrics that schema 4 computes from the per-example rows, computed
from the record's kept rows by the function a new run assembles its own with
(``bench.core.assemble``), and added (none replaced):

- ``details.collapse``: the task-to-set label map of the sets whose labels are not the task's.
  The only such built-in sets of schema 2 were HANS and its synthetic twin, entailment kept and
  neutral and contradiction merged (``COLLAPSE_V2``; a test checks it against their
  definitions); every other set's answer is its own class.
- ``ece/<set>`` (``bench.metrics.calibration``) for every clean set with probabilities.
- ``loyalty/<set>`` and ``loyalty_prob/<set>`` (schema 3, ``bench.metrics.loyalty``) and
  ``flips/<set>``, ``flips_cw/<set>``, ``flips_wc/<set>`` and ``kl/<set>`` (schema 4,
  ``bench.metrics.flips``) against the rows of the baseline's record in the same folder
  (``bench.core.rescore.baseline_record``); none when the folder does not hold it, or the
  candidate is its own baseline.
- The suite's metrics that its ``score`` now gives and the record lacks (the attacks' Words%).
- ``columns``: the record's own declarations, kept as they are (a ranking column stays the
  record's), and today's suite, rows and efficiency declarations for the metrics it lacked.

Clusters (any schema): where a record's evaluated set declares clusters in the data it read
(HANS's templates or subcases) and the study keeps none for that set and data file, they are
written beside the records (``bench.store.clusters``), from the data folder; the records are not
touched.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

from bench.core.assemble import assemble
from bench.core.rescore import baseline_record, data_spec
from bench.errors import BenchError
from bench.registry import SUITES, TASKS
from bench.store.atomic import write_atomic
from bench.store.migrate import upgrade as upgrade_v1
from bench.store.records import SCHEMA_VERSION, Column, Record, load_predictions

COLLAPSE_V2 = {"hans": [0, 1, 1], "hans_synth": [0, 1, 1]}


def _record(d: dict, folder: Path) -> Record:
    return Record(**(d | {"schema_version": SCHEMA_VERSION}), where=folder)


def upgrade_rows(records: dict[str, dict], folder: Path, version: str, others: list[dict] = ()) -> dict[str, dict]:
    """Schema-2 and -3 record objects (file name -> object) as schema 4 (module docstring);
    ``others``: the folder's other records, whose rows a record's loyalty may be measured against."""
    when = datetime.now(UTC).isoformat(timespec="seconds")
    every = [_record(d, folder) for d in [*records.values(), *others]]
    for d in records.values():
        sets = {*d["details"].get("labels", {}), *d["details"].get("sizes", {})}
        if collapse := {name: m for name, m in COLLAPSE_V2.items() if name in sets}:
            d["details"]["collapse"] = collapse
        rec = _record(d, folder)
        added: dict[str, float] = {}
        if rec.predictions and (folder / rec.predictions).is_file():  # else it stays not re-scorable
            rows = load_predictions(folder, rec)
            suite = SUITES.get(rec.suite)
            base = baseline_record(rec, every)
            usable = base is not None and base.predictions and (folder / base.predictions).is_file()
            got = assemble(suite, suite.score(rows, rec.details) or {}, rows, d["details"], kept=d["metrics"],
                           baseline=load_predictions(folder, base) if usable else None, declare=True)
            added = {k: None if math.isnan(v) else v for k, v in got.metrics.items() if k not in d["metrics"]}  # NaN: null
            d["metrics"] |= added
            own = {c.key: c for c in map(Column.from_dict, d.get("columns") or [])}  # a record's declarations stand
            keys = {c.key for c in got.columns}
            d["columns"] = [own.get(c.key, c).to_dict() for c in got.columns] + [c.to_dict() for k, c in own.items() if k not in keys]
        was = d["provenance"].get("migrated") or {"from_schema": d["schema_version"]}
        d["provenance"]["migrated"] = was | {"by": f"bench {version}", "on": when, "added_from_predictions":
                                             sorted({*was.get("added_from_predictions", []), *added})}
        d["schema_version"] = SCHEMA_VERSION
    return records


def migrate(out: Path, version: str) -> tuple[int, int]:
    """Rewrite the older records of ``out/records`` in place, each atomically; returns
    (rewritten, already current). A record of an unknown schema, or not JSON, stops it before
    anything is written; an interrupted migration is finished by running it again."""
    folder = Path(out) / "records"
    if not folder.is_dir():
        raise BenchError(f"no records directory {folder}")
    by_schema: dict[int, dict[str, dict]] = {1: {}, 2: {}, 3: {}, SCHEMA_VERSION: {}}
    for p in sorted(folder.glob("*.json")):
        try:
            d = json.loads(p.read_text())
            schema = d["schema_version"]
        except (OSError, ValueError, TypeError, KeyError) as e:
            raise BenchError(f"{p}: not a readable run record ({type(e).__name__}: {e}); nothing was rewritten") from None
        if schema not in by_schema:
            raise BenchError(f"{p}: record schema {schema} is unknown to this version; nothing was rewritten")
        by_schema[schema][p.name] = d
    old, current = by_schema[1] | by_schema[2] | by_schema[3], by_schema[SCHEMA_VERSION]
    upgrade_v1(by_schema[1], version, [*by_schema[2].values(), *by_schema[3].values(), *current.values()])
    upgrade_rows(old, folder, version, list(current.values()))
    for name, d in old.items():
        write_atomic(folder / name, json.dumps(d, indent=1, sort_keys=True, allow_nan=False))
    return len(old), len(current)


def add_clusters(out: Path, data_dir: str | None = None) -> tuple[list[Path], list[str]]:
    """The clusters files ``out``'s records need (module docstring), read from the data each
    record names (its task, example cap and suite parameters), each written only where its bytes
    change; returns the files and one line for each set whose data could not be read."""
    from bench.store import clusters
    from bench.store.records import read_records

    records, _ = read_records(Path(out) / "records")
    written, problems, seen = [], [], set()
    for rec in records:
        sums = {v for s in rec.provenance.get("data", {}).get("sources", []) for v in s.get("sha256", {}).values()}
        try:
            spec, key = data_spec(rec, data_dir)
        except BenchError as e:
            problems.append(f"{rec.run_id}: {e}")
            continue
        if key in seen:
            continue
        seen.add(key)
        try:
            task = TASKS.get(rec.task).load(spec.data_path).limited(spec.max_examples)
            judged = SUITES.get(rec.suite).ood_sets(task, spec.suite_params)
            for found in judged:
                if found.clusters and set(found.source.sha256.values()) <= sums:
                    path = clusters.write(Path(out), found.name, found.examples, found.clusters, found.source.sha256)
                    if path is not None and path not in written:
                        written.append(path)
        except BenchError as e:
            problems.append(f"{rec.task} ({rec.suite}): {e}")
    return written, problems
