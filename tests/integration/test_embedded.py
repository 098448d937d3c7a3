"""A few end-to-end checks on the real embedded MiniLM backbone (and the real data when
$BENCH_DATA holds it). Small caps keep each to well under a minute."""

import json

import pytest

from bench.cli import main
from bench.model.backbone import load_classifier, resolve
from bench.model.masking import sparsity_report
from bench.store.records import load_predictions, load_record
from tests.conftest import REAL_DATA

pytestmark = pytest.mark.integration
SHARED = REAL_DATA


def test_embedded_backbone_loads_offline_with_the_documented_size(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = load_classifier(resolve("minilm"), 3, seed=0)
    rep = sparsity_report(model)
    assert rep.prunable == 10_616_832  # docs/design.md section 2: the 36 encoder Linear layers
    assert 22_000_000 < rep.total_params < 23_000_000
    assert rep.sparsity == 0.0


def test_quickstart_shape_on_a_slice(tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["run", "--method", "imp", "--suite", "ood", "--sparsity", "0.5", "--max-examples", "48",
                 "--param", "epochs=1", "--param", "batch_size=16", "--out", str(out), "--quiet"]) == 0
    md = (out / "LEADERBOARD.md").read_text()
    assert "| imp (ce)" in md and "| finetune (ce)" in md and "F_bias hans" in md
    rec = json.loads(next((out / "records").glob("*imp*.json")).read_text())
    assert rec["sparsity"]["prunable"] == 10_616_832 and rec["sparsity"]["sparsity"] == pytest.approx(0.5, abs=1e-6)


@pytest.mark.skipif(not (SHARED / "mnli" / "dev_matched.tsv").is_file(), reason="needs the real data ($BENCH_DATA, bench data)")
def test_real_mnli_split_with_hans_cells(tmp_path):
    out = tmp_path / "runs"
    assert main(["run", "--method", "finetune", "--suite", "ood", "--task", "mnli", "--data-dir", str(SHARED),
                 "--max-examples", "48", "--param", "epochs=1", "--param", "batch_size=16",
                 "--out", str(out), "--quiet"]) == 0  # a pruned candidate on MiniLM: test_quickstart_shape_on_a_slice
    rec = json.loads(next((out / "records").glob("mnli__finetune*.json")).read_text())
    cells = [k for k in rec["metrics"] if k.startswith("ood/hans/") and k.count("/") == 3 and "/mean/" not in k and "/share/" not in k]
    assert len(cells) == 6
    assert "mnli/dev_matched.tsv" in json.dumps(rec["provenance"]["data"])


def test_killing_an_attack_midway_and_rerunning_finishes_only_the_rest(tmp_path, tiny_bert):
    """A real SIGKILL in the middle of an attack (tiny BERT, TextBugger, 10 examples)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    data = ["--data-dir", str(SHARED)] if (SHARED / "wordsub").is_dir() else []
    argv = [sys.executable, "-m", "bench", "run", "--method", "finetune", "--suite", "adversarial",
            "--suite-param", "recipes=textbugger", "--task", "sent_synth",
            "--backbone", str(tiny_bert), "--max-examples", "200", "--param", "epochs=4", "--param", "batch_size=16",
            "--param", "lr=1e-3", "--suite-param", "n=10", "--quiet", *data]
    env = {**os.environ, "BENCH_CACHE": os.environ.get("BENCH_CACHE", str(tmp_path / "cache"))}
    whole = subprocess.run([*argv, "--out", str(tmp_path / "whole")], env=env, capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr
    proc = subprocess.Popen([*argv, "--out", str(tmp_path / "cut")], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partial = tmp_path / "cut" / "partial"
    deadline = time.time() + 600
    while time.time() < deadline:
        files = list(partial.glob("*/textbugger.jsonl")) if partial.is_dir() else []
        if files and len(files[0].read_text().splitlines()) >= 1 + 3:  # a header and 3 examples
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(files[0].read_text().splitlines()) - 1
    assert 3 <= done_before < 10 and not (tmp_path / "cut" / "records").exists()
    rerun = subprocess.run([*argv, "--out", str(tmp_path / "cut")], env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    a = json.loads(next((tmp_path / "whole" / "records").glob("*.json")).read_text())
    b = json.loads(next((tmp_path / "cut" / "records").glob("*.json")).read_text())
    scores = lambda r: {k: v for k, v in r["metrics"].items() if not k.startswith("eff/")}  # noqa: E731  (timings vary)
    assert scores(a) == scores(b) and a["details"]["sample_ids"] == b["details"]["sample_ids"]
    rows = lambda d, r: [{k: v for k, v in x.items() if k != "seconds"}  # noqa: E731
                         for x in load_predictions(d / "records", load_record(next((d / "records").glob("*.json"))))]
    assert rows(tmp_path / "whole", a) == rows(tmp_path / "cut", b)
    assert b["details"]["model_calls"] < a["details"]["model_calls"]  # the finished examples were not redone
