"""The hub path, offline: models laid out as huggingface_hub's cache lays
them out, loaded by their hub id through the normal --backbone flag with HF_HUB_OFFLINE=1."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REAL_DATA

ROOT = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SHARED = REAL_DATA


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
    # fine-tuning only: every method on every architecture is tests/methods/test_architectures.py
    argv = lambda backbone: [sys.executable, "-m", "bench", "run", "--method", "finetune",  # noqa: E731
                             "--suite", "ood", "--backbone", backbone, "--max-examples", "24", "--param", "epochs=1",
                             "--param", "batch_size=8", "--out", str(out), "--quiet"]
    proc = subprocess.run(argv(f"bench-test/tiny-{arch}"), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(p.read_text()) for p in (out / "records").glob("*.json")]
    (record,) = records
    assert record["backbone"] == f"bench-test/tiny-{arch}" and record["method"] == "finetune"
    if arch == "bert":  # what a missing model says does not depend on the architecture
        missing = subprocess.run(argv("bench-test/not-cached"), cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=600)
        assert missing.returncode == 2 and "is not available offline" in missing.stderr
        assert len(missing.stderr.strip().splitlines()) == 1


def datasets_cache(root: Path, repo_id: str, config: str | None, splits: dict[str, dict[str, list]], labels: list[str]) -> Path:
    """A hub dataset as the ``datasets`` library caches it once prepared
    (``root/<namespace>___<name>/<config>/0.0.0/<hash>/<name>-<split>.arrow`` with its
    dataset_info.json), built offline with the Parquet builder from the given columns."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    work = root.parent / f"build-{repo_id.replace('/', '-')}-{config}"
    work.mkdir(parents=True)
    text = {k: datasets.Value("string") for k in next(iter(splits.values())) if k != "label"}
    features = datasets.Features({**text, "label": datasets.ClassLabel(names=labels)})
    for split, columns in splits.items():
        pq.write_table(pa.table(columns), work / f"{split}.parquet")
    builder = datasets.load_dataset_builder("parquet", data_files={s: str(work / f"{s}.parquet") for s in splits},
                                            features=features, cache_dir=str(work / "cache"))
    builder.download_and_prepare()
    namespace, name = repo_id.split("/")
    target = root / f"{namespace}___{name}" / (config or "default") / "0.0.0" / Path(builder.cache_dir).name
    shutil.copytree(builder.cache_dir, target)
    info = json.loads((target / "dataset_info.json").read_text())
    (target / "dataset_info.json").write_text(json.dumps({**info, "config_name": config or "default", "dataset_name": name}))
    for f in target.glob("parquet-*.arrow"):
        f.rename(target / f.name.replace("parquet-", f"{name}-", 1))
    return root


def _pairs(a: str, b: str, n: int, k: int) -> dict[str, list]:
    return {a: [f"the person {i} walked home" for i in range(n)], b: [f"someone {i} moved" for i in range(n)],
            "label": [i % k for i in range(n)]}


@pytest.mark.skipif(not (SHARED / "hans").is_dir(), reason="needs the real OOD sets ($BENCH_DATA, bench data)")
def test_the_hub_dataset_loaders_read_a_datasets_cache_offline(tmp_path):
    """MNLI (full), QQP, IMDB and FEVER from the hub code path (no --data-dir), labels mapped by name."""
    cache = tmp_path / "datasets"
    datasets_cache(cache, "nyu-mll/glue", "mnli", {s: _pairs("premise", "hypothesis", 60, 3) for s in
                   ("train", "validation_matched")}, ["entailment", "neutral", "contradiction"])
    datasets_cache(cache, "nyu-mll/glue", "qqp", {s: _pairs("question1", "question2", 60, 2) for s in ("train", "validation")},
                   ["not_duplicate", "duplicate"])
    datasets_cache(cache, "stanfordnlp/imdb", "plain_text", {s: {"text": [f"film {i}" for i in range(60)],
                   "label": [i % 2 for i in range(60)]} for s in ("train", "test")}, ["neg", "pos"])
    datasets_cache(cache, "pietrolesci/nli_fever", None, {s: _pairs("premise", "hypothesis", 60, 3) for s in ("train", "dev")},
                   ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"])
    data = tmp_path / "data"  # the OOD test sets (never on the hub here) from the real data, no ID files
    data.mkdir()
    for d in ("hans", "paws", "fever_symmetric"):
        (data / d).symlink_to(SHARED / d)
    code = ("import sys\nfrom pathlib import Path\nfrom bench.registry import TASKS\n"
            "for t in ('mnli_full', 'qqp', 'imdb', 'fever'):\n"
            "    d = TASKS.get(t).load(Path(sys.argv[1]))\n"
            "    print(t, len(d.train) + len(d.dev), len(d.test), sorted({e.label for e in d.test}), d.sources[0].kind)\n")
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code, str(data)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    assert lines == {"mnli_full": "60 60 [0, 1, 2] hub", "qqp": "60 60 [0, 1] hub", "imdb": "60 60 [0, 1] hub",
                     "fever": "60 60 [0, 1, 2] hub"}
