"""Tiny studies for the leaderboard's tests: one committed record copied, with its predictions,
into a study folder of its own, for a test to edit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def one_record(study: str, out: Path) -> tuple[Path, dict]:
    """The first record of committed study ``study`` copied to ``out`` (with its predictions):
    the record's path there and its JSON, to edit and write back."""
    source = sorted((ROOT / "results" / study / "records").glob("*.json"))[0]
    data = json.loads(source.read_text())
    (out / "records").mkdir(parents=True)
    (out / "predictions").mkdir()
    shutil.copy(source.parent / data["predictions"], out / "predictions")
    target = out / "records" / source.name
    target.write_text(json.dumps(data))
    return target, data
