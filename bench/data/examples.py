"""Examples, evaluation sets and the file readers shared by every task.

Readers are strict: a missing file, a missing column or an unknown label is a one-line
``BenchError`` naming the file, never a silently wrong number.
"""

from __future__ import annotations

import csv
import functools
import json
import random
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from bench.errors import BenchError, MissingData
from bench.store.atomic import sha256_file

csv.field_size_limit(sys.maxsize)


MIN_PER_CLASS = 2  # a capped split keeps at least this many examples of each label it has

@dataclass(frozen=True)
class Example:
    uid: str
    text_a: str
    text_b: str | None
    label: int
    group: str = ""  # e.g. the HANS heuristic; "" when the set has no groups
    cluster: str = ""  # the template it was built from (HANS); "" when examples are drawn independently


@dataclass(frozen=True)
class DataSource:
    """Where a split came from: enough to fetch or regenerate exactly the same bytes."""

    kind: Literal["local", "hub", "synthetic"]
    detail: str
    sha256: dict[str, str] = field(default_factory=dict)  # file -> checksum


Loader = Callable[[], tuple[list[Example], DataSource]]


@dataclass
class EvalSet:
    """An out-of-distribution set judged against the task's model.

    ``collapse`` maps a task label id to this set's label id (HANS: neutral and contradiction
    -> non-entailment); ``pool`` names the F_bias pool (FEVER pools Symm1+2, QQP pools PAWS).
    The examples are read on first use only: building a candidate never opens an OOD test file.
    """

    name: str
    labels: tuple[str, ...]
    collapse: tuple[int, ...]
    metric: Literal["accuracy", "f1_weighted"]
    pool: str
    loader: Loader = field(repr=False, compare=False)
    clusters: str = ""  # what its examples' ``cluster`` is (bench.store.clusters); "" when none

    @functools.cached_property
    def _loaded(self) -> tuple[list[Example], DataSource]:
        return self.loader()

    @property
    def examples(self) -> list[Example]:
        return self._loaded[0]

    @property
    def source(self) -> DataSource:
        return self._loaded[1]


@dataclass
class TaskData:
    name: str
    labels: tuple[str, ...]
    pair: bool
    id_metric: Literal["accuracy", "f1_weighted"]
    max_length: int
    bias_features: Literal["overlap", "claim", "none"]
    train: list[Example]
    dev: list[Example]
    test: list[Example]
    ood: dict[str, EvalSet]
    sources: list[DataSource]
    note: str = ""
    # OOD *training* data for the "sparse and unbiased" upper bound (HANS train, PAWS train,
    # FEVER-Symm v2 dev), with labels already in this task's label space; never OOD test data.
    ood_train: Loader | None = field(default=None, repr=False)
    cap: int | None = None  # --max-examples, which a user's own evaluation file is capped at too

    def id_checksums(self) -> dict[str, str]:
        """Checksums of the ID splits: what a trained candidate depends on."""
        out: dict[str, str] = {}
        for s in self.sources:
            out.update(s.sha256)
        return out

    def checksums(self) -> dict[str, str]:
        """ID and OOD test checksums: what a record depends on (reads the OOD sets)."""
        out = self.id_checksums()
        for o in self.ood.values():
            out.update(o.source.sha256)
        return out

    def for_methods(self) -> TaskData:
        """The task as a method sees it: no OOD test sets, so none can leak into training."""
        return replace(self, ood={})

    def limited(self, n: int | None, seed: int = 0) -> TaskData:
        """Every split capped at n examples, sampled with a fixed seed, stratified by label."""
        if n is None:
            return self
        if n < 1:
            raise BenchError(f"--max-examples must be at least 1, got {n}")
        splits = {name: stratified_sample(getattr(self, name), n, seed) for name in ("train", "dev", "test")}
        for name, kept in splits.items():
            have = Counter(e.label for e in getattr(self, name))
            got = Counter(e.label for e in kept)
            if short := sorted(lab for lab, k in have.items() if k >= MIN_PER_CLASS and got[lab] < MIN_PER_CLASS):
                raise BenchError(f"--max-examples {n} leaves {got[short[0]]} {name} example(s) of label {short[0]}; "
                                 f"every label needs at least {MIN_PER_CLASS}: raise --max-examples")
        return replace(self, **splits, cap=n,
                       ood={k: replace(v, loader=functools.partial(_limited, v, n, seed)) for k, v in self.ood.items()})


def _limited(s: EvalSet, n: int, seed: int) -> tuple[list[Example], DataSource]:
    return stratified_sample(s.examples, n, seed), s.source


