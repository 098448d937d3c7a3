"""The one exception type users see: the CLI prints its message on one line and exits non-zero."""


class BenchError(Exception):
    """A problem with the user's input or environment (not a bug in the harness)."""
