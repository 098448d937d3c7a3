"""The plug-in examples of docs/plugins.md, installed with pip as a user would (entry points in
a dist-info), run on the embedded task, and found on the generated leaderboard."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_an_outside_suite_and_method_installed_with_pip_reach_the_leaderboard(tmp_path, tiny_bert):
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "--target", str(site),
           str(ROOT / "examples" / "distractor_suite"), str(ROOT / "examples" / "smoothed_method")]
    assert subprocess.run(pip, capture_output=True, text=True, timeout=600).returncode == 0
    env = {**os.environ, "PYTHONPATH": str(site)}
    bench = [sys.executable, "-m", "bench"]
    listed = subprocess.run([*bench, "ls"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "distractor" in listed.stdout and "smoothed" in listed.stdout
    out = tmp_path / "out"
    run = subprocess.run([*bench, "run", "--method", "smoothed", "--suite", "distractor", "--backbone", str(tiny_bert),
                          "--max-examples", "24", "--param", "epochs=1", "--param", "batch_size=8", "--out", str(out),
                          "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    records = [json.loads(p.read_text()) for p in (out / "records").glob("*.json")]
    (record,) = [r for r in records if r["method"] == "smoothed"]  # and its baseline's, its loyalty's other side
    assert sorted(r["method"] for r in records) == ["finetune", "smoothed"] and "loyalty/test" in record["metrics"]
    value = record["metrics"]["distractor/distracted"]
    assert record["method"] == "smoothed" and 0.0 <= value <= 1.0
    board = (out / "LEADERBOARD.md").read_text().splitlines()
    header = next(ln for ln in board if ln.startswith("| rank"))
    row = next(ln for ln in board if "| smoothed " in ln)
    assert "| distracted " in header and f"{100 * value:.1f}" in row
    rescore = subprocess.run([*bench, "rescore", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert rescore.returncode == 0 and "2 re-scored exactly" in rescore.stdout, rescore.stdout + rescore.stderr
