import pytest

from bench.errors import BenchError
from bench.spec.params import parse_params, split_assignments
from methods.imp import IMPParams


def test_values_are_typed_by_annotation():
    p = parse_params(IMPParams, {"lr": "1e-4", "batch_size": "16", "rewind": "true", "loss": "poe"}, "imp")
    assert (p.lr, p.batch_size, p.rewind, p.loss) == (1e-4, 16, True, "poe")


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"learning_rate": "1"}, "unknown parameter 'learning_rate' for imp"),
        ({"batch_size": "many"}, "parameter 'batch_size' expects int"),
        ({"rewind": "perhaps"}, "parameter 'rewind' expects bool"),
        ({"loss": "focal"}, "unknown loss 'focal'"),
    ],
)
def test_bad_parameters_are_named(raw, message):
    with pytest.raises(BenchError, match=message):
        parse_params(IMPParams, raw, "imp")


def test_assignments_need_an_equals_sign():
    assert split_assignments(["a=1", "b = x"]) == {"a": "1", "b": "x"}
    with pytest.raises(BenchError, match="key=value"):
        split_assignments(["lr"])


def test_a_path_parameter_is_checked_when_the_run_is_resolved(tmp_path):
    """Typed path parameters exist and are readable before anything trains."""
    from dataclasses import dataclass
    from pathlib import Path

    import pytest

    from bench.errors import BenchError
    from bench.spec.params import parse_params

    @dataclass
    class P:
        table: Path | None = None

    assert parse_params(P, {}, "x").table is None
    (tmp_path / "t.csv").write_text("a\n")
    assert parse_params(P, {"table": str(tmp_path / "t.csv")}, "x").table == tmp_path / "t.csv"
    with pytest.raises(BenchError, match="parameter 'table': .*nope.csv does not exist"):
        parse_params(P, {"table": str(tmp_path / "nope.csv")}, "x")
