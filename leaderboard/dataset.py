"""``bench dataset``: the records and their per-example predictions as a Parquet dataset, for
pandas, DuckDB or ``datasets.load_dataset("parquet", ...)``:

- ``records.parquet``: a row per record that passes the leaderboard's checks: its study (the
  folder), run id, method, label, variant, task, backbone, suite, seed, target and achieved
  sparsity, reference and baseline, degenerate and ``under_load`` (why its speeds were timed
  under load, or null), a ``metric/<key>`` column per metric, and the record's
  parameters, method info and provenance as JSON text;
- ``predictions.parquet``: a row per evaluated example of those records: run id, set, example
  id, gold and predicted label, ``correct``, the class probabilities and group where kept, and
  every other field of the suite's row (an attack's outcome, queries, perturbed text) as JSON.

Written atomically; built on demand (a large study's predictions run to millions of rows, so
the repository keeps the per-run files, not this copy).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.api import Command
from bench.errors import BenchError
from bench.registry import COMMANDS
from bench.store.atomic import write_atomic
from bench.store.records import Record, load_predictions, study_folders

COMMON = ("set", "uid", "gold", "pred", "correct", "probs", "group")


def _record_row(study: str, r: Record) -> dict:
    return {"study": study, "run_id": r.run_id, "method": r.method, "label": r.label, "variant": ", ".join(r.variant),
            "task": r.task, "backbone": r.backbone, "suite": r.suite, "seed": r.seed,
            "sparsity_target": r.sparsity.get("target"), "sparsity": r.sparsity.get("sparsity"),
            "reference": r.reference, "baseline": r.baseline, "degenerate": r.degenerate,
            "under_load": (r.timing or {}).get("under_load"),
            **{f"metric/{k}": v for k, v in sorted(r.metrics.items())},
            "params_json": json.dumps(r.params, sort_keys=True, default=str),
            "method_info_json": json.dumps(r.method_info, sort_keys=True, default=str),
            "provenance_json": json.dumps(r.provenance, sort_keys=True, default=str)}


def _prediction_rows(r: Record) -> list[dict]:
    out = []
    for row in load_predictions(r.where, r):
        extra = {k: v for k, v in row.items() if k not in COMMON}
        out.append({"run_id": r.run_id, "set": row.get("set"), "uid": str(row.get("uid")), "gold": row.get("gold"),
                    "pred": row.get("pred"), "correct": row.get("correct"), "probs": row.get("probs"),
                    "group": row.get("group") or None, "extra_json": json.dumps(extra, sort_keys=True) if extra else None})
    return out


def build(outs: list[Path], to: Path) -> tuple[int, int, list[str]]:
    """Write the dataset of the studies ``outs`` stand for into ``to``; returns the numbers of
    records and prediction rows, and one line for each record left out."""
    import pandas as pd

    from leaderboard.evidence import check

    folders = list({s.resolve(): s for o in outs for s in study_folders(o)}.values())
    found = check([f / "records" for f in folders])
    study = {f.resolve() / "records": f.name for f in folders}
    records = [_record_row(study[r.where.resolve()], r) for r in found.records]
    predictions = [row for r in found.records for row in _prediction_rows(r)]
    to.mkdir(parents=True, exist_ok=True)
    for name, rows in (("records", records), ("predictions", predictions)):
        data = pd.DataFrame(rows).to_parquet(index=False)  # bytes: written atomically like every other output
        write_atomic(to / f"{name}.parquet", data)
    return len(records), len(predictions), found.rejected


@COMMANDS.register("dataset")
class Dataset(Command):
    help = "write records and per-example predictions as a Parquet dataset (records.parquet, predictions.parquet)"

    def arguments(self, p) -> None:
        p.add_argument("out", nargs="+", help="study folders whose records/ to include (a studies.toml folder: its studies)")
        p.add_argument("--to", required=True, help="the folder to write the two Parquet files into")

    def run(self, a) -> int:
        n, rows, left_out = build([Path(o) for o in a.out], Path(a.to))
        for line in left_out:
            print(f"bench: error: left out of the dataset: {line}", file=sys.stderr)
        print(f"{n} records and {rows} prediction rows written to {a.to}", file=sys.stderr)
        if left_out:
            raise BenchError(f"{len(left_out)} records left out of the dataset (listed above)")
        return 0
