"""Each task declares its labels' names without loading its data (``Task.labels``): the site's
example browser shows "gold positive", not "gold 1", from the registry alone. They must be the
names, in the order of their ids, that the task's data gives."""

from __future__ import annotations

import pytest

from bench.errors import BenchError
from bench.registry import TASKS
from tests.conftest import REAL_DATA


@pytest.mark.parametrize("name", sorted(TASKS.names()))
def test_a_tasks_declared_labels_are_the_ones_its_data_gives(name):
    task = TASKS.get(name)
    assert task.labels, f"{name} declares no label names"
    try:
        data = task.load(REAL_DATA)
    except BenchError as e:  # a task whose files this machine lacks
        pytest.skip(f"{name}: {str(e)[:80]}")
    assert tuple(data.labels) == tuple(task.labels)
