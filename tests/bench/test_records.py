"""Provenance: the commit and packages a record names are the code that made its numbers."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.core import provenance as records
from bench.core.provenance import Provenance
from bench.core.runner import Runner
from tests.conftest import GIT_STATE


def test_the_commit_is_read_when_the_runner_starts_not_when_a_record_is_written(monkeypatch, tmp_path: Path):
    """A sweep writes records for hours; a commit made meanwhile must not be credited with them."""
    monkeypatch.setattr(records, "git_state", GIT_STATE)  # not the suite's clean-tree stand-in
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


def test_predictions_round_trip_and_a_line_that_is_not_one_object_is_refused(tmp_path: Path):
    """The loader parses a file as one JSON array (twice as fast on the 31,000-row HANS files),
    which must not turn a line holding two values, or a bare number, into rows."""
    import dataclasses
    import gc
    import gzip
    import hashlib

    import pytest

    from bench.errors import BenchError
    from bench.store.records import Record, load_predictions, write_predictions

    rows = [{"set": "test", "uid": f"u{i}", "gold": i % 3, "pred": 0, "probs": [0.5, 0.25, 0.25]} for i in range(5)]
    rel, sha = write_predictions(tmp_path, "run", rows)
    rec = Record(run_id="run", method="m", label="m", params={}, task="t", backbone="b", seed=0, suite="s",
                 sparsity={}, metrics={}, details={}, method_info={}, predictions=rel, reference=None, artifact={},
                 provenance={}, predictions_sha256=sha)
    records_dir = tmp_path / "records"
    assert load_predictions(records_dir, rec) == rows
    path = (records_dir / rel).resolve()
    for bad in ('{"set": "test"}\n1, 2\n', '{"set": "test"}\n7\n', '{"a": 1}{"b": 2}\n'):
        path.write_bytes(gzip.compress(bad.encode(), mtime=0))
        edited = dataclasses.replace(rec, predictions_sha256=hashlib.sha256(path.read_bytes()).hexdigest())
        with pytest.raises(BenchError, match="not readable per-example predictions"):
            load_predictions(records_dir, edited)
    assert gc.isenabled()  # parsing pauses the garbage collector; a bad file must not leave it off


def test_a_rewritten_leaderboard_or_doc_does_not_make_the_tree_dirty_but_code_does(tmp_path: Path):
    """A sweep rewrites its study's LEADERBOARD.md when it ends; the next sweep in the same
    checkout runs the same code, so its records must not say 'dirty'."""
    def git(*argv):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *argv], cwd=tmp_path, check=True,
                       capture_output=True)

    for f in ("bench/x.py", "results/s/LEADERBOARD.md", "results/s/records/r.json", "docs/a.md", "README.md"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("a\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "c")
    assert records.tree_state(tmp_path)["dirty"] is False
    for f in ("results/s/LEADERBOARD.md", "results/s/records/r.json", "docs/a.md", "README.md"):
        (tmp_path / f).write_text("b\n")
    (tmp_path / "new.py").write_text("untracked\n")
    assert records.tree_state(tmp_path)["dirty"] is False
    assert records.tree_state(tmp_path / "results" / "s")["dirty"] is False  # the same from any folder of the checkout
    (tmp_path / "bench/x.py").write_text("b\n")
    state = records.tree_state(tmp_path)
    assert state["dirty"] is True and len(state["commit"]) == 40
    assert records.tree_state(tmp_path / "results" / "s")["dirty"] is True