def stratified_sample(examples: list[Example], n: int, seed: int) -> list[Example]:
    """n examples drawn with a fixed seed, stratified by (label, group); never the first n."""
    if len(examples) <= n:
        return list(examples)
    rng = random.Random(seed)
    strata: dict[tuple[int, str], list[Example]] = defaultdict(list)
    for ex in examples:
        strata[(ex.label, ex.group)].append(ex)
    keys = sorted(strata)
    quota = {k: len(strata[k]) * n // len(examples) for k in keys}
    short = n - sum(quota.values())
    for k in sorted(keys, key=lambda k: -(len(strata[k]) * n % len(examples)))[:short]:
        quota[k] += 1
    out: list[Example] = []
    for k in keys:
        out.extend(rng.sample(strata[k], quota[k]))
    rng.shuffle(out)
    return out


def verify_against_sums(path: Path, digest: str) -> None:
    """Check a file against a SHA256SUMS beside its data directory, when there is one."""
    for parent in path.parents:
        sums = parent / "SHA256SUMS"
        if sums.is_file():
            rel = path.relative_to(parent).as_posix()
            for line in sums.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1].lstrip("*") == rel and parts[0] != digest:
                    raise BenchError(f"{path}: checksum does not match {sums} (file changed or corrupt)")
            return


def find_file(data_dir: Path | None, candidates: Iterable[str], what: str) -> Path:
    """The first existing file among candidates under data_dir, else one error listing them."""
    if data_dir is None:
        raise MissingData(f"{what} needs local files: put them in $BENCH_DATA or pass --data-dir DIR (docs/data.md)")
    if not data_dir.is_dir():
        raise BenchError(f"data directory {data_dir} does not exist")
    names = list(candidates)
    for name in names:
        p = data_dir / name
        if p.is_file():
            return p
    raise MissingData(f"{what}: none of {', '.join(names)} found under {data_dir}")


def read_rows(path: Path, header: list[str] | None = None) -> list[dict[str, str]]:
    """Rows of a .tsv (quoting disabled: text contains quotes) or .jsonl file as dicts.

    ``header`` names the columns of a TSV without a header row.
    """
    try:
        if path.suffix == ".jsonl":
            rows = []
            with open(path, encoding="utf-8") as f:
                for i, line in enumerate(f, 1):
                    if line.strip():
                        try:
                            rows.append(json.loads(line))
                        except json.JSONDecodeError as e:
                            raise BenchError(f"{path}:{i}: not valid JSON ({e.msg})") from e
            return rows
        with open(path, encoding="utf-8", newline="") as f:
            lines = [ln.rstrip("\r\n") for ln in f]
    except (OSError, UnicodeDecodeError) as e:
        raise BenchError(f"cannot read {path}: {e}") from e
    lines = [ln for ln in lines if ln.strip()]
    if header is None:
        if not lines:
            raise BenchError(f"{path} is empty")
        header, lines = lines[0].split("\t"), lines[1:]
    rows = []
    for i, ln in enumerate(lines, 2 if header else 1):
        cells = ln.split("\t")
        if len(cells) < len(header):
            raise BenchError(f"{path}:{i}: expected {len(header)} tab-separated columns, found {len(cells)}")
        rows.append(dict(zip(header, cells, strict=False)))
    return rows


def column(row: dict, names: tuple[str, ...], path: Path) -> str:
    for n in names:
        if n in row and row[n] is not None:
            return str(row[n])
    raise BenchError(f"{path}: missing column {' / '.join(names)} (has: {', '.join(map(str, row))})")


def to_examples(
    rows: list[dict],
    path: Path,
    text_a: tuple[str, ...],
    text_b: tuple[str, ...] | None,
    label: tuple[str, ...],
    label_map: dict[str, int],
    group: tuple[str, ...] | None = None,
    skip_labels: tuple[str, ...] = (),
    clean: Callable[[str], str] = str.strip,
    uid: tuple[str, ...] | None = None,
) -> list[Example]:
    """Rows -> Examples with strict column and label checks."""
    out = []
    for i, row in enumerate(rows):
        raw = column(row, label, path).strip()
        if raw in skip_labels:
            continue
        if raw not in label_map:
            raise BenchError(f"{path}: row {i + 1} has unknown label '{raw}' (expected one of {', '.join(label_map)})")
        out.append(
            Example(
                uid=column(row, uid, path) if uid else f"{path.stem}-{i}",
                text_a=clean(column(row, text_a, path)),
                text_b=clean(column(row, text_b, path)) if text_b else None,
                label=label_map[raw],
                group=column(row, group, path) if group else "",
            )
        )
    if not out:
        raise BenchError(f"{path}: no examples")
    return out


def local_source(paths: list[Path], detail: str) -> DataSource:
    sums = {}
    for p in paths:
        digest = sha256_file(p)
        verify_against_sums(p, digest)
        sums[p.name if p.parent.name == "" else f"{p.parent.name}/{p.name}"] = digest
    return DataSource(kind="local", detail=detail, sha256=sums)


def split_seeded(examples: list[Example], sizes: tuple[int, int], seed: int) -> tuple[list, list, list]:
    """Seeded (train, dev, test) split; dev and test get the given sizes, train the rest."""
    order = list(examples)
    random.Random(seed).shuffle(order)
    n_dev, n_test = sizes
    if len(order) <= n_dev + n_test:
        raise BenchError(f"cannot split {len(order)} examples into dev {n_dev} + test {n_test} + train")
    return order[n_dev + n_test :], order[:n_dev], order[n_dev : n_dev + n_test]
