"""RMC (Du et al. 2023): its formulas by hand, and each objective end to end on the tiny BERT."""

import math

import numpy as np
import pytest
import torch

from bench.errors import BenchError
from methods.rmc import difficulty, distill_loss, focal_loss, jtt_weights, smooth, weighted_ce

P = {"epochs": 2, "batch_size": 8, "sparsities": "0.2:0.5"}


def test_difficulty_lies_in_alpha_1_with_the_extremes_at_min_and_max_variance():
    v = np.array([0.3, 0.1, 0.9, 0.5])
    d = difficulty(v, 0.2)
    assert d.min() == pytest.approx(0.2) and d.max() == pytest.approx(1.0)
    assert d.argmin() == v.argmin() and d.argmax() == v.argmax()
    assert d[0] == pytest.approx(0.2 + 0.8 * (0.3 - 0.1) / 0.8)
    assert np.all(np.diff(d[np.argsort(v)]) >= 0)


def test_smoothing_keeps_the_teacher_at_d1_and_tends_to_uniform_as_d_goes_to_0():
    p = torch.tensor([[0.7, 0.2, 0.1], [0.05, 0.9, 0.05]])
    assert torch.allclose(smooth(p, torch.ones(2)), p)
    assert torch.allclose(smooth(p, torch.full((2,), 1e-6)), torch.full((2, 3), 1 / 3), atol=1e-5)
    half = smooth(p, torch.tensor([0.5, 0.5]))
    expected = torch.sqrt(p) / torch.sqrt(p).sum(1, keepdim=True)
    assert torch.allclose(half, expected)


def test_distillation_loss_by_hand():
    logits = torch.tensor([[2.0, 0.0, 0.0]])
    target = torch.tensor([[0.5, 0.25, 0.25]])
    q = torch.softmax(logits, -1)[0]
    ce = -math.log(q[0])
    kl = sum(t * math.log(t / qi) for t, qi in zip(target[0].tolist(), q.tolist(), strict=True))
    assert distill_loss(logits, torch.tensor([0]), target, 0.9).item() == pytest.approx(0.1 * ce + 0.9 * kl, rel=1e-5)


def test_focal_loss_value_and_its_hand_derived_gradient():
    """Du et al. 2023, appendix C: FL_i = -(1 - p_i)^gamma / mean_k (1 - p_k)^gamma * log p_i. With
    one example (logits (z, 0), gold 0, p = sigmoid(z)) the normaliser is the constant (1 - p)^gamma,
    and differentiating the modulating factor as Lin et al. 2017 do gives
    d/dz = [gamma p (1 - p)^gamma log p - (1 - p)^(gamma + 1)] / (1 - p)^gamma = gamma p log p - (1 - p)
    (a detached factor would give plain cross-entropy's -(1 - p))."""
    logits = torch.tensor([[3.0, 0.0], [0.0, 0.5], [1.0, 1.0], [-2.0, 2.0]])
    y = torch.tensor([0, 0, 1, 1])
    p_y = torch.softmax(logits, -1).gather(1, y[:, None]).squeeze(1)
    raw = (1 - p_y) ** 2
    assert focal_loss(logits, y, 2.0).item() == pytest.approx((-(raw / raw.mean()) * p_y.log()).mean().item(), rel=1e-6)
    z = torch.tensor([[0.7, 0.0]], requires_grad=True)
    focal_loss(z, torch.tensor([0]), 2.0).backward()
    p = torch.sigmoid(torch.tensor(0.7)).item()
    assert z.grad[0, 0].item() == pytest.approx(2 * p * math.log(p) - (1 - p), rel=1e-5)


def test_jtt_weights_are_fixed_over_the_training_set_not_per_batch():
    wrong = torch.tensor([True, False, False, False, True, False])
    j = jtt_weights(wrong, 2.0)
    assert j.mean().item() == pytest.approx(1.0) and j[0] == pytest.approx(2 * j[1])
    assert j[0].item() == pytest.approx(2 / (8 / 6))  # normalised once, over all six examples
    logits, y = torch.tensor([[3.0, 0.0], [0.0, 0.5]]), torch.tensor([0, 1])
    assert weighted_ce(logits, y, torch.ones(2)).item() == pytest.approx(torch.nn.functional.cross_entropy(logits, y).item())


