"""Which examples of a set move together: the clusters its data declares, kept beside a study's
records so that a paired test counts them as one unit of the example variance
(``leaderboard.stats.example_variance``).

An example belongs to a cluster where its set was built from templates: HANS (McCoy et al.
2019) generates its 30,000 pairs from 30 subcases of templates, 1,000 each, and two pairs of one
subcase are answered alike far more often than two pairs of different ones. The loaders say so
(``Example.cluster``): HANS's official file by its template (``subcase/template``), the public
copy that lost the template column by its subcase. A set whose examples are drawn independently
declares none, and each example is its own cluster.

The clusters are a property of the data file, not of a run, so they are written once per set
and data file, ``clusters/<set>-<checksum>.json.gz`` in the study folder (beside ``records/``
and ``predictions/``), and a record finds its sets' clusters by the data checksums its
provenance names. Records and their predictions stay as they were made. The file is untrusted
like every record: its fields are checked when read, and a malformed one is a one-line error.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from bench.errors import BenchError
from bench.store.atomic import exclusive, write_atomic

FOLDER = "clusters"


@dataclass(frozen=True)
class Clusters:
    """One set's clusters: which data file they belong to (its checksums), what they are by, and
    each example id's cluster."""

    set: str
    by: str
    data: dict[str, str]  # data file -> sha256
    of: dict[str, str]  # example id -> cluster

    def fits(self, checksums: set[str]) -> bool:
        """Whether a record that read files of these checksums read this set's data."""
        return set(self.data.values()) <= checksums


def _name(set_name: str, data: dict[str, str]) -> str:
    key = hashlib.sha256(json.dumps(sorted(data.items())).encode()).hexdigest()[:12]
    safe = "".join(ch if ch.isalnum() or ch in "_-" else "-" for ch in set_name)
    return f"{safe}-{key}.json.gz"


def write(out: Path, set_name: str, examples: Iterable, by: str, data: dict[str, str]) -> Path | None:
    """Write ``examples``' clusters (their ``cluster`` field) for ``set_name`` read from the
    files ``data`` (file -> sha256) under ``out/clusters``; None where no example has one. A run
    capped to some examples adds them to what the file holds (one data file, one clustering).
    The bytes depend on the clusters alone (sorted, gzip without a time stamp), so writing them
    again changes no file."""
    of = {e.uid: e.cluster for e in examples if getattr(e, "cluster", "")}
    if not of:
        return None
    path = Path(out) / FOLDER / _name(set_name, data)
    with exclusive(path):  # pool workers of capped runs add their examples in turn
        return _merge(path, of, set_name, by, data)


def _merge(path: Path, of: dict[str, str], set_name: str, by: str, data: dict[str, str]) -> Path:
    if path.is_file():
        st = path.stat()
        for uid, c in _read(path.resolve(), (st.st_mtime_ns, st.st_size)).of.items():
            if of.setdefault(uid, c) != c:
                raise BenchError(f"{path}: example {uid} is in cluster {c} there and {of[uid]} in the data")
    members: dict[str, list[str]] = defaultdict(list)
    for uid, c in sorted(of.items()):
        members[c].append(uid)
    body = json.dumps({"set": set_name, "by": by, "data": dict(sorted(data.items())),
                       "clusters": dict(sorted(members.items()))}, separators=(",", ":")).encode()
    raw = gzip.compress(body, compresslevel=9, mtime=0)
    if not (path.is_file() and path.read_bytes() == raw):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, raw)
    return path


@cache
def _read(path: Path, stamp: tuple[int, int]) -> Clusters:
    try:
        d = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError, ValueError) as e:
        raise BenchError(f"{path}: not a clusters file ({e})") from None
    ok = (isinstance(d, dict) and isinstance(d.get("set"), str) and isinstance(d.get("by"), str)
          and isinstance(d.get("data"), dict) and all(isinstance(v, str) for v in d["data"].values())
          and isinstance(d.get("clusters"), dict)
          and all(isinstance(v, list) and all(isinstance(u, str) for u in v) for v in d["clusters"].values()))
    if not ok:
        raise BenchError(f"{path}: malformed clusters file (set, by, data and clusters with lists of example ids)")
    of = {}
    for c, uids in d["clusters"].items():
        for u in uids:
            if of.setdefault(u, c) != c:
                raise BenchError(f"{path}: example {u} is in two clusters")
    return Clusters(d["set"], d["by"], d["data"], of)


def read(study: Path) -> list[Clusters]:
    """Every clusters file of a study folder (the folder holding ``records/``)."""
    folder = Path(study) / FOLDER
    if not folder.is_dir():
        return []
    out = []
    for p in sorted(folder.glob("*.json.gz")):
        st = p.stat()
        out.append(_read(p.resolve(), (st.st_mtime_ns, st.st_size)))
    return out


def for_record(records_dir: Path, set_name: str, checksums: set[str]) -> Clusters | None:
    """The clusters of ``set_name`` for a record read from ``records_dir`` that read data of
    ``checksums``; None where its study keeps none."""
    return next((c for c in read(Path(records_dir).parent) if c.set == set_name and c.fits(checksums)), None)
