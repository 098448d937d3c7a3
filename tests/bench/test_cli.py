"""Bad input: one line naming the problem on stderr, exit code 2, no traceback."""

import shutil
import subprocess
import sys

import pytest

from bench.cli import main
from bench.errors import BenchError


def _err(capsys, argv) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--method", "fintune", "--suite", "ood"], "unknown method 'fintune'; did you mean 'finetune'?"),
        (["--method", "imp", "--suite", "oodd"], "unknown suite 'oodd'; did you mean 'ood'?"),
        (["--method", "imp", "--suite", "ood", "--task", "mnl"], "unknown task 'mnl'; did you mean 'mnli'?"),
        (["--method", "imp", "--suite", "ood", "--param", "lrr=1"], "unknown parameter 'lrr' for method 'imp'; did you mean 'lr'?"),
        (["--method", "imp", "--suite", "ood", "--sparsity", "1.2"], "sparsity must be in [0, 1), got 1.2"),
        (["--method", "imp", "--suite", "ood", "--sparsity", "-0.1"], "sparsity must be in [0, 1), got -0.1"),
    ],
)
def test_bad_names_and_values(capsys, tmp_path, argv, message):
    assert message in _err(capsys, ["run", *argv, "--out", str(tmp_path)])


def test_missing_data_directory(capsys, tmp_path):
    err = _err(capsys, ["run", "--method", "finetune", "--suite", "ood", "--task", "mnli",
                        "--data-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path)])
    assert "does not exist" in err


def test_missing_data_file(capsys, tmp_path):
    err = _err(capsys, ["run", "--method", "finetune", "--suite", "ood", "--task", "mnli",
                        "--data-dir", str(tmp_path), "--out", str(tmp_path)])
    assert "MNLI dev-matched: none of mnli/dev_matched.tsv" in err


@pytest.mark.parametrize(
    "content, message",
    [
        ("index\tpremise\tgold_label\n1\ta\tentailment\n", "missing column hypothesis / sentence2"),
        ("index\tpremise\thypothesis\tgold_label\n1\ta\tb\tyes\n", "unknown label 'yes'"),
    ],
)
def test_malformed_data_file(capsys, tmp_path, content, message):
    (tmp_path / "mnli").mkdir()
    (tmp_path / "mnli" / "dev_matched.tsv").write_text(content)
    err = _err(capsys, ["run", "--method", "finetune", "--suite", "ood", "--task", "mnli",
                        "--data-dir", str(tmp_path), "--out", str(tmp_path / "o")])
    assert message in err and "dev_matched.tsv" in err


def test_unreadable_checkpoint(capsys, tmp_path, tiny_bert):
    bad = tmp_path / "bad_ckpt"
    shutil.copytree(tiny_bert, bad)
    (bad / "model.safetensors").write_bytes(b"\x00garbage")
    err = _err(capsys, ["run", "--method", "finetune", "--suite", "ood", "--backbone", str(bad),
                        "--max-examples", "24", "--out", str(tmp_path / "o"), "--quiet"])
    assert f"checkpoint {bad}" in err and "unreadable" in err


def test_backbone_not_available_offline(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    err = _err(capsys, ["run", "--method", "finetune", "--suite", "ood", "--backbone", "no-such-org/no-such-model",
                        "--max-examples", "8", "--out", str(tmp_path), "--quiet"])
    assert "not available offline" in err and "--backbone DIR" in err


def test_ls_lists_parameters_and_defaults(capsys):
    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    assert "imp" in out and "rewind (bool) = False" in out and "nli_synth" in out and "pools (str)" in out


def test_leaderboard_without_records_is_an_error(capsys, tmp_path):
    assert "no records directory" in _err(capsys, ["leaderboard", "--out", str(tmp_path)])


def test_module_entry_point_exits_non_zero_without_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench", "run", "--method", "nope", "--suite", "ood",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("bench: error: unknown method 'nope'")
    assert "Traceback" not in proc.stderr


def test_usage_errors_are_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench", "run", "--method", "imp", "--seed", "x"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "the following arguments are required: --suite" in proc.stderr


def test_unwritable_output_directory(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert "is not writable" in _err(capsys, ["run", "--method", "finetune", "--suite", "ood", "--out", str(blocker / "runs")])


@pytest.mark.parametrize("param, message", [("epochs=inf", "'epochs' must be a positive finite"),
                                             ("max_grad_norm=0", "'max_grad_norm' must be a positive finite"),
                                             ("lr=nan", "'lr' must be a positive finite")])
def test_degenerate_training_parameters(capsys, tmp_path, param, message):
    assert message in _err(capsys, ["run", "--method", "finetune", "--suite", "ood", "--param", param, "--out", str(tmp_path)])


def test_too_few_examples_for_the_bias_model(capsys, tmp_path, tiny_bert):
    err = _err(capsys, ["run", "--method", "finetune", "--suite", "ood", "--param", "loss=poe", "--backbone", str(tiny_bert),
                        "--max-examples", "3", "--out", str(tmp_path), "--quiet"])
    assert "every label needs at least 2: raise --max-examples" in err  # the cap is refused before the bias model


@pytest.mark.parametrize(
    "params, message",
    [
        (["schedule=gradual", "init_sparsity=0.7"], "final sparsity 0.5 is below init_sparsity 0.7"),
        (["init=hadr"], "parameter 'init' got 'hadr'; did you mean 'hard'?"),
        (["paradigm=rewound"], "parameter 'paradigm' got 'rewound'; did you mean 'rewind'?"),
        (["start_loss=foo"], "unknown start_loss 'foo'"),
        (["ood_mix=-1"], "ood_mix must be a fraction"),
    ],
)
def test_srnet_bad_parameters(capsys, tmp_path, params, message):
    argv = ["run", "--method", "srnet", "--suite", "ood", "--sparsity", "0.5", "--out", str(tmp_path)]
    for p in params:
        argv += ["--param", p]
    assert message in _err(capsys, argv)


def test_a_backbone_whose_weight_names_do_not_match_stops_instead_of_training_random_weights(capsys, tmp_path, tiny_bert):
    """A checkpoint saved under another prefix would load with every encoder weight at its random
    initial value, and train. It stops instead: one line naming a few missing weights and what
    the file has instead, exit 2. A good backbone's record carries the
    fingerprint of the weights it loaded."""
    from safetensors.torch import load_file, save_file

    from bench.model.backbone import load_classifier, resolve

    moved = tmp_path / "moved"
    shutil.copytree(tiny_bert, moved)
    weights = load_file(moved / "model.safetensors")
    save_file({f"model.encoder_stack.{k}": v for k, v in weights.items()}, moved / "model.safetensors")
    err = _err(capsys, ["run", "--method", "finetune", "--suite", "ood", "--backbone", str(moved),
                        "--max-examples", "24", "--out", str(tmp_path / "o"), "--quiet"])
    assert "weights are not in the checkpoint" in err and "model.encoder_stack." in err and "another prefix" in err
    good = load_classifier(resolve(str(tiny_bert)), 3, seed=0)
    again = load_classifier(resolve(str(tiny_bert)), 3, seed=1)  # another head, the same backbone weights
    assert good.config.bench_loaded_weights == again.config.bench_loaded_weights
    with pytest.raises(BenchError, match="refusing to train from random weights"):
        load_classifier(resolve(str(moved)), 3, seed=0)


def test_a_leaderboard_that_cannot_be_written_does_not_hide_the_failed_jobs(capsys, tmp_path, monkeypatch):
    """A leaderboard that cannot be written does not hide the 'N of M jobs failed' line."""
    import bench.cli
    import bench.core.batch
    from bench.core.executors import Outcome

    (tmp_path / "records").mkdir()
    monkeypatch.setattr(bench.core.batch, "run_batch", lambda runs, out, **kw: [
        Outcome("a", True, 1.0, "run-a", "evaluate a"), Outcome("b", False, 1.0, "it broke", "build b")])

    def refuse(out, output=None):
        raise BenchError("run x is in a and b with different results: keep one")

    monkeypatch.setattr(bench.cli, "write_leaderboard", refuse)
    assert main(["sweep", "sweeps/smoke.toml", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no leaderboard: run x is in a and b" in err and "1 of 2 jobs failed; first: build b: it broke" in err


def test_the_leaderboards_commands_come_through_the_registry(capsys):
    """bench imports no leaderboard module: its subcommands are entry points (bench.commands)."""
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    assert all(name in shown for name in ("leaderboard", "claims", "plan", "headline", "publish", "conformance"))
    assert main(["claims", "/no/such/study"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error:") and len(err.strip().splitlines()) == 1


def test_a_runs_fields_are_declared_once_in_the_run_spec():
    """bench run's options, a sweep spec's keys and their kinds, and the configuration a run id
    hashes are all read from RunSpec's fields: a new field needs no other list."""
    from bench.cli import _parser
    from bench.spec.run import FIELD_NAMES, TYPES, resolve
    from bench.spec.sweep import RUN_KEYS

    run = next(a for a in _parser()._subparsers._group_actions[0].choices["run"]._actions if a.dest == "method").container
    options = {a.dest for a in run._actions} - {"help", "out", "force", "quiet", "dry_run", "executor", "workers",
                                                "cpus_per_job", "ray_address"}
    assert options == set(FIELD_NAMES) == set(RUN_KEYS) == set(TYPES)
    config = resolve("finetune", "ood", check_backbone=False).config()
    assert set(config) == set(FIELD_NAMES) - {"compile", "reference"}  # later fields are left out at their defaults: ids stay
    with pytest.raises(BenchError, match="unknown run field 'sparsty'; did you mean 'sparsity'"):
        resolve("imp", "ood", sparsty=0.5)


def test_rescore_of_a_folder_of_studies_rescores_each_study_once(tmp_path, capsys):
    """`bench rescore results/*` meets results/by-task, which holds a studies.toml, no records."""
    from pathlib import Path

    study = Path(__file__).resolve().parents[2] / "results" / "quickstart"
    for part in ("records", "predictions"):
        shutil.copytree(study / part, tmp_path / "q" / part)
    (tmp_path / "group").mkdir()
    (tmp_path / "group" / "studies.toml").write_text('studies = ["../q"]\n')
    assert main(["rescore", str(tmp_path / "group"), str(tmp_path / "q")]) == 0
    out = capsys.readouterr().out
    assert out.count("20 records, 20 re-scored exactly") == 1


def test_an_exception_from_a_plugins_parameters_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    """Outside a job too (resolving a run), a plug-in's own exception names the plug-in in one line."""
    from tests.conftest import install_plugin

    source = (
        "from dataclasses import dataclass\n"
        "from bench.plugin import LossMethod\n"
        "from bench.train.loop import TrainParams\n"
        "@dataclass\n"
        "class P(TrainParams):\n"
        "    def __post_init__(self):\n"
        "        raise ValueError('my parameters are broken')\n"
        "class Fragile(LossMethod):\n"
        "    Params = P\n"
        "    description = 'breaks'\n"
        "    def loss(self, logits, y):\n"
        "        return logits.sum()\n"
    )
    install_plugin(tmp_path, monkeypatch, "bench_fragile", source, "[bench.methods]\nfragile = bench_fragile:Fragile\n")
    assert main(["run", "--method", "fragile", "--suite", "ood", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "method plug-in 'fragile' of package bench-fragile 0.1 raised ValueError" in err[0]
