"""FreeLB's adversarial loss (Zhu et al., ICLR 2020): a perturbation of the word embeddings raised
by K ascent steps, the loss of every step averaged into the update. Robust Tickets' mask search
(Zheng et al. 2022) and the dense FreeLB control train with it."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench.api import Context
from bench.errors import BenchError
from bench.model.losses import ce
from bench.model.predict import autocast


@dataclass
class FreeLBParams:
    adv_steps: int = 2  # K ascent steps
    adv_init_mag: float = 0.05
    adv_lr: float = 0.03
    adv_max_norm: float = 0.0  # 0: unbounded (as FreeLB's GLUE settings)

    def check_adv(self) -> None:
        if self.adv_steps < 1:
            raise BenchError(f"adv_steps must be at least 1 (the adversarial loss needs an ascent step), got {self.adv_steps}")
        if self.adv_init_mag < 0 or self.adv_lr <= 0 or self.adv_max_norm < 0:
            raise BenchError("adv_init_mag and adv_max_norm must be >= 0 and adv_lr > 0")


def init_delta(embeds: torch.Tensor, attention: torch.Tensor, magnitude: float, gen: torch.Generator | None = None) -> torch.Tensor:
    """FreeLB's start (Zhu et al. 2020, reference code ``run_glue_freelb.py``, L2 norm type, as the
    Robust Tickets search reuses it): U(-1, 1) noise on real tokens, every element scaled by
    ``magnitude / sqrt(L * d)`` (L real tokens, d hidden size). ``magnitude`` bounds the box, so
    the L2 norm is about magnitude / sqrt(3), not ``magnitude`` itself."""
    mask = attention.unsqueeze(-1).to(embeds.dtype)
    delta = (torch.rand(embeds.shape, generator=gen, device="cpu").to(embeds.device) * 2 - 1) * mask
    dims = attention.sum(1).to(embeds.dtype) * embeds.shape[-1]
    return delta * (magnitude / dims.sqrt().clamp_min(1e-12)).view(-1, 1, 1)


def ascend(delta: torch.Tensor, grad: torch.Tensor, attention: torch.Tensor, step: float, max_norm: float) -> torch.Tensor:
    """One ascent step along the L2-normalised gradient, projected onto ||delta|| <= max_norm."""
    grad = grad * attention.unsqueeze(-1).to(grad.dtype)
    delta = delta + step * grad / grad.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, 1, 1)
    if max_norm > 0:
        norm = delta.flatten(1).norm(dim=1).clamp_min(1e-12)
        delta = delta * (max_norm / norm).clamp(max=1.0).view(-1, 1, 1)
    return delta


def freelb_loss(model, inputs: dict, y: torch.Tensor, a: FreeLBParams, ctx: Context, extra=None,
                record: list | None = None) -> torch.Tensor:
    """FreeLB's K-step adversarial loss; calls backward itself (gradients of every step,
    averaged, accumulate into whatever requires grad). ``extra()`` adds a regulariser once."""
    emb_layer = model.get_input_embeddings()
    attention = inputs["attention_mask"]
    rest = {k: v for k, v in inputs.items() if k != "input_ids"}
    with torch.no_grad():
        delta = init_delta(emb_layer(inputs["input_ids"]), attention, a.adv_init_mag)
    total = torch.zeros((), device=y.device)
    for k in range(a.adv_steps):
        delta.requires_grad_(True)
        with autocast(ctx.device, ctx.precision):
            logits = model(inputs_embeds=emb_layer(inputs["input_ids"]) + delta, **rest).logits
        loss = ce(logits, y) / a.adv_steps
        if extra is not None and k == 0:
            loss = loss + extra()
        loss.backward()
        total = total + loss.detach()
        if record is not None:
            record.append(float(delta.detach().flatten(1).norm(dim=1).max()))
        if k < a.adv_steps - 1:
            delta = ascend(delta.detach(), delta.grad.detach(), attention, a.adv_lr, a.adv_max_norm)
    return total
