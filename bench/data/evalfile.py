"""A user's own evaluation set from one file: ``--suite-param eval_file=PATH`` of the ``ood`` and
``eval`` suites (docs/suites.md).

JSON lines (``.jsonl``), JSON (``.json``: a list of rows, or one object keyed by task as AdvGLUE's
``dev.json``, whose rows for the run's task are read: its name, else its name before ``_``), TSV
(``.tsv``, read unquoted as GLUE writes it) or CSV (``.csv``), one example a row, with the task's
text fields, a ``label`` (a label name of the task, any case, ``-``/``_``/space alike, or its
index; SNLI's and HANS's ``gold_label`` is read as well, and rows without a gold label, "-", are
left out and counted in the set's description) and optional ``id`` (or AdvGLUE's ``idx``),
``group`` (or HANS's ``heuristic``: per-group accuracy) and ``cluster`` columns (the template an
example was built from: the examples of one cluster count as one unit in the paired tests'
example variance, ``bench.store.clusters``). Text fields: ``text`` or ``sentence`` for
single-text tasks; for pair tasks ``premise``/``hypothesis``, ``sentence1``/``sentence2``,
``question1``/``question2``, ``question``/``sentence`` (QNLI), ``claim``/``evidence`` (or
``text_a``/``text_b``).

The integer labels of AdvGLUE's keys are read by GLUE's label names (``GLUE_LABELS``), never
trusted as the task's indices. On a 3-way NLI task a file labelled entailment / non-entailment
(HANS's, or GLUE's not_entailment) is judged as HANS is: the set's labels are HANS's two and
neutral and contradiction answers count as non-entailment (``EvalSet.collapse``), which the set's
description says. The set is judged as the task's own OOD sets are and is its own F_bias pool;
its checksum is part of every run id that uses it. A byte-order mark at the start of the file (as
spreadsheet programs write) is read past; ``--max-examples`` caps the set as it caps every split
(stratified by label and group, seeded).
"""

from __future__ import annotations

import csv
import io
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
PAIRS = (("premise", "hypothesis"), ("sentence1", "sentence2"), ("question1", "question2"), ("question", "sentence"),
         ("claim", "evidence"), ("text_a", "text_b"))
FORMATS = (".jsonl", ".json", ".tsv", ".csv")
NLI = ("entailment", "neutral", "contradiction")
# GLUE's label ids, as its TSVs and AdvGLUE's dev.json write them (the GLUE benchmark's dataset cards)
GLUE_LABELS = {"sst2": ("negative", "positive"), "mnli": NLI, "mnli-mm": NLI, "qqp": ("not_duplicate", "duplicate"),
               "qnli": ("entailment", "not_entailment"), "rte": ("entailment", "not_entailment")}
HANS_LABELS = ("entailment", "non-entailment")  # HANS's two labels (McCoy et al. 2019), as the task's HANS set has them
NOT_ENTAILED = ("non_entailment", "not_entailment")  # HANS's and GLUE's (RTE, QNLI) spelling, normalised


def _norm(name) -> str:
    """A label name compared without case, and with ``-``, ``_`` and spaces alike."""
    return re.sub(r"[\s_-]+", "_", str(name).strip().lower())


def hans_collapse(labels: tuple[str, ...]) -> tuple[int, ...] | None:
    """The task's labels onto HANS's two (entailment stays, every other label is non-entailment),
    or None when the task has no entailment label beside two others (not a 3-way NLI task)."""
    names = [_norm(n) for n in labels]
    if len(names) < 3 or "entailment" not in names:
        return None
    return tuple(0 if n == "entailment" else 1 for n in names)


