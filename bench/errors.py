"""The one exception type users see: the CLI prints its message on one line and exits non-zero."""

import errno


class BenchError(Exception):
    """A problem with the user's input or environment (not a bug in the harness)."""


class MissingData(BenchError):
    """Local data files are absent (as opposed to present but wrong): a hub may stand in."""


_WRITES = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}


def os_problem(e: BaseException) -> str | None:
    """An error of the operating system (a full disk, a read-only file system, a permission) in
    one line naming the path and the cause: the environment's problem, not a bug in the harness;
    None for any other exception, an OSError without an errno included (a library's own
    message, which ``bench.registry.failure`` attributes)."""
    if not isinstance(e, OSError) or e.errno is None:
        return None
    cause = e.strerror or errno.errorcode.get(e.errno, str(e.errno))
    verb = "cannot write" if e.errno in _WRITES else "cannot access"
    path = " -> ".join(str(p) for p in (e.filename, e.filename2) if p is not None)
    return f"{verb} {path}: {cause}" if path else f"{verb}: {cause}"
