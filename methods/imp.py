"""Iterative magnitude pruning (IMP) and IMP-rewind, as SRNet's algorithm 1 (Liu et al. 2022,
appendix A.1.1; docs/design.md section 4).

IMP starts from the fine-tuned model (theta_0 = theta_ft; ``start=pretrained`` is one setting
away) and trains it further with the chosen loss, really used while pruning (docs/design.md section 7).
At t = 0 and every Delta_t = 0.1 t_max it prunes 10 % of the original prunable weights of every
matrix by magnitude, restarting the optimizer; once the target is reached it trains one more
Delta_t and returns that model. So the subnetwork at sparsity s has trained s * t_max steps.

``rewind=true`` (IMP-rewind, SRNet eq. 3, and the lottery tickets of Frankle and Carbin 2019):
the mask is searched from the pre-trained weights with ``prune_loss`` (the paper's L_2: PoE),
the weights rewound to their pre-trained values after every prune; once the target is reached,
the mask on the pre-trained weights is fine-tuned in isolation with ``loss`` (L_1) for the
whole recipe, and the best checkpoint by ID dev is kept.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

from bench.api import Candidate, Context, Method, Need
from bench.errors import BenchError
from bench.model.backbone import load_classifier, load_tokenizer
from bench.model.losses import LOSSES
from bench.model.masking import apply_masks, magnitude_masks
from bench.registry import METHODS
from bench.train.loop import TrainParams, total_steps, train
from bench.train.objectives import make_loss
from methods.kit import PRUNE_EVERY, finetuned, pretrained_state, prune_schedule, rewind_weights


@dataclass
class IMPParams(TrainParams):
    """The inherited recipe fine-tunes the start model and trains IMP (its epochs are t_max)."""

    rewind: bool = False
    start: Literal["finetuned", "pretrained"] = "finetuned"  # algorithm 1: theta_0 = theta_ft
    start_loss: str = "ce"  # the loss of the fine-tuned start model (SRNet figure 3: poe)
    prune_loss: str = ""  # rewind only: the loss while the mask is searched (eq. 3's L_2); "" = loss

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("start_loss", "prune_loss"):
            value = getattr(self, name)
            if value and value not in LOSSES:
                raise BenchError(f"unknown {name} '{value}'; choose from {', '.join(LOSSES)}")


@METHODS.register("imp")
class IMP(Method):
    name = "imp"
    description = ("iterative magnitude pruning from the fine-tuned model (10% of weights every 0.1 of training, "
                   "SRNet algorithm 1); rewind=true searches from pre-trained weights and retrains the mask")
    Params = IMPParams
    sparse = True

    labelled = ("loss", "rewind")

    def label(self, p: IMPParams) -> str:
        if p.rewind:
            return f"imp-rewind ({p.prune_loss or p.loss} mask, {p.loss} retrain)"
        return f"imp ({p.loss}{'' if p.start == 'finetuned' else ', from pre-trained'})"

    def requires(self, p: IMPParams, sparsity: float | None, reference: Need) -> list[Need]:
        start = [finetuned(p.recipe(), p.start_loss)] if p.start == "finetuned" and not p.rewind else []
        losses = {p.loss, p.prune_loss or p.loss} if p.rewind else {p.loss}
        return start + ([reference] if "confreg" in losses else [])

    def build(self, ctx: Context, p: IMPParams) -> Candidate:
        if p.rewind:
            return self._rewind(ctx, p)
        tok = load_tokenizer(ctx.backbone)
        info: dict = {}
        if p.start == "finetuned":
            start = ctx.require(finetuned(p.recipe(), p.start_loss))
            model = copy.deepcopy(start.model)
            info["start_model"] = start.lineage.get("key")
        else:
            model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        loss_fn, loss_info = make_loss(p.loss, ctx, model, tok)
        info.update(loss_info)
        total = total_steps(len(ctx.task.train), p)
        steps = dict(prune_schedule(ctx.sparsity, total))
        stop = _returned_at(ctx.sparsity, total)

        def on_step(step: int, _total: int) -> None:
            if step in steps:
                apply_masks(model, magnitude_masks(model, steps[step]))

        result = train(model, tok, ctx, p, loss_fn, on_step=on_step, restart=frozenset(steps), stop_at=stop,
                       desc=f"imp {ctx.sparsity:.2f} {p.loss}")
        info.update(train_steps=result.steps, train_seconds=result.seconds, prune_steps=sorted(steps),
                    returned_at=stop, history=result.history, best_step=result.best_step, best_dev=result.best_dev,
                    kept=[result.kept()])
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)

    def _rewind(self, ctx: Context, p: IMPParams) -> Candidate:
        tok = load_tokenizer(ctx.backbone)
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        pretrained = pretrained_state(model)
        prune_loss = p.prune_loss or p.loss
        loss_fn, info = make_loss(prune_loss, ctx, model, tok)
        total = total_steps(len(ctx.task.train), p)
        schedule = prune_schedule(ctx.sparsity, total)
        last, steps = schedule[-1][0], dict(schedule[:-1])  # the last prune ends the search

        def on_step(step: int, _total: int) -> None:
            if step in steps:
                apply_masks(model, magnitude_masks(model, steps[step]))
                rewind_weights(model, pretrained)

        if last > 0:
            train(model, tok, ctx, p, loss_fn, on_step=on_step, restart=frozenset(steps), stop_at=last,
                  desc=f"imp-rewind search {ctx.sparsity:.2f} {prune_loss}")
        masks = magnitude_masks(model, ctx.sparsity)
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)  # f(m . theta_pt)
        apply_masks(model, masks)
        loss_fn, retrain_info = make_loss(p.loss, ctx, model, tok)
        result = train(model, tok, ctx, p, loss_fn, desc=f"imp-rewind {ctx.sparsity:.2f} {p.loss}")
        info.update({f"retrain_{k}": v for k, v in retrain_info.items()})
        info.update(prune_loss=prune_loss, search_steps=last, prune_steps=[s for s, _ in schedule],
                    best_step=result.best_step, best_dev=result.best_dev, train_steps=result.steps, kept=[result.kept()],
                    train_seconds=result.seconds, history=result.history)
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)


def _returned_at(sparsity: float, total: int) -> int:
    """Algorithm 1 returns the IMP subnetwork one Delta_t after its last prune (on a short run, at
    least one step after it, so that the last prune is made)."""
    schedule = prune_schedule(sparsity, total)
    last = schedule[-1][0] if schedule else -1
    return min(total, max(last + 1, int(round(len(schedule) * PRUNE_EVERY * total))))
