import json

import numpy as np
import pytest

from bench.core.runner import torch_device
from bench.errors import BenchError
from bench.model.predict import predict_logits
from bench.spec.run import grid
from bench.store.atomic import write_atomic
from bench.store.records import load_predictions


def test_imp_run_writes_record_with_reference_and_provenance(runner, run_spec):
    rec = runner.run(run_spec("imp", sparsity=0.5))
    assert rec.sparsity["target"] == 0.5 and rec.sparsity["sparsity"] == pytest.approx(0.5, abs=1e-6)
    assert rec.sparsity["prunable"] == 2 * (3 * 32 * 32 + 32 * 32 + 2 * 32 * 64)
    assert set(rec.sparsity["per_matrix"].values()) == {0.5}
    assert rec.reference and rec.reference.startswith("nli_synth__finetune")
    assert "f_bias/hans" in rec.metrics and "ood/hans_synth/subsequence/non-entailment" in rec.metrics
    prov = rec.provenance
    assert prov["config"]["seed"] == 0 and prov["versions"]["torch"] and prov["device"]["type"] == "cpu"
    assert prov["memory"]["peak_rss_mb"] > 100  # the process's peak resident memory, MB
    assert any(s["sha256"] for s in prov["data"]["sources"])
    assert prov["plugins"]["method"]["module"] == "methods.imp"
    records = sorted((runner.out / "records").glob("*.json"))
    assert len(records) == 2  # the run and its full-model reference
    preds = load_predictions(runner.out / "records", rec)
    assert len(preds) == 40 + 40  # test + OOD, capped by max_examples
    assert {"set", "uid", "gold", "pred", "probs"} <= set(preds[0])
    assert sum(preds[0]["probs"]) == pytest.approx(1.0, abs=1e-3)
    assert rec.predictions.endswith(".jsonl.gz") and len(rec.predictions_sha256) == 64


def test_f_bias_matches_the_two_records(runner, run_spec):
    from bench.metrics import f_bias

    rec = runner.run(run_spec("finetune", params={"loss": "poe", "epochs": 2, "batch_size": 8}))
    ref = runner.run(run_spec("finetune"))
    assert rec.reference == ref.run_id and ref.reference == ref.run_id
    assert rec.baseline == ref.baseline == ref.artifact["key"]  # the candidate the table compares with
    assert rec.variant == ["batch_size=8"] and ref.variant == rec.variant  # loss is in the label, epochs at its default
    assert "params" not in rec.provenance["config"] and rec.params["loss"] == "poe"  # stored once, in full
    m, r = rec.metrics, ref.metrics
    expected = f_bias(m["id"], m["pool/hans"], r["id"], r["pool/hans"])
    if np.isnan(expected):
        assert m["f_bias/hans"] is None  # written as null, never as a number
    else:
        assert m["f_bias/hans"] == pytest.approx(expected)
    assert r["f_bias/hans"] in (1.0, None)


def test_reference_follows_the_recipe_not_the_loss(runner, run_spec):
    from bench.spec.requires import reference_of

    spec = run_spec("imp", sparsity=0.5, params={"loss": "poe", "epochs": 3, "batch_size": 8, "rewind": True})
    ref = reference_of(spec)
    assert ref.method == "finetune" and ref.sparsity is None and ref.suite == spec.suite
    assert ref.config()["params"] == {"epochs": 3.0, "batch_size": 8}


def test_records_are_strict_json(runner, run_spec):
    import math

    from bench.store.records import load_record

    rec = runner.run(run_spec("finetune"))
    path = runner.out / "records" / f"{rec.run_id}.json"
    json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert load_record(path).run_id == rec.run_id
    assert not any(isinstance(v, float) and math.isnan(v) for v in rec.metrics.values())


def test_rerun_skips_finished_records_and_reuses_artifacts(runner, run_spec, monkeypatch):
    first = runner.run(run_spec("finetune"))
    import methods.finetune as ft

    monkeypatch.setattr(ft.Finetune, "build", lambda *a, **k: pytest.fail("rebuilt a cached candidate"))
    again = runner.run(run_spec("finetune"))
    assert again.run_id == first.run_id and again.metrics == first.metrics
    one_pool = runner.run(run_spec("finetune", suite_params={"pools": "hans"}))  # same artifact, another evaluation
    assert one_pool.run_id != first.run_id and one_pool.metrics["ood/hans_synth"] == first.metrics["ood/hans_synth"]


def test_cached_candidate_gives_the_same_logits(runner, run_spec):
    spec = run_spec("imp", sparsity=0.3)
    built = runner.candidate(spec)
    loaded = runner.candidate(spec)
    task = runner.task_data(spec)
    a = predict_logits(built.model, built.tokenizer, task.test, 64, torch_device(spec))
    b = predict_logits(loaded.model, loaded.tokenizer, task.test, 64, torch_device(spec))
    assert np.allclose(a, b, atol=1e-5)
    assert {k: v.sum() for k, v in loaded.masks.items()} == {k: v.sum() for k, v in built.masks.items()}


