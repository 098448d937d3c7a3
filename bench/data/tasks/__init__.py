"""Tasks: an ID dataset with train / dev / test, its OOD sets and its bias features.

Each task module registers a ``Task`` subclass with ``@TASKS.register(name)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from bench.data.examples import TaskData


class Task(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    # published split sizes (train, dev, test, ood/<set>), for sweep estimates when the data is
    # not on this machine; empty for tasks that are always here
    sizes: ClassVar[dict[str, int]] = {}
    # the gold labels' names, in the order of their ids: what a reader of kept predictions (the
    # site's example browser) shows for "gold 2", without loading the data
    labels: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def load(self, data_dir: Path | None) -> TaskData:
        """All splits, read or generated; raises BenchError naming what is missing."""
