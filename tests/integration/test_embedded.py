"""A few end-to-end checks on the real embedded MiniLM backbone (and the real data when
../shared/data is beside the project). Small caps keep each to well under a minute."""

import json
from pathlib import Path

import pytest

from bench.backbone import load_classifier, resolve
from bench.cli import main
from bench.masking import sparsity_report

pytestmark = pytest.mark.integration
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def test_embedded_backbone_loads_offline_with_the_documented_size(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = load_classifier(resolve("minilm"), 3, seed=0)
    rep = sparsity_report(model)
    assert rep.prunable == 10_616_832  # DESIGN section 2: the 36 encoder Linear layers
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


@pytest.mark.skipif(not (SHARED / "mnli" / "dev_matched.tsv").is_file(), reason="needs ../shared/data")
def test_real_mnli_split_with_hans_cells(tmp_path):
    out = tmp_path / "runs"
    assert main(["run", "--method", "imp", "--suite", "ood", "--task", "mnli", "--data-dir", str(SHARED),
                 "--sparsity", "0.5", "--max-examples", "48", "--param", "epochs=1", "--param", "batch_size=16",
                 "--out", str(out), "--quiet"]) == 0
    rec = json.loads(next((out / "records").glob("mnli__imp*.json")).read_text())
    cells = [k for k in rec["metrics"] if k.startswith("ood/hans/") and k.count("/") == 3 and "/mean/" not in k and "/share/" not in k]
    assert len(cells) == 6
    assert "mnli/dev_matched.tsv" in json.dumps(rec["provenance"]["data"])
