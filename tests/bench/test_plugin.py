"""The plug-in helpers: a pruning score in a few lines (issue 28, item 2)."""

import pytest

from bench.plugin import PruneMethod
from bench.registry import METHODS


def test_prune_with_my_score_keeps_the_highest_scores_of_every_matrix(runner, run_spec):
    @METHODS.register("keep_positive")
    class KeepPositive(PruneMethod):
        description = "keeps the largest signed weights"

        def score(self, weight):
            return weight

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
