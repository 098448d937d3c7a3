"""Movement pruning as Sanh et al. 2020 and their released code define it."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

from bench.errors import BenchError
from bench.model.masking import ScoreMask, prunable_linears
from methods.movement import TopKMask, schedule

RECIPE = {"epochs": 2, "batch_size": 8}


@pytest.mark.parametrize("soft", [False, True])
def test_scores_accumulate_minus_weight_times_its_gradient(soft):
    """Sanh et al. 2020, section 4: with W' = W * m(S) and a straight-through m, dL/dS_ij =
    W_ij * dL/dW'_ij, so gradient steps on S from 0 accumulate S = -lr * sum_t W * dL/dW
    (movement's top-k mask and soft movement's threshold alike)."""
    torch.manual_seed(0)
    lin = nn.Linear(6, 4)
    mask = ScoreMask(torch.zeros(4, 6), threshold=-math.inf) if soft else TopKMask(torch.Size((4, 6)))
    parametrize.register_parametrization(lin, "weight", mask)
    mask = lin.parametrizations.weight[0]
    x, lr, expected = torch.randn(16, 6), 0.1, torch.zeros(4, 6)
    for _ in range(3):
        w = lin.parametrizations.weight.original.detach().clone()
        effective = lin.weight  # W' (all kept: m = 1)
        effective.retain_grad()
        (nn.functional.linear(x, effective, lin.bias) ** 2).mean().backward()
        assert torch.allclose(mask.scores.grad, w * effective.grad, atol=1e-7)
        expected -= lr * w * effective.grad
        with torch.no_grad():  # plain gradient steps on the scores, the weights held
            mask.scores -= lr * mask.scores.grad
        mask.scores.grad = None
        lin.parametrizations.weight.original.grad = None
    assert torch.allclose(mask.scores, expected, atol=1e-6)


def test_the_schedule_is_the_released_schedule_threshold():
    """Released masked_run_glue.py: the initial value for initial_warmup * warmup_steps, the final
    one for the last final_warmup * warmup_steps, cubic in between (Zhu and Gupta 2018)."""
    args = dict(total=100, warmup=10, initial=1.0, final=0.1, initial_warmup=1, final_warmup=2)
    assert schedule(10, **args) == 1.0 and schedule(81, **args) == 0.1 and schedule(100, **args) == 0.1
    assert schedule(45, **args) == pytest.approx(0.1 + 0.9 * 0.5**3)  # halfway through the 70 scheduled steps
    values = [schedule(s, **args) for s in range(101)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def test_movement_prunes_each_matrix_to_its_target_while_fine_tuning(runner, run_spec, tiny_bert):
    from bench.model.backbone import load_classifier, resolve

    cand = runner.candidate(run_spec("movement", sparsity=0.5, params=RECIPE))
    assert set(cand.sparsity.per_matrix.values()) == {0.5}  # top half of every matrix's scores (local, as released)
    assert cand.info["best_step"] > 10 - 2 * 1  # kept only once updates ran at the final sparsity (the cool-down)
    pre = load_classifier(resolve(str(tiny_bert)), 3, seed=0)
    name, lin = next(iter(prunable_linears(cand.model).items()))
    kept = lin.weight != 0
    assert not torch.allclose(lin.weight[kept], dict(pre.named_modules())[name].weight[kept])  # the weights trained too
    assert cand.info["kept"][0][0] == "training"


def test_until_it_prunes_movement_trains_the_weights_as_fine_tuning_does(runner, run_spec):
    """At sparsity 0 the mask keeps every weight all along, so movement is fine-tuning with its
    recipe (lr 3e-5 as released, no weight decay) plus scores that change nothing: the
    same weights at the end. What the scores then prune is the schedule's doing, not a
    broken weight update (results/posttraining/findings.md: movement at the CPU budget)."""
    recipe = {**RECIPE, "lr": 3e-5, "weight_decay": 0.0}
    moved = runner.candidate(run_spec("movement", sparsity=0.0, params=recipe))
    tuned = runner.candidate(run_spec("finetune", params={**recipe, "checkpoint_step": 10}))  # movement keeps the last step here
    assert moved.info["best_step"] == 10 and moved.sparsity.sparsity == 0.0
    ours, theirs = prunable_linears(moved.model), prunable_linears(tuned.model)
    for name, lin in ours.items():
        assert torch.allclose(lin.weight, theirs[name].weight, atol=1e-6), name


def test_soft_movement_is_capped_at_its_target_and_says_so(runner, run_spec):
    weak = runner.candidate(run_spec("movement", sparsity=0.5, params={**RECIPE, "soft": True, "final_lambda": 0.0}))
    assert weak.sparsity.sparsity == pytest.approx(0.5, abs=1e-6) and weak.info["capped"] == 12  # no penalty: tau alone
    assert weak.info["sparsity_by_lambda"] < 0.5  # what tau alone pruned, said beside the capped result


def test_distillation_learns_from_the_recipes_fine_tuned_model(runner, run_spec):
    cand = runner.candidate(run_spec("movement", sparsity=0.5, params={**RECIPE, "distil": True}))
    assert cand.sparsity.sparsity == pytest.approx(0.5, abs=1e-6)
    assert run_spec("movement", sparsity=0.5, params={**RECIPE, "distil": True}).params.alpha_distil == 0.5


def test_bad_values_are_refused(run_spec):
    for params, message in (({"final_threshold": 1.5}, "final_threshold in"), ({"temperature": 0}, "temperature positive")):
        with pytest.raises(BenchError, match=message):
            run_spec("movement", sparsity=0.5, params={**RECIPE, **params})


@pytest.mark.parametrize("arch", ["roberta", "distilbert"])
def test_other_architectures(arch, tiny_backbones, tmp_path):
    from bench.core.runner import Runner
    from bench.spec.run import resolve

    runner = Runner(tmp_path / "out", progress=False)
    cand = runner.candidate(resolve("movement", "", backbone=str(tiny_backbones[arch]), sparsity=0.5, max_examples=40,
                                    params=RECIPE))
    assert cand.sparsity.sparsity == pytest.approx(0.5, abs=1e-6)