def test_a_cached_checkpoint_damaged_in_place_is_built_again_and_never_evaluated(runner, run_spec, monkeypatch, capsys):
    """4 MB of embedding weights zeroed under a valid safetensors header: the folder's checksums
    catch it, and the candidate is rebuilt, never evaluated."""
    import methods.finetune as ft

    spec = run_spec("finetune")
    cand = runner.candidate(spec)
    task = runner.task_data(spec)
    good = predict_logits(cand.model, cand.tokenizer, task.test, 64, torch_device(spec))
    weights = runner.out / "artifacts" / cand.lineage["key"] / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 4: len(data) // 2] = bytes(len(data) // 2 - len(data) // 4)  # the header stays valid
    weights.write_bytes(bytes(data))
    builds, real = [], ft.Finetune.build
    monkeypatch.setattr(ft.Finetune, "build", lambda self, *a: builds.append(1) or real(self, *a))
    again = runner.candidate(spec)
    assert builds == [1] and "model.safetensors does not match its checksum" in capsys.readouterr().err
    assert np.allclose(predict_logits(again.model, again.tokenizer, task.test, 64, torch_device(spec)), good, atol=1e-5)
    assert runner.candidate(spec) and builds == [1]  # the rebuilt copy is whole, and reused


def test_a_cached_folder_says_what_changed_since_it_was_published(tmp_path):
    from bench.store.atomic import atomic_dir, damage

    art = tmp_path / "artifact"
    with atomic_dir(art) as d:
        (d / "a.bin").write_bytes(b"weights")
        (d / "sub").mkdir()
        (d / "sub" / "b.json").write_text("{}")
    assert damage(art) is None
    (art / "sub" / "b.json").write_text("{ }")
    assert damage(art) == "sub/b.json does not match its checksum"
    (art / "sub" / "b.json").write_text("{}")
    (art / "extra").write_text("")
    assert damage(art) == "extra was added after it was published"
    (art / "extra").unlink()
    (art / "a.bin").unlink()
    assert damage(art) == "a.bin is missing"
    (art / "SHA256SUMS").unlink()
    assert "has no SHA256SUMS" in damage(art)


def test_an_unreadable_checkpoint_whose_checksums_match_is_a_clear_error(runner, run_spec):
    from bench.store import atomic

    spec = run_spec("finetune")
    cand = runner.candidate(spec)
    art = runner.out / "artifacts" / cand.lineage["key"]
    (art / "model.safetensors").write_bytes(b"not a safetensors file")
    atomic._seal(art)  # as if it had been saved so (another library version's format)
    with pytest.raises(BenchError, match="unreadable.*delete that directory"):
        runner.candidate(spec)


def test_a_changed_plugin_builds_a_new_candidate_and_records_name_their_plugins(runner, run_spec, monkeypatch):
    """A plug-in edited and rerun with --force builds anew instead of reusing its stale cached model."""
    import bench.registry
    import methods.finetune as ft

    spec = run_spec("finetune")
    first = runner.run(spec)
    plugins = first.provenance["plugins"]
    assert plugins["method"]["package"] == "robust-compression-bench" and plugins["method"]["module"] == "methods.finetune"
    assert plugins["suite"]["module"] == "suites.ood" and plugins["task"]["module"] == "bench.data.tasks.synthetic"
    assert len(plugins["method"]["code"]) == 16 and plugins["method"]["version"]
    builds, real = [], ft.Finetune.build
    monkeypatch.setattr(ft.Finetune, "build", lambda self, *a: builds.append(1) or real(self, *a))
    assert runner.run(spec, force=True) and builds == []  # same code: the cached model
    monkeypatch.setattr(bench.registry, "code_hash", lambda module: "0" * 16)  # the plug-in's source edited
    again = runner.run(spec, force=True)
    assert builds == [1] and again.artifact["key"] != first.artifact["key"]