def set_name(path: str) -> str:
    """The set's name in metric keys and columns: the file's stem, made key-safe."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", Path(path).stem).strip("_") or "eval_file"


def _rows(path: Path, task: TaskData) -> tuple[list, str]:
    """The file's rows, and the key of a JSON object keyed by task they come from ("" if none)."""
    if path.suffix not in FORMATS:
        raise BenchError(f"eval_file {path}: unknown format '{path.suffix}'; use {', '.join(FORMATS)}")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise BenchError(f"eval_file {path}: not readable ({e.strerror})") from e
    except UnicodeDecodeError as e:
        raise BenchError(f"eval_file {path}: not UTF-8 text ({e.reason})") from e
    lines = [ln.removesuffix("\r") for ln in text.split("\n")]  # not splitlines: text may hold U+2028, U+0085
    if path.suffix == ".json":
        return _keyed(path, text, task)
    if path.suffix == ".jsonl":
        rows = []
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                raise BenchError(f"eval_file {path}: line {i} is not JSON ({getattr(e, 'msg', e)})") from e
        return rows, ""
    if path.suffix == ".tsv":  # GLUE's: one line a row, no quoting (its sentences hold quotes)
        numbered = [(i, ln.split("\t")) for i, ln in enumerate(lines, 1) if ln.strip()]
        if not numbered:
            return [], ""
        header = numbered[0][1]
        for i, cells in numbered[1:]:
            if len(cells) != len(header):
                raise BenchError(f"eval_file {path}: line {i} has {len(cells)} tab-separated fields, the header "
                                 f"{len(header)} (a TSV is read unquoted, as GLUE writes it; write quoted fields as CSV)")
        return [dict(zip(header, cells, strict=True)) for _, cells in numbered[1:]], ""
    return list(csv.DictReader(io.StringIO(text, newline=""))), ""


