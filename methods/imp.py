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
from dataclasses import dataclass

from bench.api import Candidate, Context, Method, Need
from bench.model.backbone import load_classifier, load_tokenizer
from bench.model.masking import apply_masks
from bench.model.objectives import make_loss
from bench.model.train import TrainParams, train
from bench.registry import METHODS
from methods.kit import IMPHook


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

    def requires(self, params: IMPParams, sparsity: float | None, reference: Need) -> list[Need]:
        found = [_found(params, sparsity)] if params.rewind else []
        return found + super().requires(params, sparsity, reference)

    def build(self, ctx: Context, params: IMPParams) -> Candidate:
        sparsity = ctx.sparsity
        if params.rewind:
            return self._rewind(ctx, params, sparsity)
        tok = load_tokenizer(ctx.backbone)
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        loss_fn, info = make_loss(params.loss, ctx, model, tok)
        hook = IMPHook(model, sparsity)
        result = train(model, tok, ctx, params, loss_fn, on_step=hook.on_step, select_from=hook.select_from,
                       desc=f"imp {sparsity:.2f} {params.loss}")
        info.update(best_step=result.best_step, best_dev=result.best_dev, train_steps=result.steps,
                    train_seconds=result.seconds, prune_steps=sorted(hook.steps), history=result.history)
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
