"""The task's test pairs with an irrelevant clause appended to the premise: the gold label stays."""
from dataclasses import replace

from bench.plugin import ExamplesSuite
from bench.registry import SUITES


@SUITES.register("distractor")
class Distractor(ExamplesSuite):
    description = "test pairs with an irrelevant clause appended to the premise"

    def load(self, task, params):
        return {"distracted": [replace(e, uid=f"d-{e.uid}", text_a=f"{e.text_a} and the sky was blue") for e in task.test]}
