"""Provenance: the commit and packages a record names are the code that made its numbers."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.core import provenance as records
from bench.core.provenance import Provenance
from bench.core.runner import Runner


def test_the_commit_is_read_when_the_runner_starts_not_when_a_record_is_written(monkeypatch, tmp_path: Path):
    """A sweep writes records for hours; a commit made meanwhile must not be credited with them."""
    records.git_state.cache_clear()
    records.versions.cache_clear()
    monkeypatch.setattr(records.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(
        argv, 0, stdout="aaaa\n" if argv[1] == "rev-parse" else "", stderr=""))
    monkeypatch.setattr(records, "version", lambda pkg: "1.0")
    Runner(tmp_path, progress=False)
    monkeypatch.setattr(records.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(
        argv, 0, stdout="bbbb\n" if argv[1] == "rev-parse" else " M bench/x.py\n", stderr=""))
    monkeypatch.setattr(records, "version", lambda pkg: "2.0")  # a pip install -U meanwhile
    try:
        prov = Provenance(config={}, data={}, device={}, wall_seconds=0.0)
    finally:
        records.git_state.cache_clear()
        records.versions.cache_clear()
    assert prov.git == {"commit": "aaaa", "dirty": False}
    assert prov.versions["torch"] == "1.0"
