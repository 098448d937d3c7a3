import pytest
import torch
from transformers import AutoModelForSequenceClassification

from bench.errors import BenchError
from bench.metrics import check_sparsity
from bench.model.masking import (
    ScoreMask,
    apply_masks,
    bake,
    cubic_sparsity,
    current_masks,
    magnitude_masks,
    prunable_linears,
    sparsity_report,
)


@pytest.fixture
def model(tiny_bert):
    return AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3)


def test_prunable_set_is_six_matrices_per_layer(model):
    names = prunable_linears(model)
    assert len(names) == 2 * 6
    assert not any("classifier" in n or "pooler" in n or "embeddings" in n for n in names)


@pytest.mark.parametrize("s", [0.0, 0.1, 0.5, 0.73, 0.9])
def test_magnitude_masks_meet_the_target_in_every_matrix(model, s):
    apply_masks(model, magnitude_masks(model, s))
    rep = sparsity_report(model)
    for name, lin in prunable_linears(model).items():
        assert rep.per_matrix[name] == round(s * lin.weight.numel()) / lin.weight.numel()
    assert rep.head_sparsity == 0.0
    assert rep.prunable == sum(lin.weight.numel() for lin in prunable_linears(model).values())


def test_masks_keep_largest_magnitudes_and_only_grow(model):
    masks = magnitude_masks(model, 0.3)
    for name, lin in prunable_linears(model).items():
        w = lin.weight.detach().abs()
        assert w[masks[name]].min() >= w[~masks[name]].max()
    apply_masks(model, masks)
    with torch.no_grad():  # make a pruned weight large: it must stay pruned
        lin = next(iter(prunable_linears(model).values()))
        lin.parametrizations.weight.original.mul_(~lin.parametrizations.weight[0].mask * 100 + 1)
    first = current_masks(model)
    apply_masks(model, magnitude_masks(model, 0.6))
    second = current_masks(model)
    for name in first:
        assert not (second[name] & ~first[name]).any(), "a pruned weight came back"


def test_in_place_update_keeps_the_same_parameter_objects(model):
    before = [id(p) for p in model.parameters()]
    apply_masks(model, magnitude_masks(model, 0.2))
    after_first = [id(p) for p in model.parameters()]
    apply_masks(model, magnitude_masks(model, 0.4))
    assert [id(p) for p in model.parameters()] == after_first
    assert set(before) == set(after_first)  # the optimizer built before the first prune still sees them


def test_bake_gives_plain_weights_and_same_outputs(model):
    apply_masks(model, magnitude_masks(model, 0.5))
    model.eval()
    x = torch.randint(0, 1000, (2, 7))
    with torch.no_grad():
        before = model(input_ids=x).logits
    bake(model)
    assert not current_masks(model)
    with torch.no_grad():
        assert torch.equal(model(input_ids=x).logits, before)
    assert sparsity_report(model).sparsity == pytest.approx(0.5, abs=1e-6)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5])
def test_sparsity_outside_unit_interval_is_an_error(bad):
    with pytest.raises(BenchError, match="sparsity must be in"):
        check_sparsity(bad)


@pytest.mark.parametrize("s", [0.0, 0.2, 0.5, 0.7, 0.9, 0.97])
def test_score_mask_reset_meets_the_target_exactly_even_with_ties(s):
    g = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 5, (37, 29), generator=g).float()  # heavy ties
    sm = ScoreMask(scores)
    sm.reset(s)
    assert int((~sm.mask).sum()) == round(s * scores.numel())
    sm.scores.data += 0.3 * torch.randn(37, 29, generator=g)  # training moved the scores
    sm.reset(s)
    assert int((~sm.mask).sum()) == round(s * scores.numel())


def test_score_mask_hard_init_threshold_is_phi_and_gradient_is_straight_through():
    scores = torch.tensor([[0.02, 0.0], [0.0, 0.02]])
    sm = ScoreMask(scores)
    sm.reset(0.5)
    assert sm.threshold.item() == pytest.approx(0.01)  # halfway between alpha*phi and 0
    w = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    out = sm(w)
    assert torch.equal(out, torch.tensor([[1.0, 0.0], [0.0, 4.0]]))
    out.sum().backward()
    assert torch.equal(sm.scores.grad, w)  # dL/dscores = dL/dm = W, pruned weights included


def test_cubic_schedule_hits_its_end_points_and_is_monotone():
    vals = [cubic_sparsity(t, 100, 0.7, 0.9) for t in range(0, 101)]
    assert vals[0] == 0.7 and vals[-1] == 0.9
    assert all(b >= a for a, b in zip(vals, vals[1:], strict=False))
    assert cubic_sparsity(150, 100, 0.7, 0.9) == 0.9  # held after T
    assert cubic_sparsity(50, 100, 0.7, 0.9) == pytest.approx(0.9 - 0.2 * 0.5**3)


def test_parameter_counts_ignore_mask_scores_and_gates(model):
    from torch.nn.utils import parametrize

    from bench.model.masking import HardConcreteMask

    dense = sparsity_report(model)
    for lin in prunable_linears(model).values():
        parametrize.register_parametrization(lin, "weight", ScoreMask(lin.weight.detach().abs()))
    with_scores = sparsity_report(model)
    assert with_scores.total_params == dense.total_params
    bake(model)
    lin = next(iter(prunable_linears(model).values()))
    parametrize.register_parametrization(lin, "weight", HardConcreteMask(torch.zeros_like(lin.weight)))
    assert sparsity_report(model).total_params == dense.total_params
