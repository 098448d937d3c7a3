"""Iterative magnitude pruning during fine-tuning, and IMP-rewind (DESIGN section 4).

Every 0.1 of training (t_max = all steps), 10 % of the original prunable weights of every
matrix are pruned by magnitude, until the target sparsity; the remaining steps recover.
The chosen loss (ce or a debiasing loss) is really used while pruning (DESIGN section 7).
The best checkpoint by ID dev is chosen only among those at the target sparsity.

``rewind=true`` is the lottery-ticket variant (Frankle and Carbin 2019; Chen et al. 2020):
the mask IMP found is put on the pre-trained weights and that subnetwork is fine-tuned in
isolation with the same recipe.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from bench.api import Candidate, Context, Method, Need
from bench.backbone import load_classifier, load_tokenizer
from bench.masking import apply_masks, check_sparsity, magnitude_masks
from bench.objectives import make_loss
from bench.registry import METHODS
from bench.train import TrainParams, train

PRUNE_FRACTION = 0.1  # of the original weights, every PRUNE_EVERY of training
PRUNE_EVERY = 0.1


def prune_schedule(sparsity: float, total_steps: int) -> list[tuple[int, float]]:
    """[(step, sparsity after pruning at that step)], ending exactly at the target."""
    n = math.ceil(round(sparsity / PRUNE_FRACTION, 6))
    return [(max(0, int(round((k + 1) * PRUNE_EVERY * total_steps)) - 1), min((k + 1) * PRUNE_FRACTION, sparsity))
            for k in range(n)]


@dataclass
class IMPParams(TrainParams):
    rewind: bool = False


@METHODS.register("imp")
class IMP(Method):
    name = "imp"
    description = "iterative magnitude pruning (10% of weights every 0.1 of training); rewind=true retrains the mask from pre-trained weights"
    Params = IMPParams
    sparse = True

    def label(self, params: IMPParams) -> str:
        return f"imp{'-rewind' if params.rewind else ''} ({params.loss})"

    def requires(self, params: IMPParams, sparsity: float | None, reference: dict) -> list[Need]:
        found = [_found(params, sparsity)] if params.rewind else []
        return found + super().requires(params, sparsity, reference)

    def build(self, ctx: Context, params: IMPParams) -> Candidate:
        sparsity = check_sparsity(ctx.sparsity or 0.0)
        if params.rewind:
            return self._rewind(ctx, params, sparsity)
        tok = load_tokenizer(ctx.backbone)
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        loss_fn, info = make_loss(params.loss, ctx, model, tok)
        steps: dict[int, float] = {}

        def on_step(step: int, total: int) -> None:
            if not steps:  # on short runs several prunes fall on one step: the last wins
                steps.update(prune_schedule(sparsity, total))
            if step in steps:
                apply_masks(model, magnitude_masks(model, steps[step]))

        last = lambda: max(steps) if steps else -1  # noqa: E731
        result = train(model, tok, ctx, params, loss_fn, on_step=on_step, select_from=lambda s: s > last(),
                       desc=f"imp {sparsity:.2f} {params.loss}")
        info.update(best_step=result.best_step, best_dev=result.best_dev, train_steps=result.steps,
                    train_seconds=result.seconds, prune_steps=sorted(steps), history=result.history)
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)

    def _rewind(self, ctx: Context, params: IMPParams, sparsity: float) -> Candidate:
        found = ctx.require(_found(params, sparsity))
        tok = load_tokenizer(ctx.backbone)
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        apply_masks(model, found.masks)
        loss_fn, info = make_loss(params.loss, ctx, model, tok)
        result = train(model, tok, ctx, params, loss_fn, desc=f"imp-rewind {sparsity:.2f}")
        info.update(mask_from=found.lineage.get("key"), best_step=result.best_step, best_dev=result.best_dev,
                    train_steps=result.steps, train_seconds=result.seconds, history=result.history)
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)


def _found(params: IMPParams, sparsity: float | None) -> Need:
    """IMP-rewind's mask: IMP with the same recipe and loss, not rewound."""
    return Need("imp", sparsity, {**dataclasses.asdict(params), "rewind": False})
