"""Debiasing losses (docs/design.md section 4). Each takes the main model's logits, gold labels and the
bias model's probabilities p_b for the batch; beta = p_b[gold] is the bias degree.

- ``ce``: CE(p_m, y).
- ``poe``: product of experts (Clark et al. 2019; He et al. 2019): CE(softmax(log p_m + log p_b), y).
- ``reweight``: example reweighting (Schuster et al. 2019): weights (1 - beta), the batch loss
  normalised by the batch's weights.
- ``confreg``: confidence regularisation (Utama et al. 2020): teacher probabilities scaled
  S = p_t^(1 - beta) and renormalised; loss = -sum S log p_m.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LOSSES = ("ce", "poe", "reweight", "confreg")
NEEDS_BIAS = {"poe", "reweight", "confreg"}
NEEDS_TEACHER = {"confreg"}
EPS = 1e-12


def ce(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float(), y)


def poe(logits: torch.Tensor, y: torch.Tensor, p_bias: torch.Tensor) -> torch.Tensor:
    combined = F.log_softmax(logits.float(), -1) + torch.log(p_bias.clamp_min(EPS))
    return F.cross_entropy(combined, y)


def reweight(logits: torch.Tensor, y: torch.Tensor, p_bias: torch.Tensor) -> torch.Tensor:
    w = 1.0 - p_bias.gather(1, y[:, None]).squeeze(1)
    per = F.cross_entropy(logits.float(), y, reduction="none")
    return (w * per).sum() / w.sum().clamp_min(EPS)


def confreg(logits: torch.Tensor, y: torch.Tensor, p_bias: torch.Tensor, p_teacher: torch.Tensor) -> torch.Tensor:
    beta = p_bias.gather(1, y[:, None])
    scaled = p_teacher.clamp_min(EPS) ** (1.0 - beta)
    scaled = scaled / scaled.sum(-1, keepdim=True)
    return -(scaled * F.log_softmax(logits.float(), -1)).sum(-1).mean()
