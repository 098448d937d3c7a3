import math

import pytest
import torch

from bench.model import losses


def test_poe_is_ce_of_summed_log_probabilities():
    logits = torch.tensor([[2.0, 0.0, -1.0]])
    p_b = torch.tensor([[0.7, 0.2, 0.1]])
    y = torch.tensor([1])
    pm = torch.softmax(logits, -1)[0]
    joint = pm * p_b[0] / (pm * p_b[0]).sum()
    assert losses.poe(logits, y, p_b).item() == pytest.approx(-math.log(joint[1].item()), rel=1e-5)


def test_poe_with_uniform_bias_is_plain_ce():
    logits = torch.randn(4, 3)
    y = torch.tensor([0, 1, 2, 1])
    assert losses.poe(logits, y, torch.full((4, 3), 1 / 3)).item() == pytest.approx(losses.ce(logits, y).item(), rel=1e-5)


def test_reweight_normalises_by_the_batch_weights():
    logits = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    y = torch.tensor([0, 0])
    p_b = torch.tensor([[0.9, 0.1], [0.4, 0.6]])  # beta = 0.9, 0.4 -> weights 0.1, 0.6
    ce = torch.nn.functional.cross_entropy(logits, y, reduction="none")
    expected = (0.1 * ce[0] + 0.6 * ce[1]) / 0.7
    assert losses.reweight(logits, y, p_b).item() == pytest.approx(expected.item(), rel=1e-5)


def test_confreg_scales_teacher_by_one_minus_bias_degree():
    logits = torch.tensor([[0.5, -0.5]])
    y = torch.tensor([0])
    p_b = torch.tensor([[0.75, 0.25]])
    p_t = torch.tensor([[0.9, 0.1]])
    s = torch.tensor([0.9 ** 0.25, 0.1 ** 0.25])
    s = s / s.sum()
    expected = -(s * torch.log_softmax(logits[0], -1)).sum()
    assert losses.confreg(logits, y, p_b, p_t).item() == pytest.approx(expected.item(), rel=1e-5)
