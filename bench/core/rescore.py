"""``bench rescore``: every metric of every record recomputed from its per-example predictions
and the evaluation data, so that nobody has to trust a committed number.

For each record: the predictions file is read and checked against the record's sha256; each
row's gold label is checked against the example of the same id in the data the run used (its
task, example cap and suite parameters, from the record's provenance); the suite recomputes its
metrics from the rows (``Suite.score``, the formula ``evaluate`` itself uses), F_bias from the
re-scored reference record, the calibration error of every clean set from its rows, the
loyalty from the rows of the baseline's record (the record, by the same suite and parameters, of
the candidate the record names as its ``baseline``), and the degenerate flag from the test rows
and the one-class flags from every set's rows (where the record has them). Any difference is a
mismatch. Timings (``eff/``) are measurements, not functions of the predictions, and are not
re-scored; records made before predictions were kept are listed as not re-scorable, and a file
that is not a readable record is listed as unreadable while the others are re-scored.

``from_rows`` and ``differences`` are the part that needs no data and no torch: the leaderboard
checks every record it shows with them.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.core.assemble import assemble
from bench.errors import BenchError
from bench.registry import SUITES, TASKS
from bench.store.records import Record, gc_paused, load_predictions, read_records


@dataclass
class Rescored:
    run_id: str
    status: str  # "exact", "mismatch", "not re-scorable" or "unreadable"
    problems: list[str] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)  # the recomputed metrics
    checked: int = 0  # metrics recomputed and compared
    gold: str = "checked"  # or why the gold labels could not be checked


def _undefined(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))  # a record writes NaN as null


def _same(a, b) -> bool:
    if _undefined(a) or _undefined(b):
        return _undefined(a) and _undefined(b)
    return math.isclose(a, b, rel_tol=0.0, abs_tol=1e-9)


Sets = dict[str, list]  # set name -> its examples, as the suite evaluates them
Labels = dict[str, dict[str, int]]  # set name -> example id -> gold label


def data_spec(record: Record, data_dir: str | None):
    """The run's resolved spec as far as its data goes (task, files, example cap, suite and its
    parameters; no loader takes the run's seed), and a key for what the loaders read."""
    from bench.spec.run import FIELD_NAMES, digest, resolve  # imports torch; re-scoring rows does not

    conf = record.provenance.get("config", {})
    given = {k: conf[k] for k in FIELD_NAMES if k in conf and k not in ("method", "suite")}
    spec = resolve(record.method, record.suite, **given | {"data_dir": data_dir or conf.get("data_dir")},
                   check_backbone=False, default_sparsity=False)
    return spec, digest([spec.task, str(spec.data_path), spec.max_examples, spec.suite, repr(spec.suite_params)])


def _sets(record: Record, data_dir: str | None, cache: dict) -> tuple[Sets, Labels] | str:
    """The examples of each evaluated set and their gold labels, or why the data could not be
    read. The records of a study share their data, so the sets are built once for each distinct
    input of the loaders (task, files, example cap, suite and its parameters; no loader takes
    the run's seed), not once per record."""
    try:
        spec, key = data_spec(record, data_dir)
    except BenchError as e:
        return f"unchecked ({e})"
    if key not in cache:
        try:
            task = TASKS.get(record.task).load(spec.data_path).limited(spec.max_examples)
            sets = SUITES.get(record.suite).sets(task, spec.suite_params)
        except BenchError as e:
            sets = f"unchecked ({e})"
        if not sets:
            sets = f"unchecked (suite '{record.suite}' does not name its evaluated examples)"
        cache[key] = sets if isinstance(sets, str) else (sets, {n: {e.uid: e.label for e in exs} for n, exs in sets.items()})
    return cache[key]


def _gold(record: Record, rows: list[dict], data_dir: str | None, cache: dict) -> tuple[list[str], str]:
    """Rows whose id or gold label is not the data's, or why the data could not be read."""
    found = _sets(record, data_dir, cache)
    if isinstance(found, str):
        return [], found
    sets, labels = found
    problems = []
    for r in rows:
        known = labels.get(r["set"], {})
        if r["uid"] not in known:
            problems.append(f"row {r['set']}/{r['uid']} is not an example of the data")
        elif known[r["uid"]] != r["gold"]:
            problems.append(f"row {r['set']}/{r['uid']} has gold {r['gold']}, the data {known[r['uid']]}")
    counts = Counter(r["set"] for r in rows)
    for name, exs in sets.items():
        n = counts[name]
        if n and n != len(exs):
            problems.append(f"set {name}: {n} rows for {len(exs)} examples")
    return problems[:5] + ([f"... and {len(problems) - 5} more"] if len(problems) > 5 else []), "checked"


