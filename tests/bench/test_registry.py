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


def test_a_plugin_that_fails_to_import_is_named_and_the_rest_still_works(tmp_path, monkeypatch, capsys):
    """A warning naming the plug-in and its package; `bench ls` and the
    built-ins still work; asking for the broken one is a one-line error that says why."""
    from bench.cli import main

    install_plugin(tmp_path, monkeypatch, "broken_bench_plugin", "import no_such_dependency_xyz\n",
                   "[bench.methods]\nbroken = broken_bench_plugin\n")
    try:
        assert main(["ls"]) == 0
        captured = capsys.readouterr()
        assert "bench: warning: method plug-in 'broken' of package broken-bench-plugin" in captured.err
        assert "ModuleNotFoundError" in captured.err and "finetune" in captured.out
        assert main(["run", "--method", "broken", "--suite", "ood", "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("bench: error: method plug-in 'broken' of package broken-bench-plugin")
    finally:
        sys.modules.pop("broken_bench_plugin", None)
        METHODS.refresh()


BAD_SUITE = '''
import math
from bench.api import Suite, SuiteResult
from bench.registry import SUITES


@SUITES.register("nan_suite")
class NaNSuite(Suite):
    description = "returns a metric that is not a number"
    def evaluate(self, candidate, ctx):
        return SuiteResult(metrics={"score": math.nan}, predictions=[])


@SUITES.register("stray_rows")
class StrayRows(Suite):
    description = "returns a row for an example it did not evaluate"
    def sets(self, task, params):
        return {"test": task.test}
    def evaluate(self, candidate, ctx):
        return SuiteResult(metrics={"score": 1.0}, predictions=[{"set": "test", "uid": "not-an-example", "gold": 0}])
'''


@pytest.mark.parametrize("suite, message", [("nan_suite", "metric 'score' is nan, not a finite number"),
                                            ("stray_rows", "prediction row test/not-an-example is not one of")])
def test_a_plugin_that_breaks_the_contract_is_named(tmp_path, monkeypatch, runner, run_spec, suite, message):
    install_plugin(tmp_path, monkeypatch, "bad_bench_suite", BAD_SUITE, "[bench.suites]\nbad = bad_bench_suite\n")
    try:
        with pytest.raises(BenchError, match=f"suite '{suite}' broke its contract: {message}"):
            runner.run(run_spec("finetune", suite))
        assert not list((runner.out / "records").glob(f"*__{suite}__*"))
    finally:
        sys.modules.pop("bad_bench_suite", None)
        SUITES.refresh()
