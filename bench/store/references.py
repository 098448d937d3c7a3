"""Published reference numbers: what a sweep spec carries under ``[[reference]]``, written beside
the records so that every later leaderboard shows them as labelled rows, never averaged."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.store.atomic import write_atomic


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