def _keyed(path: Path, text: str, task: TaskData) -> tuple[list, str]:
    """A JSON list of rows, or an object keyed by task (AdvGLUE's dev.json): the run's task's rows."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise BenchError(f"eval_file {path}: not JSON ({getattr(e, 'msg', e)})") from e
    if isinstance(data, list):
        return data, ""
    if not isinstance(data, dict):
        raise BenchError(f"eval_file {path}: neither a list of examples nor an object keyed by task")
    key = next((k for k in (task.name, task.name.split("_")[0]) if k in data), None)
    if key is None:
        raise BenchError(f"eval_file {path}: no rows for task '{task.name}' in this file keyed by task "
                         f"(its keys: {', '.join(map(str, data)) or 'none'})")
    if not isinstance(data[key], list):
        raise BenchError(f"eval_file {path}: its '{key}' is not a list of examples")
    return data[key], key


def _fields(path: Path, row: dict, pair: bool) -> tuple[str, ...]:
    for names in PAIRS if pair else SINGLE:
        if all(n in row for n in names):
            return names
    wanted = " or ".join("/".join(n) for n in (PAIRS if pair else SINGLE))
    raise BenchError(f"eval_file {path}: no text fields for a {'pair' if pair else 'single-text'} task; "
                     f"expected {wanted} (found {', '.join(sorted(row)) or 'none'})")


def _label(path: Path, i: int, text: str, labels: tuple[str, ...], binary: bool) -> int:
    names = {_norm(n): k for k, n in enumerate(labels)} | (dict.fromkeys(NOT_ENTAILED, 1) if binary else {})
    if _norm(text) in names:
        return names[_norm(text)]
    if binary:  # an integer could be HANS's 1 (non-entailment) or the task's 1 (neutral): neither is guessed
        raise BenchError(f"eval_file {path}: example {i} has label '{text}', but the file's labels are HANS's "
                         "entailment / non-entailment (write every label by name, one of the two)")
    if text.isascii() and text.isdigit() and int(text) < len(labels):
        return int(text)
    raise BenchError(f"eval_file {path}: example {i} has label '{text}', not one of {', '.join(labels)} "
                     f"(or 0-{len(labels) - 1})")


def _first(row: dict, names: tuple[str, ...], default: str = "") -> str:
    """The first of ``names`` the row gives (AdvGLUE's ``idx`` 0 included), as text."""
    return next((str(row[n]) for n in names if row.get(n) not in (None, "")), default)


def load(path: str, task: TaskData) -> tuple[list[Example], DataSource, tuple[str, ...]]:
    """The file's examples, where they come from and the set's labels (the task's, or HANS's two
    on a 3-way NLI task whose file says non-entailment), or a one-line error naming the problem."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise BenchError(f"eval_file {path}: no such file")
    rows, key = _rows(p, task)
    if not rows:
        raise BenchError(f"eval_file {path}: no examples in it")
    if bad := next((i for i, row in enumerate(rows, 1) if not isinstance(row, dict)), None):
        raise BenchError(f"eval_file {path}: example {bad} is not a JSON object")
    fields = _fields(p, rows[0], task.pair)
    col = "label" if "label" in rows[0] or "gold_label" not in rows[0] else "gold_label"
    glue = GLUE_LABELS.get(key)
    kept, no_gold, by_glue = [], 0, False
    for i, row in enumerate(rows, 1):
        if col == "gold_label" and str(row.get(col, "")).strip() == "-":  # SNLI: the annotators did not agree
            no_gold += 1
            continue
        if row.get(col) in (None, ""):
            raise BenchError(f"eval_file {path}: example {i} has no '{col}'")
        missing = [f for f in fields if row.get(f) in (None, "")]
        if missing:
            raise BenchError(f"eval_file {path}: example {i} has no '{missing[0]}'")
        text = str(row[col]).strip()
        if glue and text.isascii() and text.isdigit() and int(text) < len(glue):  # AdvGLUE: GLUE's ids, by name
            text, by_glue = glue[int(text)], True
        kept.append((i, row, text))
    collapse = hans_collapse(task.labels)
    binary = collapse is not None and any(_norm(text) in NOT_ENTAILED for _, _, text in kept)
    labels = HANS_LABELS if binary else task.labels
    examples = [Example(uid=_first(row, ("id", "idx"), f"{set_name(path)}-{i}"), text_a=str(row[fields[0]]),
                        text_b=str(row[fields[1]]) if task.pair else None, label=_label(p, i, text, labels, binary),
                        group=_first(row, ("group", "heuristic")), cluster=_first(row, ("cluster",)))
                for i, row, text in kept]
    if not examples:
        raise BenchError(f"eval_file {path}: no example has a gold label")
    if len({e.uid for e in examples}) != len(examples):
        raise BenchError(f"eval_file {path}: its 'id' values are not unique")
    detail = f"eval_file {p.name}" + (f", key '{key}'" if key else "")
    if by_glue:
        detail += f" (GLUE's label ids read by name: {', '.join(f'{k} {n}' for k, n in enumerate(glue))})"
    if binary:
        others = " and ".join(n for n, c in zip(task.labels, collapse, strict=True) if c)
        detail += f"; labels {' / '.join(HANS_LABELS)} as HANS's: {others} answers count as {HANS_LABELS[1]}"
    detail += f" ({no_gold} rows without a gold label left out)" if no_gold else ""
    if task.cap is not None and len(examples) > task.cap:
        examples = stratified_sample(examples, task.cap, 0)
        detail += f", capped at {task.cap} examples"
    return examples, DataSource("local", detail, {p.name: sha256_file(p)}), labels


def eval_set(path: str, task: TaskData) -> EvalSet:
    """The file as an OOD set of ``task`` (checked now: a bad file fails before anything trains),
    judged in its own labels: HANS's collapse where they are HANS's two (``load``)."""
    examples, source, labels = load(path, task)
    name = set_name(path)
    if name in task.ood:
        raise BenchError(f"eval_file {path}: its name '{name}' is one of the task's own OOD sets; rename the file")
    collapse = tuple(range(len(labels))) if labels == task.labels else hans_collapse(task.labels)
    clustered = any(e.cluster for e in examples)
    return EvalSet(name=name, labels=labels, collapse=collapse, metric=task.id_metric, pool=name,
                   loader=lambda: (examples, source), clusters="the file's cluster column" if clustered else "")


def eval_sets(paths, task: TaskData) -> list[EvalSet]:
    """Every file as a set (``eval_set``), their names distinct."""
    sets = [eval_set(str(p), task) for p in paths]
    names = [s.name for s in sets]
    if dup := next((n for n in names if names.count(n) > 1), None):
        raise BenchError(f"eval_file: two evaluation sets are named '{dup}' (an eval_file's name is its file's stem); "
                         "rename one")
    return sets