def test_a_plugins_code_hash_covers_the_modules_of_its_package_it_uses(tmp_path, monkeypatch):
    import importlib
    import sys

    from bench.registry import code_hash

    pkg = tmp_path / "myplug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "kit.py").write_text("def helper():\n    return 1\n")
    (pkg / "other.py").write_text("X = 1\n")
    (pkg / "method.py").write_text("from myplug.kit import helper\n\nclass M:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def fresh() -> str:
        for name in [m for m in sys.modules if m == "myplug" or m.startswith("myplug.")]:
            del sys.modules[name]
        importlib.import_module("myplug.method")
        importlib.import_module("myplug.other")
        return code_hash.__wrapped__("myplug.method")

    before = fresh()
    (pkg / "other.py").write_text("X = 2\n")  # not used by the plug-in
    assert fresh() == before
    (pkg / "kit.py").write_text("def helper():\n    return 2\n")
    assert fresh() != before


def test_expand_makes_one_run_per_sparsity_and_seed():
    specs = grid(method="imp", suite="ood", sparsity=[0.2, 0.5], seed=[0, 1, 2], params={"loss": "poe"})
    assert len(specs) == 6 and {s.sparsity for s in specs} == {0.2, 0.5}
    assert specs[0].params.loss == "poe" and specs[0].config()["params"] == {"loss": "poe"}
    with pytest.raises(BenchError, match="dense and takes no --sparsity"):
        grid(method="finetune", suite="ood", sparsity=[0.5], seed=[0])
    with pytest.raises(BenchError, match=r"sparsity must be in \[0, 1\)"):
        grid(method="imp", suite="ood", sparsity=[1.0], seed=[0])


def test_write_atomic_leaves_no_partial_file(tmp_path):
    target = tmp_path / "r.json"
    write_atomic(target, "old")


    with pytest.raises(TypeError):
        write_atomic(target, 123)  # fails while writing
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_short_imp_run_still_reaches_its_target(runner, run_spec):
    rec = runner.run(run_spec("imp", sparsity=0.5, params={"epochs": 1, "batch_size": 40}))  # one step in all
    assert rec.method_info["train_steps"] == 1
    assert rec.sparsity["sparsity"] == pytest.approx(0.5, abs=1e-6)


def test_nan_loss_stops_with_a_clear_error(runner, run_spec):
    with pytest.raises(BenchError, match="loss became nan"):
        runner.run(run_spec("finetune", params={"lr": 1e30, "epochs": 2, "batch_size": 8, "max_grad_norm": 1e30}))


def test_comma_separated_parameters_expand_into_a_grid(tiny_bert):
    specs = grid(method="srnet", suite="ood", sparsity=[0.2, 0.5], seed=[0, 1], backbone=str(tiny_bert),
                 params={"loss": "ce,poe", "init": "hard"})
    assert len(specs) == 2 * 2 * 2
    assert {(s.params.loss, s.sparsity, s.seed) for s in specs} == {
        (loss, sp, seed) for loss in ("ce", "poe") for sp in (0.2, 0.5) for seed in (0, 1)}
    assert all(s.params.init == "hard" for s in specs)


def test_a_constant_candidate_is_flagged_in_its_record_and_fails_the_run(tiny_bert, tmp_path, monkeypatch, capsys):
    """Zheng et al.'s controls: a model answering one class is flagged degenerate in its
    record and on the leaderboard, with a warning; a sweep (a study) with one fails."""
    import torch

    from bench.cli import main
    from bench.store.records import load_records
    from methods.finetune import Finetune

    real = Finetune.build

    def constant(self, ctx, p):
        cand = real(self, ctx, p)
        with torch.no_grad():
            cand.model.classifier.weight.zero_()
            cand.model.classifier.bias.copy_(torch.tensor([10.0, 0.0, 0.0]))
        return cand

    monkeypatch.setattr(Finetune, "build", constant)
    out = tmp_path / "out"
    code = main(["run", "--method", "finetune", "--suite", "ood", "--backbone", str(tiny_bert), "--max-examples", "40",
                 "--param", "epochs=1", "--param", "batch_size=8", "--out", str(out), "--quiet"])
    assert code == 0
    assert "bench: warning: 1 of 1 candidates did not learn the task" in capsys.readouterr().err
    (record,) = load_records(out / "records")
    assert record.degenerate.startswith("predicts class 0 on 100.0%")
    assert "DEGENERATE" in (out / "LEADERBOARD.md").read_text()
    spec = tmp_path / "study.toml"
    spec.write_text(f'[defaults]\nbackbone = "{tiny_bert}"\nmax_examples = 40\nsuite = "ood"\n'
                    '[[group]]\nmethod = "finetune"\nparams = { epochs = 1, batch_size = 8 }\n')
    assert main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 2
    assert "bench: error: 1 of 1 candidates did not learn the task" in capsys.readouterr().err


def test_running_uncommitted_code_is_said_before_the_run_and_kept_in_its_record(tiny_bert, tmp_path, monkeypatch, capsys):
    """A record from a tree with uncommitted changes has no commit that holds its code: the user
    hears it before the jobs start, not from the leaderboard's header after."""
    from bench.cli import main
    from bench.core import provenance
    from bench.store.records import load_records

    argv = ["run", "--method", "finetune", "--suite", "ood", "--backbone", str(tiny_bert), "--max-examples", "40",
            "--param", "epochs=1", "--param", "batch_size=8", "--out", str(tmp_path), "--quiet"]
    monkeypatch.setattr(provenance, "git_state", lambda: {"commit": "0123456789abcdef", "dirty": True})
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "bench: warning: the code at 0123456 has uncommitted changes" in err
    (record,) = load_records(tmp_path / "records")
    assert record.provenance["git"] == {"commit": "0123456789abcdef", "dirty": True}
    assert main(argv) == 0 and "uncommitted" not in capsys.readouterr().err  # nothing left to run
    monkeypatch.setattr(provenance, "git_state", lambda: {"commit": "0123456789abcdef", "dirty": False})
    assert main([*argv, "--force"]) == 0 and "uncommitted" not in capsys.readouterr().err
