"""The plug-in helpers: a pruning score in a few lines."""

import pytest

from bench.plugin import PruneMethod
from bench.registry import METHODS


def test_prune_with_my_score_keeps_the_highest_scores_of_every_matrix(runner, run_spec):
    @METHODS.register("keep_positive")
    class KeepPositive(PruneMethod):
        description = "keeps the largest signed weights"

        def score(self, layer):
            return layer.weight

    try:
        cand = runner.candidate(run_spec("keep_positive", sparsity=0.5, params={"epochs": 1, "batch_size": 8,
                                                                                "retrain_epochs": 1}))
        assert cand.sparsity.sparsity == pytest.approx(0.5, abs=1e-3)
        start = runner.candidate(run_spec("finetune", params={"epochs": 1, "batch_size": 8}))
        assert cand.info["start_model"] == start.lineage["key"]  # pruned from the recipe's fine-tuned model
        for name, mask in cand.masks.items():
            w = dict(start.model.named_modules())[name].weight.detach()
            assert int(mask.sum()) == mask.numel() // 2 and w[mask].min() >= w[~mask].max()  # the top half by the score
    finally:
        METHODS._items.pop("keep_positive", None)


def test_an_exception_in_a_plugin_names_the_plugin_and_its_package_in_one_line(tmp_path, capsys, monkeypatch):
    """Not a BenchError: one line naming the plug-in, its package and version, and where; the
    whole traceback with --debug."""
    import methods.finetune
    from bench.cli import main

    monkeypatch.setenv("BENCH_DEBUG", "")  # off, and undone after the test whatever --debug sets
    namespace = vars(methods.finetune)  # defined in the plug-in's own module, as its code would be
    exec("def broken_build(self, ctx, p):\n    raise ValueError('the plug-in broke')\n", namespace)
    monkeypatch.setattr(methods.finetune.Finetune, "build", namespace.pop("broken_build"))
    argv = ["run", "--method", "finetune", "--suite", "ood", "--max-examples", "24", "--out", str(tmp_path), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "method plug-in 'finetune' of package robust-compression-bench" in err[0]
    assert "raised ValueError: the plug-in broke" in err[0] and "--debug for the traceback" in err[0]
    assert main(["--debug", *argv]) == 2
    assert "Traceback (most recent call last)" in capsys.readouterr().err