USES = {  # which of the method's loss pieces each objective must call (and no other)
    "rmc": {"smooth", "distill_loss"}, "distil": {"smooth", "distill_loss"}, "smooth": {"smooth", "distill_loss"},
    "focal": {"focal_loss"}, "jtt": {"jtt_weights", "weighted_ce"}, "vanilla": set(),
}


@pytest.mark.parametrize("objective", ["rmc", "vanilla", "distil", "smooth", "focal", "jtt"])
def test_every_objective_trains_an_imp_student(runner, run_spec, objective, monkeypatch):
    import methods.rmc as rmc

    calls: dict[str, list] = {name: [] for name in ("smooth", "distill_loss", "focal_loss", "jtt_weights", "weighted_ce")}
    for name in calls:
        real = getattr(rmc, name)
        monkeypatch.setattr(rmc, name, lambda *a, _real=real, _name=name: calls[_name].append(a) or _real(*a))
    rec = runner.run(run_spec("rmc", sparsity=0.4, params={**P, "objective": objective}))
    assert rec.label.startswith(objective)
    assert {name for name, c in calls.items() if c} == USES[objective]
    loss_calls = calls["distill_loss"] or calls["weighted_ce"] or calls["focal_loss"]
    assert len(loss_calls) in ((0,) if objective == "vanilla" else (rec.method_info["train_steps"],))
    if calls["smooth"]:
        d = calls["smooth"][0][1]  # one exponent per training example
        if objective == "rmc":
            assert d.min().item() == pytest.approx(0.5) and d.max().item() == pytest.approx(1.0)
        else:
            assert torch.all(d == (1.0 if objective == "distil" else 0.9))
    assert rec.sparsity["sparsity"] == pytest.approx(0.4, abs=1e-3)
    if objective == "jtt":  # Liu et al. 2021: a separately trained ERM model picks the errors, not the teacher
        assert rec.method_info["jtt_first_model"] != rec.method_info["teacher"]
        assert len(calls["jtt_weights"]) == 1  # fixed weights, set once for the training set, not per batch
    assert rec.method_info["teacher"].startswith("finetune-")
    if objective == "rmc":
        assert rec.method_info["alpha"] == 0.5 and rec.method_info["stage1_sparsities"] == [0.2, 0.5]
        assert 0.5 <= rec.method_info["difficulty_mean"] <= 1.0


def test_truncated_student_keeps_half_the_layers(runner, run_spec):
    cand = runner.candidate(run_spec("rmc", sparsity=0.0, params={**P, "student": "truncated", "objective": "distil"}))
    assert cand.model.config.num_hidden_layers == 1 and cand.info["student"] == "first 1 of 2 layers"


@pytest.mark.parametrize(
    "params, sparsity, message",
    [
        ({"alpha": 1.5}, 0.4, r"alpha must be in \(0, 1\]"),
        ({"alpha": -0.2}, 0.4, r"alpha must be in \(0, 1\]"),
        ({"sparsities": "0.5"}, 0.4, "at least two pruned models"),
        ({"student": "truncated", "student_layers": 5}, 0.0, "more than the teacher's 2 layers"),
        ({"student": "truncated"}, 0.4, "pass --sparsity 0"),
        ({"loss": "poe"}, 0.4, "not loss="),
    ],
)
def test_bad_input(runner, run_spec, tiny_bert, params, sparsity, message):
    from bench.spec.run import grid

    with pytest.raises(BenchError, match=message):
        specs = grid(method="rmc", suite="ood", sparsity=[sparsity], seed=[0], backbone=str(tiny_bert), params={**P, **params},
                     max_examples=40)
        runner.candidate(specs[0])
