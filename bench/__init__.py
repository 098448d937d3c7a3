"""robust-compression bench: run compression methods, judge them with suites, rank the records."""

__version__ = "0.1.0"
