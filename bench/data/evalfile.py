"""A user's own evaluation set from one file: ``--suite-param eval_file=PATH`` of the OOD suite.

JSON lines (``.jsonl``), TSV (``.tsv``) or CSV (``.csv``), one example a line or row, with the
task's text fields, a ``label`` (a label name of the task, any case, or its index; SNLI's
``gold_label`` is read as well, and its rows without a gold label, "-", are left out and counted
in the set's description) and optional ``id``, ``group`` (per-group accuracy, as HANS's
heuristics) and ``cluster`` columns (the template an example was built from: the examples of one
cluster count as one unit in the paired tests' example variance, ``bench.store.clusters``). Text fields: ``text``
or ``sentence`` for single-text tasks; for pair tasks ``premise``/``hypothesis``,
``sentence1``/``sentence2``, ``question1``/``question2`` or ``claim``/``evidence`` (or
``text_a``/``text_b``). The set is judged as the task's own OOD sets are, in the task's label
space, and is its own F_bias pool; its checksum is part of every run id that uses it. A byte-order
mark at the start of the file (as spreadsheet programs write) is read past; ``--max-examples``
caps the set as it caps every split (stratified by label and group, seeded).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from bench.data.examples import (
    DataSource,
    EvalSet,
    Example,
    TaskData,
    sha256_file,
    stratified_sample,
)
from bench.errors import BenchError

SINGLE = (("text",), ("sentence",), ("text_a",))
PAIRS = (("premise", "hypothesis"), ("sentence1", "sentence2"), ("question1", "question2"), ("claim", "evidence"),
         ("text_a", "text_b"))
FORMATS = (".jsonl", ".tsv", ".csv")


def set_name(path: str) -> str:
    """The set's name in metric keys and columns: the file's stem, made key-safe."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", Path(path).stem).strip("_") or "eval_file"


def _rows(path: Path) -> list[dict]:
    if path.suffix not in FORMATS:
        raise BenchError(f"eval_file {path}: unknown format '{path.suffix}'; use {', '.join(FORMATS)}")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise BenchError(f"eval_file {path}: not readable ({e.strerror})") from e
    except UnicodeDecodeError as e:
        raise BenchError(f"eval_file {path}: not UTF-8 text ({e.reason})") from e
    if path.suffix == ".jsonl":
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise BenchError(f"eval_file {path}: line {i} is not JSON ({e.msg})") from e
            if not isinstance(row, dict):
                raise BenchError(f"eval_file {path}: line {i} is not a JSON object")
            rows.append(row)
        return rows
    return list(csv.DictReader(text.splitlines(), delimiter="\t" if path.suffix == ".tsv" else ","))


def _fields(path: Path, row: dict, pair: bool) -> tuple[str, ...]:
    for names in PAIRS if pair else SINGLE:
        if all(n in row for n in names):
            return names
    wanted = " or ".join("/".join(n) for n in (PAIRS if pair else SINGLE))
    raise BenchError(f"eval_file {path}: no text fields for a {'pair' if pair else 'single-text'} task; "
                     f"expected {wanted} (found {', '.join(sorted(row)) or 'none'})")


def _label(path: Path, i: int, value, labels: tuple[str, ...]) -> int:
    names = {n.lower(): k for k, n in enumerate(labels)}
    text = str(value).strip()
    if text.lower() in names:
        return names[text.lower()]
    if text.isdigit() and int(text) < len(labels):
        return int(text)
    raise BenchError(f"eval_file {path}: example {i} has label '{text}', not one of {', '.join(labels)} "
                     f"(or 0-{len(labels) - 1})")


def load(path: str, task: TaskData) -> tuple[list[Example], DataSource]:
    """The file's examples in the task's label space, or a one-line error naming the problem."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise BenchError(f"eval_file {path}: no such file")
    rows = _rows(p)
    if not rows:
        raise BenchError(f"eval_file {path}: no examples in it")
    fields = _fields(p, rows[0], task.pair)
    key = "label" if "label" in rows[0] or "gold_label" not in rows[0] else "gold_label"
    examples, no_gold = [], 0
    for i, row in enumerate(rows, 1):
        if key == "gold_label" and str(row.get(key, "")).strip() == "-":  # SNLI: the annotators did not agree
            no_gold += 1
            continue
        if key not in row or row[key] in (None, ""):
            raise BenchError(f"eval_file {path}: example {i} has no '{key}'")
        missing = [f for f in fields if row.get(f) in (None, "")]
        if missing:
            raise BenchError(f"eval_file {path}: example {i} has no '{missing[0]}'")
        examples.append(Example(uid=str(row.get("id") or f"{set_name(path)}-{i}"), text_a=str(row[fields[0]]),
                                text_b=str(row[fields[1]]) if task.pair else None,
                                label=_label(p, i, row[key], task.labels), group=str(row.get("group") or ""),
                                cluster=str(row.get("cluster") or "")))
    if not examples:
        raise BenchError(f"eval_file {path}: no example has a gold label")
    if len({e.uid for e in examples}) != len(examples):
        raise BenchError(f"eval_file {path}: its 'id' values are not unique")
    detail = f"eval_file {p.name}" + (f" ({no_gold} rows without a gold label left out)" if no_gold else "")
    if task.cap is not None and len(examples) > task.cap:
        examples = stratified_sample(examples, task.cap, 0)
        detail += f", capped at {task.cap} examples"
    return examples, DataSource("local", detail, {p.name: sha256_file(p)})


def eval_set(path: str, task: TaskData) -> EvalSet:
    """The file as an OOD set of ``task`` (checked now: a bad file fails before anything trains)."""
    loaded = load(path, task)
    name = set_name(path)
    if name in task.ood:
        raise BenchError(f"eval_file {path}: its name '{name}' is one of the task's own OOD sets; rename the file")
    clustered = any(e.cluster for e in loaded[0])
    return EvalSet(name=name, labels=task.labels, collapse=tuple(range(len(task.labels))), metric=task.id_metric,
                   pool=name, loader=lambda: loaded, clusters="the file's cluster column" if clustered else "")