@dataclass(frozen=True)
class FromRows:
    """What a record's per-example rows give (``bench.core.assemble``, as a run assembles them):
    its suite's metrics (``Suite.score``, the formula ``evaluate`` itself uses) and calibration,
    the degenerate flag of its test rows, the one-class flags, and, given its baseline's rows,
    its loyalty to them."""

    metrics: dict[str, float]
    degenerate: str | None  # None also when there are no test rows
    one_class: dict[str, str]
    has_test: bool
    loyalty: dict[str, float] = field(default_factory=dict)


def from_rows(record: Record, rows: list[dict], baseline: list[dict] | None = None) -> FromRows | str:
    """The numbers ``rows`` (and ``baseline``, its baseline's rows) give for ``record``, or why
    they cannot be recomputed here (its suite is not installed, or cannot re-score)."""
    try:
        suite = SUITES.get(record.suite)
        metrics = suite.score(rows, record.details)
    except BenchError as e:
        return str(e)
    if metrics is None:
        return f"suite '{record.suite}' cannot re-score this record's rows"
    got = assemble(suite, metrics, rows, record.details, baseline=baseline)
    return FromRows(got.own, got.degenerate, got.one_class, got.has_test,
                    {k: v for k, v in got.metrics.items() if k not in got.own})


SCORED: dict[tuple, FromRows | str] = {}  # scoring_key(record) -> what its rows give (the oldest dropped first)
SCORED_MAX = 1024


def scoring_key(record: Record) -> tuple:
    """What decides what a record's rows give: the rows (their checksum), the suite, its details."""
    return record.predictions_sha256, record.suite, json.dumps(record.details, sort_keys=True, default=str)


def scored(record: Record, rows: list[dict], baseline: list[dict] | None = None) -> FromRows | str:
    """``from_rows``, once per scoring key in a process: one run is re-scored by ``bench rescore``
    and by every table that shows it (``leaderboard.evidence.check``). ``rows`` must be the
    rows of the record's checksum (``bench.store.records.read_predictions`` checks it). With
    ``baseline`` (rows the key does not name) it is computed again, and kept without the loyalty."""
    key = scoring_key(record)
    if baseline is None and key in SCORED:
        return SCORED[key]
    got = from_rows(record, rows, baseline)
    if key not in SCORED:
        SCORED[key] = replace(got, loyalty={}) if isinstance(got, FromRows) else got
        if len(SCORED) > SCORED_MAX:
            SCORED.pop(next(iter(SCORED)))
    return got


def differences(record: Record, got: FromRows) -> list[str]:
    """Where the record's numbers are not what its rows give (timings aside: not in ``got``)."""
    problems = []
    for key, value in got.metrics.items():
        if key not in record.metrics:
            problems.append(f"{key}: recomputed {value:.6g}, the record has none")
        elif not _same(record.metrics[key], value):
            problems.append(f"{key}: recorded {record.metrics[key]}, recomputed {value}")
    if got.has_test and got.degenerate != record.degenerate:
        problems.append(f"degenerate: recorded {record.degenerate!r}, recomputed {got.degenerate!r}")
    if record.one_class is not None and got.one_class != record.one_class:
        problems.append(f"one_class: recorded {record.one_class!r}, recomputed {got.one_class!r}")
    return problems


def compared(record: Record, metrics: dict[str, float], reference: dict[str, float]) -> list[str]:
    """Where the record's comparison with its reference (F_bias) is not what ``metrics`` and the
    reference's ``reference`` metrics give."""
    out = SUITES.get(record.suite).compare(metrics, reference)
    return [f"{k}: recorded {record.metrics.get(k)}, recomputed {v}" for k, v in out.items() if not _same(record.metrics.get(k), v)]


