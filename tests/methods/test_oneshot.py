"""One-shot pruning (magnitude, Wanda, SparseGPT), each rule as its paper writes it, and the
calibration pass they share."""

from __future__ import annotations

import pytest
import torch

from bench.errors import BenchError
from bench.model.oneshot import Layer, keep_mask, sparsegpt
from bench.plugin import PruneMethod
from bench.registry import METHODS
from bench.spec.run import resolve

RECIPE = {"epochs": 2, "batch_size": 8}


def _params(method: str, **kw):
    return METHODS.get(method).Params(**kw)


def _layer(out=6, inp=8, seed=0, correlated=False, n=256):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, inp, generator=g)
    if correlated:  # features that move together, as a real layer's inputs do
        x = x @ (torch.eye(inp) + 0.9 * torch.randn(inp, inp, generator=g)) * torch.linspace(0.2, 3.0, inp)
    w = torch.randn(out, inp, generator=g)
    return Layer("l", w, (x**2).sum(0).div(n).sqrt(), 2 * x.T @ x / n), x


def test_wanda_scores_weight_times_input_norm_and_compares_within_each_output_row():
    """Sun et al. 2023, equation 1: S_ij = |W_ij| * ||X_j||_2; section 3: the comparison group is
    each output (row), where magnitude pruning compares within the whole layer."""
    layer, _ = _layer()
    layer.input_norm = torch.tensor([10.0, 0.1, 1, 1, 1, 1, 1, 1])
    kept = METHODS.get("wanda").prune(layer, 0.5, _params("wanda")) != 0
    score = layer.weight.abs() * layer.input_norm
    assert (kept.sum(1) == 4).all()  # half of every row, whatever the other rows hold
    for row, keep in zip(score, kept, strict=True):
        assert row[keep].min() >= row[~keep].max()
    assert kept[:, 0].all() and not kept[:, 1].any()  # a large input feature protects small weights
    mag = METHODS.get("magnitude").prune(layer, 0.5, _params("magnitude")) != 0
    assert mag.sum() == 24 and layer.weight.abs()[mag].min() >= layer.weight.abs()[~mag].max()  # per matrix
    assert mag.sum(1).tolist() != [4] * 6  # so rows end with different counts


@pytest.mark.parametrize("pattern", ["unstructured", "2:4"])
def test_sparsegpt_reconstructs_a_correlated_layer_better_than_magnitude_and_wanda(pattern):
    """Frantar and Alistarh 2023, section 3: pruning with the optimal-brain-surgeon update from
    the Hessian of the layer's inputs gives a lower layer-wise reconstruction error
    ||WX - W'X||^2 than keeping the surviving weights as they are (magnitude, Wanda), at 50 %
    unstructured and at 2:4; with nothing to prune it changes nothing."""
    for seed in range(3):
        layer, x = _layer(out=16, inp=32, correlated=True, seed=seed)
        err = {}
        for name in ("magnitude", "wanda", "sparsegpt"):
            new = METHODS.get(name).prune(layer, 0.5, _params(name, pattern=pattern))
            assert (new == 0).float().mean() >= 0.5
            err[name] = ((x @ layer.weight.T - x @ new.T) ** 2).sum().item()
        assert err["sparsegpt"] < 0.9 * min(err["wanda"], err["magnitude"]), err
        if pattern == "unstructured":
            assert err["sparsegpt"] < 0.5 * err["magnitude"] and err["wanda"] < err["magnitude"], err  # the inputs' scale counts
    assert torch.allclose(sparsegpt(layer, 0.0, None), layer.weight, atol=1e-4)


@pytest.mark.parametrize("pattern,n,m", [("2:4", 2, 4), ("4:8", 4, 8)])
def test_n_of_every_m_consecutive_weights_of_a_row_are_kept(pattern, n, m):
    """N:M semi-structured sparsity (Sun et al. 2023 section 4; Frantar and Alistarh 2023 section 3.3):
    in every group of M consecutive input weights of a row, exactly M - N are zero."""
    layer, _ = _layer(out=8, inp=16, correlated=True)
    for name in ("magnitude", "wanda", "sparsegpt"):
        new = METHODS.get(name).prune(layer, 1 - n / m, _params(name, pattern=pattern))
        zeros = (new == 0).reshape(8, -1, m).sum(2)
        assert (zeros == m - n).all(), name
    with pytest.raises(BenchError, match="multiple of 8"):
        keep_mask(torch.ones(2, 12), 0.5, "row", (4, 8))


def test_sparsegpt_keeps_the_released_codes_defaults_and_checks_its_hessian():
    """The released sparsegpt.py: fasterprune(blocksize=128, percdamp=.01); an N:M group never
    straddles two column blocks."""
    p = _params("sparsegpt")
    assert (p.blocksize, p.percdamp, p.calibration, p.retrain_epochs) == (128, 0.01, 128, 0.0)
    with pytest.raises(BenchError, match="multiple of the pattern's M"):
        _params("sparsegpt", pattern="4:8", blocksize=12)
    layer, _ = _layer()
    with pytest.raises(BenchError, match="Hessian"):
        sparsegpt(Layer("l", layer.weight, layer.input_norm), 0.5, None)


