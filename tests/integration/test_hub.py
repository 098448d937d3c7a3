"""The hub path, offline (issue 26, item 1): models laid out as huggingface_hub's cache lays
them out, loaded by their hub id through the normal --backbone flag with HF_HUB_OFFLINE=1."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def hub_cache(root: Path, repo_id: str, model_dir: Path) -> Path:
    """``root/models--org--name/{refs/main, snapshots/<commit>/...}``: the cache layout the
    hub client reads offline (it keeps files as blobs and symlinks; plain files read alike)."""
    repo = root / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    shutil.copytree(model_dir, repo / "snapshots" / COMMIT)
    return root


@pytest.mark.parametrize("arch", ["bert", "roberta", "distilbert"])
def test_a_model_in_the_hub_cache_loads_by_its_id_offline(arch, tiny_backbones, tmp_path):
    cache = hub_cache(tmp_path / "hub", f"bench-test/tiny-{arch}", tiny_backbones[arch])
    out = tmp_path / "out"
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    argv = lambda backbone: [sys.executable, "-m", "bench", "run", "--method", "imp", "--sparsity", "0.5",  # noqa: E731
                             "--suite", "ood", "--backbone", backbone, "--max-examples", "24", "--param", "epochs=1",
                             "--param", "batch_size=8", "--out", str(out), "--quiet"]
    proc = subprocess.run(argv(f"bench-test/tiny-{arch}"), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(p.read_text()) for p in (out / "records").glob("*.json")]
    imp = next(r for r in records if r["method"] == "imp")
    assert imp["backbone"] == f"bench-test/tiny-{arch}" and imp["sparsity"]["sparsity"] == pytest.approx(0.5, abs=1e-3)
    missing = subprocess.run(argv("bench-test/not-cached"), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert missing.returncode == 2 and "is not available offline" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
