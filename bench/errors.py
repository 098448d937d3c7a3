"""The one exception type users see: the CLI prints its message on one line and exits non-zero."""


class BenchError(Exception):
    """A problem with the user's input or environment (not a bug in the harness)."""


class MissingData(BenchError):
    """Local data files are absent (as opposed to present but wrong): a hub may stand in."""
