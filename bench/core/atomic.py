"""Atomic writes: a file or a directory appears whole under its final name, or not at all.

Every writer stages under a unique temporary name beside the target and renames it, so two
processes building the same artifact (two sweep workers, two users on one cache) never mix
their files: the first rename wins and the other copy is dropped. A one-time artifact that takes
minutes to build (the masked-LM head, a distilled student) is also built under ``exclusive``,
so that the second process waits for the first one's copy instead of building its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no lock; atomic_dir still keeps one whole copy
    fcntl = None


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it over: never a half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_atomic(path: Path, save: Callable[[Path], None]) -> None:
    """``save(tmp)`` writes a file (a figure, say) to a unique temporary name beside ``path``,
    renamed over it: two processes writing the same file never meet half-way."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix)
    os.close(fd)
    try:
        save(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """A fresh, uniquely named directory beside ``final`` to build in; renamed to ``final`` when
    the block ends without error. If another process published ``final`` first, its copy is
    kept and this one removed (the same inputs built the same thing); on error nothing is left."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp"))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not final.is_dir():
            raise


@contextlib.contextmanager
def exclusive(target: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``target``'s lock file (``.<name>.lock`` beside it) for the
    block: processes that would build the same artifact take turns, and the one that comes second
    re-checks and finds it built. The operating system releases the lock when a process dies."""
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = target.parent / f".{target.name}.lock"
    try:  # never truncated, never followed through a symlink
        fd: int | None = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as e:  # another user's lock file, or a symlink: build without it (the rename stays atomic)
        print(f"[bench] cannot lock {lock} ({e.strerror}): building without the lock", file=sys.stderr)
        fd = None
    try:
        if fd is not None and fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)
