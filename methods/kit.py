"""What methods share, so that no method imports another: the fine-tuned start model they ask
for, IMP's pruning schedule (SRNet appendix A.1.1) as a training hook, and rewinding to the
pre-trained weights (the lottery tickets of Frankle and Carbin 2019, Chen et al. 2020)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from bench.model.masking import apply_masks, magnitude_masks
from bench.plugin import finetuned  # noqa: F401  (re-exported: one definition for methods and plug-ins)

PRUNE_FRACTION = 0.1  # of the original weights, every PRUNE_EVERY of training
PRUNE_EVERY = 0.1


def prune_rounds(sparsity: float) -> int:
    """How many prunes of 10 % of the original weights reach ``sparsity``."""
    return math.ceil(round(sparsity / PRUNE_FRACTION, 6))


def prune_schedule(sparsity: float, total_steps: int) -> list[tuple[int, float]]:
    """[(step, sparsity after pruning at that step)]: SRNet's algorithm 1 prunes 10 % of the
    original weights at t = 0 and every Delta_t = 0.1 t_max until the target (on short runs
    several prunes share a step, and the last, the highest, wins)."""
    return [(min(total_steps - 1, int(round(k * PRUNE_EVERY * total_steps))), min((k + 1) * PRUNE_FRACTION, sparsity))
            for k in range(prune_rounds(sparsity))]


class IMPHook:
    """``on_step`` prunes by magnitude on the schedule; ``select_from`` admits only checkpoints
    after the last prune (at the target sparsity); ``steps`` are the prune steps taken."""

    def __init__(self, model, sparsity: float) -> None:
        self.model, self.sparsity = model, sparsity
        self.steps: dict[int, float] = {}

    def on_step(self, step: int, total: int) -> None:
        if not self.steps:  # on short runs several prunes fall on one step: the last wins
            self.steps.update(prune_schedule(self.sparsity, total))
        if step in self.steps:
            apply_masks(self.model, magnitude_masks(self.model, self.steps[step]))

    @property
    def select_from(self) -> Callable[[int], bool]:
        return lambda step: step > (max(self.steps) if self.steps else -1)




@torch.no_grad()
def rewind_weights(model, pretrained: dict[str, torch.Tensor]) -> None:
    """Every encoder and pooler weight (masked ones under their mask) back to its pre-trained value;
    the classifier keeps its training (SRNet's ``trainer_imp.py`` and Chen et al.'s ``LT_glue.py``
    rewind the encoder and pooler only)."""
    for name, q in model.named_parameters():
        key = name.replace(".parametrizations.weight.original", ".weight")
        if key in pretrained:
            q.copy_(pretrained[key])


def pretrained_state(model) -> dict[str, torch.Tensor]:
    """The weights ``rewind_weights`` goes back to: all but the classifier's."""
    return {k: v.detach().clone() for k, v in model.state_dict().items() if "classifier" not in k}