@pytest.mark.parametrize("method", ["magnitude", "wanda", "sparsegpt"])
def test_each_prunes_the_recipes_fine_tuned_model_in_one_shot(method, runner, run_spec):
    cand = runner.candidate(run_spec(method, sparsity=0.5, params=RECIPE))
    start = runner.candidate(run_spec("finetune", params=RECIPE))
    assert cand.sparsity.sparsity == pytest.approx(0.5, abs=0.02) and cand.sparsity.sparsity >= 0.5 - 1e-3
    assert cand.info["start_model"] == start.lineage["key"] and cand.info["calibration"] == 40  # the whole capped split
    assert "kept" not in cand.info  # nothing trained
    if method != "sparsegpt":  # no weight update: every kept weight is the start model's
        for name, mask in cand.masks.items():
            before = dict(start.model.named_modules())[name].weight.detach()
            after = dict(cand.model.named_modules())[name].weight.detach()
            assert torch.equal(after[mask], before[mask])


def test_a_pattern_fixes_the_sparsity_and_bad_values_are_refused(run_spec):
    assert run_spec("wanda", sparsity=0.5, params={**RECIPE, "pattern": "2:4"}).sparsity == 0.5
    for params, sparsity, message in (({"pattern": "2:4"}, 0.7, "keeps 2 of every 4 weights: --sparsity 0.5"),
                                      ({"pattern": "4:3"}, 0.5, "pattern must be"),
                                      ({"retrain_epochs": -1}, 0.5, "retrain_epochs must be at least 0"),
                                      ({"calibration": 0}, 0.5, "calibration must be at least 1"),
                                      ({"start": "imp"}, 0.5, "start must be")):
        with pytest.raises(BenchError, match=message):
            run_spec("wanda", sparsity=sparsity, params={**RECIPE, **params})


def test_each_block_is_calibrated_on_the_outputs_of_the_blocks_pruned_before_it(run_spec, runner):
    """Wanda's prune_wanda and SparseGPT's sequential pass: block l's statistics are gathered
    with blocks < l already pruned, so a rule that empties block 0 changes what block 1 sees."""
    from bench.model.oneshot import calibration_sample, prune_sequentially

    start = runner.candidate(run_spec("finetune", params=RECIPE))
    task = runner.task_data(run_spec("finetune", params=RECIPE))
    seen = {}

    def record(empty_first):
        def rule(layer):
            seen[(empty_first, layer.name)] = layer.input_norm.clone()
            return torch.zeros_like(layer.weight) if empty_first and ".layer.0." in layer.name else layer.weight
        return rule

    import copy

    sample = calibration_sample(task.train, 16, 0)
    for empty in (False, True):
        prune_sequentially(copy.deepcopy(start.model), start.tokenizer, sample, 64, torch.device("cpu"), record(empty), False)
    q0, q1 = "bert.encoder.layer.0.attention.self.query", "bert.encoder.layer.1.attention.self.query"
    assert torch.equal(seen[(False, q0)], seen[(True, q0)])  # block 0 saw the same inputs
    assert not torch.allclose(seen[(False, q1)], seen[(True, q1)])  # block 1 saw block 0 pruned
    assert calibration_sample(task.train, 16, 0) == sample and calibration_sample(task.train, 16, 1) != sample


@pytest.mark.parametrize("arch", ["roberta", "distilbert"])
def test_other_architectures(arch, tiny_backbones, tmp_path):
    from bench.core.runner import Runner

    runner = Runner(tmp_path / "out", progress=False)
    for method in ("wanda", "sparsegpt"):
        cand = runner.candidate(resolve(method, "", backbone=str(tiny_backbones[arch]), sparsity=0.5, max_examples=40,
                                        params={**RECIPE, "pattern": "2:4"}))
        assert cand.sparsity.sparsity == pytest.approx(0.5, abs=1e-6)


def test_a_checkpoint_is_pruned_as_it_is_and_compared_with_itself(runner, tiny_bert, tmp_path):
    from tests.methods.test_checkpoint import _checkpoint

    ckpt = _checkpoint(tiny_bert, tmp_path / "ckpt", ["entailment", "neutral", "contradiction"])
    rec = runner.run(resolve("wanda", "ood", backbone=str(ckpt), sparsity=0.5, max_examples=40, params={"start": "checkpoint"}))
    start = runner.candidate(resolve("checkpoint", "", backbone=str(ckpt), max_examples=40))
    assert rec.label == "wanda (from checkpoint)" and rec.method_info["start_model"] == start.lineage["key"]
    assert rec.baseline == start.lineage["key"]  # its table's reference is the checkpoint it pruned


def test_an_outside_wanda_is_a_few_lines_of_its_own(runner, run_spec):
    """docs/plugins.md's example: the public prune helper hands the score each layer's weight and
    input statistics, and retrain_epochs=0 means no retraining."""
    @METHODS.register("my_wanda")
    class MyWanda(PruneMethod):
        description = "Wanda, as an outside user writes it"
        group = "row"

        def score(self, layer):
            return layer.weight.abs() * layer.input_norm

    try:
        mine = runner.candidate(run_spec("my_wanda", sparsity=0.5, params={**RECIPE, "retrain_epochs": 0}))
        theirs = runner.candidate(run_spec("wanda", sparsity=0.5, params=RECIPE))
        assert mine.masks.keys() == theirs.masks.keys()
        assert all(torch.equal(mine.masks[k], theirs.masks[k]) for k in mine.masks)
    finally:
        METHODS._items.pop("my_wanda", None)
