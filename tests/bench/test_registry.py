import sys
import textwrap

import pytest

from bench.errors import BenchError
from bench.registry import METHODS, SUITES, TASKS, did_you_mean
from tests.conftest import install_plugin


def test_builtins_come_through_entry_points():
    assert {"finetune", "imp"} <= set(METHODS.names())
    assert {"ood", "adversarial"} <= set(SUITES.names())
    assert {"nli_synth", "mnli", "qqp", "fever"} <= set(TASKS.names())


def test_unknown_name_suggests_the_closest():
    with pytest.raises(BenchError, match="unknown method 'fintune'; did you mean 'finetune'"):
        METHODS.get("fintune")
    assert "choose from" in did_you_mean("zzzz", ["a", "b"])


PLUGIN = '''
from dataclasses import dataclass

from bench.api import Candidate, Method, Suite, SuiteResult
from bench.model.backbone import load_classifier, load_tokenizer


@dataclass
class Params:
    scale: float = 1.0


class Untrained(Method):
    name = "untrained"
    description = "the backbone with a random head (third-party plug-in)"
    Params = Params

    def build(self, ctx, params):
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        return Candidate(model=model, tokenizer=load_tokenizer(ctx.backbone), lineage={})


class CountSuite(Suite):
    name = "count"
    description = "counts test examples (third-party plug-in)"

    def evaluate(self, candidate, ctx):
        return SuiteResult(metrics={"n_test": float(len(ctx.task.test))}, predictions=[])
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    install_plugin(tmp_path, monkeypatch, "my_bench_plugin", PLUGIN, textwrap.dedent("""
        [bench.methods]
        untrained = my_bench_plugin:Untrained
        [bench.suites]
        count = my_bench_plugin:CountSuite
    """))
    yield
    sys.modules.pop("my_bench_plugin", None)


def test_external_plugin_is_found_and_run(plugin, runner, run_spec):
    assert "untrained" in METHODS.names() and "count" in SUITES.names()
    record = runner.run(run_spec("untrained", "count", params={}))
    assert record.method == "untrained" and record.metrics["n_test"] == 40.0
    assert {k for k in record.metrics if k != "n_test"} <= {k for k in record.metrics if k.startswith("eff/")}
    record = runner.run(run_spec("untrained", "ood", params={"scale": "2"}))
    assert record.params == {"scale": 2.0} and "ood/hans_synth" in record.metrics
