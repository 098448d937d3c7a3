"""Issue 103: every run field and method or suite parameter is checked by its declared type,
the same way in both front doors (``bench run``'s text, a sweep spec's TOML), before anything
runs; an error of the operating system is one line naming the path and the cause."""

import errno
import os

import pytest

from bench.cli import main
from bench.errors import os_problem
from bench.registry import failure
from bench.spec.run import grid
from bench.spec.sweep import load_spec, runs
from bench.store.atomic import write_atomic

# (bench run's options, the same in a sweep group, what both say); the group is imp judged by ood
BAD = [
    (["--max-examples", "0"], "max_examples = 0", "max_examples must be at least 1, got 0"),
    (["--max-examples", "16.7"], "max_examples = 16.7", "max_examples expects int (a whole number), got"),
    (["--seed", "99999999999999999999"], "seed = 99999999999999999999",
     "seed must be in [0, 4294967296), got 99999999999999999999"),
    (["--seed", "1.5"], "seed = 1.5", "seed expects int (a whole number), got"),
    (["--seed", "true"], "seed = true", "seed expects int (a whole number), got"),
    (["--seed", "-1"], "seed = -1", "seed must be in [0, 4294967296), got -1"),
    (["--sparsity", "1"], "sparsity = 1", "sparsity must be in [0, 1), got 1.0"),
    (["--sparsity", "true"], "sparsity = true", "sparsity expects float (a number), got"),
    (["--sparsity", "nan"], "sparsity = nan", "sparsity must be in [0, 1), got nan"),
    (["--device", "tpu"], 'device = "tpu"', "unknown device 'tpu'; choose cpu or cuda"),
    (["--precision", "fp16"], 'precision = "fp16"', "unknown precision 'fp16'; choose fp32 or bf16"),
    (["--backbone", ""], 'backbone = ""', "backbone expects a name, got ''"),
    (["--param", "epochs=true"], "params = { epochs = true }", "parameter 'epochs' expects float (a number), got"),
    (["--param", "rewind=1"], "params = { rewind = 1 }", "parameter 'rewind' expects bool (true or false), got"),
    (["--param", "batch_size=16.7"], "params = { batch_size = 16.7 }", "parameter 'batch_size' expects int (a whole number), got"),
    (["--param", "batch_size=16.0"], "params = { batch_size = 16.0 }", "parameter 'batch_size' expects int (a whole number), got"),
    (["--param", "batch_size=16.7,8"], "params = { batch_size = [16.7, 8] }", "parameter 'batch_size' expects int (a whole number), got"),
    (["--param", "start=pretraind"], 'params = { start = "pretraind" }',
     "parameter 'start' got 'pretraind'; did you mean 'pretrained'?"),
    (["--suite", "adversarial", "--suite-param", "n=2.5"], 'suite = "adversarial"\nsuite_params = { n = 2.5 }',
     "parameter 'n' expects int (a whole number), got"),
]


def _one_line(capsys, argv) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err and "bug" not in err, err
    return err.removeprefix("bench: error: ")


