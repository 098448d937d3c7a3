"""Atomic writes: a file or a directory appears whole under its final name, or not at all.

Every writer stages under a unique temporary name beside the target and renames it, so two
processes building the same artifact (two sweep workers, two users on one cache) never mix
their files: the first rename wins and the other copy is dropped. A one-time artifact that takes
minutes to build (the masked-LM head, a distilled student) is also built under ``exclusive``,
so that the second process waits for the first one's copy instead of building its own.

What appears gets the user's umask (0644 files and 0755 folders by default), not the 0600 / 0700
of a temporary name: records on a shared output folder are for others to read. A temporary name
carries its host and process id, so a run that touches a folder removes what a killed run of
this host left there (a half-saved model of 90 MB) and never what a live one is still writing.

A published folder carries the SHA-256 of each of its files (``SHA256SUMS``, the format of
``sha256sum -c``): a cached model damaged on disk after it was published (a bad copy, a file
zeroed in place with a valid header) is found by ``damage`` when read back, and rebuilt rather
than evaluated.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no lock; atomic_dir still keeps one whole copy
    fcntl = None


def _read_umask() -> int:
    """The process's umask, read without changing it where the system tells (Linux), else set
    and restored at once, before any thread of the harness writes."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


UMASK = _read_umask()
HOST = socket.gethostname().replace(".", "_")


def _tag(name: str) -> str:
    """The prefix of a temporary name beside ``name``: it says which process of which host made it."""
    return f".{name}.{HOST}-{os.getpid()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def clean_stale(folder: Path) -> list[Path]:
    """Remove the temporary files and folders a killed process of this host left in ``folder``
    (their process is gone); those of live processes, and of other hosts sharing the folder,
    stay. Returns what was removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if not (entry.name.startswith(".") and f".{HOST}-" in entry.name):
                continue
            try:
                pid = int(entry.name.split(f".{HOST}-", 1)[1].split("-", 1)[0])
            except (IndexError, ValueError):
                continue
            if pid != os.getpid() and not _alive(pid):
                shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
                removed.append(entry)
    return removed


def _named(e: BaseException, path: Path) -> None:
    """An OSError that names no path (a full disk met by ``write``) names the file it was for,
    so that the user's one line says where (``bench.errors.os_problem``)."""
    if isinstance(e, OSError) and e.errno is not None and e.filename is None:
        e.filename = str(path)


def _same(path: Path, data: bytes) -> bool:
    """Whether ``path`` already holds ``data``: a generated file that did not change is left as
    it is (its time stamp too), so a rebuild after no change rewrites nothing."""
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it over: never a half file; nothing
    is written where ``path`` holds these bytes already."""
    data = data.encode("utf-8") if isinstance(data, str) else data
    if _same(path, data):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_tag(path.name), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), 0o666 & ~UMASK)
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        _named(e, path)
        raise


def save_atomic(path: Path, save: Callable[[Path], None]) -> None:
    """``save(tmp)`` writes a file (a figure, say) to a unique temporary name beside ``path``,
    renamed over it: two processes writing the same file never meet half-way; where ``path``
    holds those bytes already it is left as it is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_tag(path.stem), suffix=path.suffix)  # savers read the suffix
    os.close(fd)
    try:
        save(Path(tmp))
        if _same(path, Path(tmp).read_bytes()):
            Path(tmp).unlink()
            return
        os.chmod(tmp, 0o666 & ~UMASK)
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        _named(e, path)
        raise


@contextlib.contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """A fresh, uniquely named directory beside ``final`` to build in; renamed to ``final`` when
    the block ends without error. If another process published ``final`` first, its copy is
    kept and this one removed (the same inputs built the same thing); on error nothing is left."""
    final.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(final.parent)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=_tag(final.name), suffix=".tmp"))
    try:
        yield tmp
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        _named(e, final)
        raise
    _seal(tmp)
    _open_up(tmp)
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not final.is_dir():
            raise


SUMS = "SHA256SUMS"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != SUMS)


def _seal(folder: Path) -> None:
    lines = [f"{sha256_file(folder / name)}  {name}\n" for name in _files(folder)]
    (folder / SUMS).write_text("".join(lines))


def damage(folder: Path) -> str | None:
    """Why the published ``folder`` cannot be trusted (no checksums, a file missing, added or
    changed since it was published), or None when every file matches its checksum."""
    try:
        listed = dict(reversed(line.split("  ", 1)) for line in (folder / SUMS).read_text().splitlines())
    except OSError:
        return f"it has no {SUMS} (made before checksums were kept, or not by the harness)"
    except ValueError:
        return f"its {SUMS} is malformed"
    present = _files(folder)
    if extra := sorted(set(present) - set(listed)):
        return f"{extra[0]} was added after it was published"
    for name, expected in listed.items():
        if name not in present:
            return f"{name} is missing"
        if sha256_file(folder / name) != expected:
            return f"{name} does not match its checksum"
    return None


def intact(folder: Path, log: Callable[[str], None] | None = None) -> bool:
    """Whether ``folder`` was published whole and is unchanged since. A damaged one is said (to
    ``log``, else stderr) and removed, so that the caller builds it again instead of using it."""
    if not folder.is_dir():
        return False
    if (why := damage(folder)) is None:
        return True
    (log or (lambda line: print(line, file=sys.stderr)))(f"[bench] {folder} is not used and is built again: {why}")
    discard(folder)
    return False


def discard(folder: Path) -> None:
    """Remove a published folder: renamed away first (readers of its name never see half of
    it), then deleted."""
    aside = Path(tempfile.mkdtemp(dir=folder.parent, prefix=_tag(folder.name), suffix=".tmp"))
    with contextlib.suppress(FileNotFoundError):
        os.replace(folder, aside / folder.name)
    shutil.rmtree(aside, ignore_errors=True)


def _open_up(folder: Path) -> None:
    """The umask's modes for a folder built under a temporary name and everything in it."""
    for root, _dirs, files in os.walk(folder):
        os.chmod(root, 0o777 & ~UMASK)
        for f in files:
            p = os.path.join(root, f)
            os.chmod(p, (0o777 if os.access(p, os.X_OK) else 0o666) & ~UMASK)


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


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@contextlib.contextmanager
def swap_dir(final: Path) -> Iterator[Path]:
    """A fresh directory beside ``final`` to build a whole folder in (a site), put in place of
    ``final`` when the block ends without error: a reader, or a kill mid-build, never sees old
    and new files mixed. Where the build equals what ``final`` holds, nothing is replaced, so
    a rebuild after no change rewrites no file."""
    final.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(final.parent)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=_tag(final.name), suffix=".tmp"))
    try:
        yield tmp
        if final.is_dir() and _tree(final) == _tree(tmp):
            shutil.rmtree(tmp)
            return
        _open_up(tmp)
        old = Path(tempfile.mkdtemp(dir=final.parent, prefix=_tag(final.name), suffix=".tmp"))
        if final.exists():
            os.rename(final, old / "old")
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        _named(e, final)
        raise
