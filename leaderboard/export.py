"""Every leaderboard table as data, beside its Markdown, one set of files per task and backbone:

- ``tables/<task>_<backbone>.csv``: a row per candidate (method, label, variant, target
  sparsity, rank, degenerate seeds) and, for every column of the Markdown's tables, its seeds,
  mean, sample sd and interval (``<key>:mean``, ``<key>:sd``, ``<key>:ci_low``, ``<key>:ci_high``)
  in the units the Markdown shows (percentages x100), the seeds it flags (``<key>:collapsed_seeds``,
  and for a timed column ``<key>:under_load_seeds``, whose speeds are never to be ranked);
- ``..._seeds.csv``: a row per candidate and seed, each column's value from that seed's record;
- ``....json``: both, and each column's label, unit, direction, table and interval kind.

A reader sorts, filters and plots these without parsing Markdown. The numbers are the cells of
``leaderboard.table``, the ones the Markdown and the site draw, in the same row order.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from bench.store.atomic import write_atomic
from leaderboard.candidate import SCALE, Candidate, slug
from leaderboard.sections import Section
from leaderboard.stats import MIN_SEEDS_FOR_BOOTSTRAP, MIN_SEEDS_FOR_INTERVAL
from leaderboard.table import cell, order, ranks


def _finite(values: list) -> list[float]:
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def _who(sec: Section, cand: Candidate) -> dict:
    return {"method": cand.name, "label": cand.label, "variant": cand.variant, "sparsity_target": cand.target,
            "reference": cand is sec.reference}


def aggregated(sec: Section) -> pd.DataFrame:
    """A row per candidate, in the table's order: what each cell shows, as numbers."""
    rank = ranks(sec)
    timed = {k for r in sec.records if r.timing for k in r.timing.get("metrics", ())}
    rows = []
    for cand in order(sec):
        row = _who(sec, cand) | {"rank": rank.get(id(cand), ""), "degenerate_seeds": " ".join(map(str, cand.degenerate))}
        for col in sec.columns:
            got = cell(cand, col)
            row |= {f"{col.key}:seeds": got.seeds, f"{col.key}:mean": got.mean, f"{col.key}:sd": got.sd,
                    f"{col.key}:ci_low": got.low, f"{col.key}:ci_high": got.high,
                    f"{col.key}:collapsed_seeds": " ".join(map(str, cand.collapsed(col.key, col.rows))) if got.seeds else ""}
            if col.key in timed:
                row[f"{col.key}:under_load_seeds"] = " ".join(map(str, cand.under_load(col.key)))
        rows.append(row)
    return pd.DataFrame(rows)


def per_seed(sec: Section) -> pd.DataFrame:
    """A row per candidate and seed: each column's number from that seed's record."""
    rows = []
    for cand in order(sec):
        for seed in cand.seeds:
            row = _who(sec, cand) | {"seed": seed}
            for col in sec.columns:
                rec = cand.record(seed, col.key)
                value = rec.metrics[col.key] if rec is not None else None
                row[col.key] = value * SCALE[col.kind][0] if _finite([value]) else None
            rows.append(row)
    return pd.DataFrame(rows)


def columns(sec: Section) -> list[dict]:
    return [{"key": c.key, "label": c.label, "unit": c.kind, "higher_is_better": c.higher_is_better, "table": c.table,
             "shown_x": SCALE[c.kind][0], "digits": SCALE[c.kind][1], "primary": c.primary} for c in sec.columns]


def write(secs: list[Section], folder: Path) -> list[Path]:
    """The tables of ``secs`` under ``folder``, each file written atomically; returns them."""
    out = []
    for sec in secs:
        if not sec.records:
            continue
        base = folder / slug(sec.task, sec.backbone)
        agg, seeds = aggregated(sec), per_seed(sec)
        meta = {"task": sec.task, "backbone": sec.backbone, "reference": sec.reference.name if sec.reference else None,
                "columns": columns(sec), "interval": f"95 %: Student t from {MIN_SEEDS_FOR_INTERVAL} seeds (intersected with "
                f"a percentage's range), BCa bootstrap from {MIN_SEEDS_FOR_BOOTSTRAP}; none below {MIN_SEEDS_FOR_INTERVAL}",
                "aggregated": json.loads(agg.to_json(orient="split", index=False)),
                "per_seed": json.loads(seeds.to_json(orient="split", index=False))}
        for path, text in ((base.with_suffix(".csv"), agg.to_csv(index=False, lineterminator="\n")),
                           (folder / f"{slug(sec.task, sec.backbone)}_seeds.csv", seeds.to_csv(index=False, lineterminator="\n")),
                           (base.with_suffix(".json"), json.dumps(meta, allow_nan=False) + "\n")):
            write_atomic(path, text)
            out.append(path)
    return out
