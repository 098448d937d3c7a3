"""Where the harness keeps things on this machine, outside any output folder: the real evaluation
data (``$BENCH_DATA``) and what it builds once from text (``$BENCH_CACHE``)."""

from __future__ import annotations

import os
from pathlib import Path


def data_home() -> Path:
    """``$BENCH_DATA``, else ``$XDG_DATA_HOME/robust-compression-bench/data`` (by default
    ``~/.local/share/robust-compression-bench/data``): where ``bench data fetch`` puts the real
    sets and where a run looks when no ``--data-dir`` is given."""
    if env := os.environ.get("BENCH_DATA"):
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "robust-compression-bench" / "data"


def default_data_dir() -> str | None:
    """The data folder a run uses when none is given: ``data_home()`` if it exists (else the
    tasks read the hub or generate their data, and say which files they miss)."""
    home = data_home()
    return str(home) if home.is_dir() else None


def cache_dir() -> Path:
    """``$BENCH_CACHE`` or ``~/.cache/robust-compression-bench``."""
    root = Path(os.environ.get("BENCH_CACHE") or Path.home() / ".cache" / "robust-compression-bench")
    root.mkdir(parents=True, exist_ok=True)
    return root