@pytest.mark.parametrize("argv, line, message", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_a_bad_value_is_refused_alike_by_the_command_line_and_a_sweep_spec(tmp_path, capsys, monkeypatch, argv, line,
                                                                           message):
    """The same one line from both doors, before any job: up to ", got" (text there, a TOML
    value here) the two messages are the same words. (A value let through would meet the
    missing backbone, checked last: never a training run.)"""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    by_run = _one_line(capsys, ["run", "--method", "imp", "--suite", "ood", "--backbone", str(tmp_path / "none"), *argv,
                                "--out", str(tmp_path / "run")])
    spec = tmp_path / "spec.toml"
    spec.write_text(f'[[group]]\nmethod = "imp"\nsuite = "ood"\n{line}\n'.replace('suite = "ood"\nsuite =', "suite ="))
    by_sweep = _one_line(capsys, ["sweep", str(spec), "--dry-run", "--out", str(tmp_path / "sweep")])
    assert by_sweep.startswith(f"sweep spec {spec}: group 1: ")  # refused when the spec is loaded
    by_sweep = by_sweep.split("group 1: ", 1)[1]
    assert message in by_run and message in by_sweep
    assert by_run.split(", got")[0] == by_sweep.split(", got")[0]
    assert not (tmp_path / "run").exists() and not (tmp_path / "sweep").exists()


def test_text_and_typed_values_give_the_same_runs(tmp_path):
    """`--seed 0 --max-examples 5 --param rewind=True` and a spec's `seed = 0` ... are one run:
    0 is a value (the seed, not "no seed"), 2 and 2.0 the same epochs."""
    text = grid(method="imp", suite="ood", seed=["0", "3"], sparsity=["0.5"], max_examples="5",
                params={"epochs": "2", "rewind": "True", "start": "pretrained"}, check_backbone=False)
    spec = tmp_path / "spec.toml"
    spec.write_text('[[group]]\nmethod = "imp"\nsuite = "ood"\nseed = [0, 3]\nsparsity = 0.5\nmax_examples = 5\n'
                    'params = { epochs = 2, rewind = true, start = "pretrained" }\n')
    typed = runs(load_spec(spec), check_backbones=False)
    assert [r.key() for r in text] == [r.key() for r in typed]
    assert [(r.seed, r.max_examples, r.params.epochs, r.params.rewind) for r in typed] == [(0, 5, 2.0, True), (3, 5, 2.0, True)]


def test_the_sweeps_seed_and_sparsity_options_are_typed_as_the_fields(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text('[[group]]\nmethod = "imp"\nsuite = "ood"\nseed = [0, 1]\n')
    for option, message in ((["--seed", "x"], "--seed x: seed expects int (a whole number), got 'x'"),
                            (["--seed", "99999999999999999999"], "seed must be in [0, 4294967296)"),
                            (["--sparsity", "1.5"], "--sparsity 1.5: sparsity must be in [0, 1), got 1.5")):
        assert message in _one_line(capsys, ["sweep", str(spec), "--dry-run", *option])
    assert main(["sweep", str(spec), "--dry-run", "--seed", "1"]) == 0  # "1" is the spec's 1


@pytest.mark.parametrize("code, verb", [(errno.ENOSPC, "cannot write"), (errno.EROFS, "cannot write"),
                                        (errno.EACCES, "cannot access")])
def test_an_os_error_is_its_path_and_cause(code, verb):
    e = OSError(code, os.strerror(code), "/x/y")
    assert os_problem(e) == f"{verb} /x/y: {os.strerror(code)}"
    assert failure(e) == os_problem(e)  # in a job, whoever met it
    assert os_problem(OSError("a library's own words")) is None and os_problem(ValueError("x")) is None


def test_a_genuine_bug_still_says_bug():
    try:
        None.split()  # noqa: B018 (the harness's own bug)
    except AttributeError as e:
        assert "(a bug in the harness)" in failure(e)


def test_a_full_disk_met_by_write_names_the_file(tmp_path, monkeypatch):
    """write() on a full disk raises ENOSPC without a path: the atomic writer adds its target."""
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as caught:
        write_atomic(tmp_path / "records" / "r.json", "{}")
    assert os_problem(caught.value) == f"cannot write {tmp_path / 'records' / 'r.json'}: No space left on device"
    assert list((tmp_path / "records").iterdir()) == []  # no half file left


@pytest.mark.parametrize("door", ["run", "sweep"])
def test_a_full_disk_during_a_job_is_one_line_not_a_bug(tmp_path, capsys, monkeypatch, tiny_bert, door):
    """A job that meets a full disk (here: caching its candidate) fails with the path and the
    cause, in bench run and in bench sweep; exit 2."""
    from bench.core.runner import Runner

    where = tmp_path / "out" / "artifacts" / "x"

    def full(self, spec):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(where))

    monkeypatch.setattr(Runner, "candidate", full)
    args = ["--out", str(tmp_path / "out"), "--quiet"]
    if door == "run":
        argv = ["run", "--method", "finetune", "--suite", "ood", "--backbone", str(tiny_bert), "--max-examples", "24", *args]
    else:
        spec = tmp_path / "spec.toml"
        spec.write_text(f'[[group]]\nmethod = "finetune"\nsuite = "ood"\nbackbone = "{tiny_bert}"\nmax_examples = 24\n')
        argv = ["sweep", str(spec), *args]
    assert _one_line(capsys, argv).endswith(f"cannot write {where}: No space left on device")


@pytest.mark.parametrize("raised, said", [
    (OSError(errno.EROFS, os.strerror(errno.EROFS), "/ro/runs"), f"bench: error: cannot write /ro/runs: {os.strerror(errno.EROFS)}"),
    (TypeError("unhashable"), "(a bug in the harness)"),
])
def test_the_top_level_tells_the_environment_from_a_bug(tmp_path, capsys, monkeypatch, raised, said):
    def boom(path):
        raise raised

    monkeypatch.setattr("bench.spec.sweep.load_spec", boom)
    assert main(["sweep", str(tmp_path / "spec.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1
    assert ("bug" in err) == isinstance(raised, TypeError)