def rescore_record(record: Record, records_dir: Path, data_dir: str | None = None,
                   cache: dict | None = None, baseline: list[dict] | None = None) -> Rescored:
    """``record`` re-scored from its rows; with ``baseline`` (its baseline's rows), its loyalty
    as well, from the same read of its rows."""
    if not record.predictions:
        return Rescored(record.run_id, "not re-scorable", ["no per-example predictions kept"])
    if not (records_dir / record.predictions).resolve().is_file():
        return Rescored(record.run_id, "not re-scorable", [f"its predictions file {record.predictions} is not there"])
    try:
        rows = load_predictions(records_dir, record)
    except BenchError as e:
        return Rescored(record.run_id, "mismatch", [str(e)])
    got = scored(record, rows, baseline)
    if isinstance(got, str):
        return Rescored(record.run_id, "not re-scorable", [got])
    problems, gold = _gold(record, rows, data_dir, {} if cache is None else cache)
    problems += differences(record, got)
    checked = len(got.metrics) + len(got.loyalty)
    problems += [f"{k}: recorded {record.metrics.get(k)}, recomputed {v}" for k, v in got.loyalty.items()
                 if not _same(record.metrics.get(k), v)]
    return Rescored(record.run_id, "mismatch" if problems else "exact", problems, got.metrics, checked, gold)


def _suite_params(record: Record) -> str:
    return json.dumps(record.provenance.get("config", {}).get("suite_params", {}), sort_keys=True)


def baseline_record(record: Record, records: list[Record]) -> Record | None:
    """The record whose rows ``record``'s loyalty was measured against: its baseline candidate
    judged by the same suite with the same parameters (None for a candidate that is its own
    baseline, or when the folder does not hold that record)."""
    if not record.baseline or record.baseline == record.artifact.get("key"):
        return None
    return next((r for r in records if r.artifact.get("key") == record.baseline and r.suite == record.suite
                 and _suite_params(r) == _suite_params(record)), None)


def rescore(out: Path, data_dir: str | None = None, data_cache: dict | None = None) -> list[Rescored]:
    """Every record under ``out/records``, its loyalty (against its baseline's rows) and F_bias
    (against its re-scored reference) included; a file that is not a readable record is listed
    as unreadable. Each record's rows are read once, its baseline's once a study (a study's
    records share one baseline per seed; every record's rows kept would hold a whole study in
    memory), with cyclic garbage collection paused: rows form no cycles. The data is read once
    a study, or once for several when they pass one ``data_cache`` (``bench rescore`` of
    several folders: the data cannot change within one command)."""
    records, unreadable = read_records(Path(out) / "records")
    records_dir = Path(out) / "records"
    cache = {} if data_cache is None else data_cache  # data key -> (sets, labels) or why unreadable
    baselines: dict[str, list[dict] | None] = {}  # baseline run id -> its rows, None if unreadable
    with gc_paused():
        results = {r.run_id: rescore_record(r, records_dir, data_dir, cache, _baseline_rows(r, records, records_dir, baselines))
                   for r in records}
    by_id = {r.run_id: r for r in records}
    for r in records:
        res, ref = results[r.run_id], by_id.get(r.reference or "")
        if res.status == "not re-scorable" or ref is None or not SUITES.get(r.suite).compares:
            continue
        ref_metrics = results[ref.run_id].metrics if results[ref.run_id].status == "exact" else ref.metrics
        res.checked += len(SUITES.get(r.suite).compare(res.metrics, ref_metrics))
        if problems := compared(r, res.metrics, ref_metrics):
            res.problems += problems
            res.status = "mismatch"
    return [Rescored(why.split(":", 1)[0], "unreadable", [why.split(": ", 1)[-1]]) for why in unreadable] + list(results.values())


def _baseline_rows(record: Record, records: list[Record], records_dir: Path, read: dict) -> list[dict] | None:
    """The rows ``record``'s loyalty was measured against; None when its baseline's record is not
    in the folder, keeps no rows, or they are unreadable (that record's own line says so)."""
    base = baseline_record(record, records)
    if base is None or not base.predictions:
        return None
    if base.run_id not in read:
        try:
            read[base.run_id] = load_predictions(records_dir, base)
        except BenchError:
            read[base.run_id] = None
    return read[base.run_id]


def summary(out: Path, results: list[Rescored]) -> str:
    lines = [f"{r.run_id}: {r.status}: {'; '.join(r.problems)}" for r in results if r.status != "exact"]
    lines += [f"{r.run_id}: gold labels {r.gold}" for r in results if r.status == "exact" and r.gold != "checked"]
    n = {s: sum(r.status == s for r in results) for s in ("exact", "mismatch", "not re-scorable", "unreadable")}
    lines.append(f"{out}: {len(results)} records, {n['exact']} re-scored exactly ({sum(r.checked for r in results)} "
                 f"metrics), {n['mismatch']} with mismatches, {n['not re-scorable']} not re-scorable"
                 + (f", {n['unreadable']} unreadable" if n["unreadable"] else ""))
    return "\n".join(lines)

