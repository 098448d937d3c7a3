"""Running it: the runner (candidate -> suite -> record), the candidate cache, records and provenance."""
