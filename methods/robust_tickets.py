"""Robust Tickets: hard-concrete L0 masks searched with an adversarial loss, and FreeLB.

Zheng et al., "Robust Lottery Tickets for Pre-trained Language Models", ACL 2022 (docs/design.md
section 4). From the fine-tuned model, with every weight frozen, a hard-concrete gate per
prunable weight (``bench.model.masking.HardConcreteMask``; log_alpha learned, beta = 2/3, gamma =
-0.1, zeta = 1.1) is trained on

    L = L_adv + lambda * E[L0],   E[L0] = mean_w sigmoid(log_alpha_w - beta log(-gamma / zeta))

where L_adv is FreeLB's loss (Zhu et al. 2020): a perturbation delta of the word embeddings,
initialised with L2 norm ``adv_init_mag`` per example, raised by ``adv_steps`` ascent steps of
size ``adv_lr`` along the L2-normalised gradient (projected to ``adv_max_norm`` when > 0), the
loss of every step averaged into the update. Only the gates are optimised and clipped: the
frozen weights never get gradients (the published code accumulated un-zeroed weight gradients
into the clipping; docs/design.md section 7). ``lambda`` is constant after an optional linear warm-up
counted in optimizer steps (the published ramp counted dictionary keys).

log_alpha starts at ``init_log_alpha`` plus 0.01 |W| / max |W|, so that gates the search
never moves rank by weight magnitude rather than by position. The ticket keeps the weights with
the largest sigmoid(log_alpha) at exactly the target sparsity (``scope`` global or per matrix).
It is binary wherever it is evaluated, during the search too, and is retrained from the
pre-trained weights with standard CE (table 5: lr 2e-5, 3 epochs).

The search starts from an already fine-tuned model, with the recipe's loss and epochs: the
authors' released code fine-tunes first (its stage 1) and searches the mask on that model
(stage 2); the ticket's weights are then rewound to the pre-trained ones (stage 3). ``start``
picks stage 1's model: the fine-tuned one (the paper), or the recipe's model trained for
randomized smoothing (``safer`` or ``ranmask``, the ``smoothing_aware`` method), so that a ticket
can be searched where smoothing was learned; the retraining stays the paper's CE.

Controls (``ticket``), at the same sparsity and with exactly the same retraining: ``random`` (a
random mask with the robust ticket's per-matrix sparsity) and ``imp``, the lottery ticket of
Chen et al. 2020 that table 1 compares with (``RobustTickets.lottery``: global magnitude
pruning, 10 % of the weights a round, a full fine-tuning a round, rewound to the pre-trained
weights every round); and the dense ``freelb`` method below. What each ticket costs before its
retraining differs by design (the search, the lottery rounds, nothing for the random ticket):
every ticket records it as ``budget_epochs`` (optimizer epochs, its start model's included) and
``budget_passes`` (forward-backward passes over the training set: FreeLB's K ascent steps each
count). The dense model trained for as many optimizer epochs as the robust ticket is
``finetune --param epochs=<budget_epochs>`` (8 with the defaults).

CPU scale: the paper searches for 20 epochs at mask lr 0.05-0.1; here ``search_epochs`` = 3.
The released code evaluates dev once, at the end of each epoch, in all three stages; the paper
spec sets ``eval_every`` to one epoch's steps, the CPU specs keep the harness's twice an epoch.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from bench.api import Candidate, Context, Method, Need
from bench.errors import BenchError
from bench.model.backbone import load_classifier, load_tokenizer
from bench.model.losses import ce
from bench.model.masking import (
    HardConcreteMask,
    apply_masks,
    current_masks,
    draw_ticket,
    l0_penalty,
    magnitude_masks,
    prunable_linears,
)
from bench.plugin import SMOOTHED
from bench.registry import METHODS
from bench.train.freelb import FreeLBParams, freelb_loss
from bench.train.loop import TrainParams, total_steps, train
from methods.kit import PRUNE_FRACTION, finetuned, pretrained_state, prune_rounds, rewind_weights


@dataclass
class RobustTicketsParams(TrainParams, FreeLBParams):
    """The inherited recipe (epochs, lr, ...) fine-tunes the start model."""

    ALLOWED_LOSSES: ClassVar[tuple[str, ...]] = ("ce",)

    ticket: Literal["robust", "random", "imp"] = "robust"
    scope: Literal["local", "global"] = "local"  # docs/design.md section 3: per matrix by default
    lam: float = 0.5  # lambda of the L0 penalty, in [0.1, 1] in the paper
    lambda_warmup: float = 0.0  # fraction of search steps over which lambda rises linearly from 0
    search_epochs: float = 3.0
    mask_lr: float = 0.1
    search_weight_decay: float = 1e-6  # on log_alpha (table 6: wd 1e-6 for every dataset)
    init_log_alpha: float = 2.0  # P(z != 0) ~ 0.97 at the start: the search starts from the full model
    retrain_epochs: float = 3.0
    retrain_lr: float = 2e-5
    start: Literal["finetune", "safer", "ranmask"] = "finetune"  # stage 1's model, the search's start

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_adv()
        if self.start not in ("finetune", *SMOOTHED):
            raise BenchError(f"start must be one of finetune, {', '.join(SMOOTHED)}, got '{self.start}'")
        if self.start != "finetune" and self.ticket == "imp":
            raise BenchError("start picks the model the robust ticket's search starts from; the IMP ticket starts "
                             "from the pre-trained weights")
        if not (math.isfinite(self.lam) and self.lam >= 0):
            raise BenchError(f"lam (the L0 penalty's lambda) must be >= 0, got {self.lam}")
        if not 0 <= self.lambda_warmup < 1:
            raise BenchError(f"lambda_warmup must be in [0, 1), got {self.lambda_warmup}")
        if not (math.isfinite(self.search_weight_decay) and self.search_weight_decay >= 0):
            raise BenchError(f"search_weight_decay must be >= 0, got {self.search_weight_decay}")
        for name in ("search_epochs", "mask_lr", "retrain_epochs", "retrain_lr"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise BenchError(f"{name} must be a positive finite number")



@METHODS.register("robust_tickets")
class RobustTickets(Method):
    name = "robust_tickets"
    description = ("Robust Tickets (Zheng et al. 2022): hard-concrete L0 masks searched with FreeLB, retrained from "
                   "pre-trained weights; ticket=random|imp controls")
    Params = RobustTicketsParams
    sparse = True

    labelled = ("loss", "ticket", "start")

    def label(self, p: RobustTicketsParams) -> str:
        start = f", from {SMOOTHED[p.start]}-trained" if p.start in SMOOTHED else ""
        return {"robust": "robust ticket", "random": "random ticket", "imp": "IMP ticket"}[p.ticket] + f" (retrained, ce{start})"

    def requires(self, p: RobustTicketsParams, sparsity: float | None, reference: Need) -> list[Need]:
        return [] if p.ticket == "imp" else [_source(p, sparsity)]

    def epochs(self, p: RobustTicketsParams, sparsity: float | None) -> float:
        passes = budget(p, sparsity or 0.0)["budget_passes"]  # the lottery's rounds included
        return passes - p.epochs if p.ticket == "robust" else passes  # the search's fine-tuned start is its own job

    def build(self, ctx: Context, p: RobustTicketsParams) -> Candidate:
        sparsity = ctx.sparsity
        if p.ticket == "robust":
            masks, info, _ = self.search(ctx, p, sparsity)
        elif p.ticket == "random":
            robust = ctx.require(_source(p, sparsity))
            masks = random_like(robust.masks, ctx.seed)
            info = {"pattern_from": robust.lineage.get("key")}
        else:
            masks, info = self.lottery(ctx, p, sparsity)
        return self.retrain(ctx, p, masks, info)

    @staticmethod
    def lottery(ctx: Context, p: RobustTicketsParams, sparsity: float) -> tuple[dict, dict]:
        """The lottery ticket Zheng et al. compare with (table 1, "LTH"): Chen et al. 2020's IMP
        for pre-trained BERT (their section 3 and ``LT_glue.py``). Each round fine-tunes the
        subnetwork with the recipe (a full fine-tuning: 3 epochs on GLUE) and, from its last
        weights, prunes a further 10 % of the original prunable weights by global magnitude, then
        rewinds the encoder to its pre-trained weights (the classifier keeps its training, the
        optimizer restarts), until the target. As every method here, the
        pooler is not pruned (docs/design.md section 3; Chen et al. prune it too)."""
        tok = load_tokenizer(ctx.backbone)
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        pretrained = pretrained_state(model)
        recipe = TrainParams(**p.recipe())
        last = total_steps(len(ctx.task.train), recipe)
        levels = [min((k + 1) * PRUNE_FRACTION, sparsity) for k in range(prune_rounds(sparsity))]
        rounds = []
        for r, level in enumerate(levels):
            result = train(model, tok, ctx, recipe, lambda logits, y, idx: ce(logits, y), stop_at=last,
                           desc=f"lottery round {r + 1}/{len(levels)}")
            rounds.append({"steps": result.steps, "dev": result.best_dev, "seconds": result.seconds})
            apply_masks(model, magnitude_masks(model, level, scope="global"))
            rewind_weights(model, pretrained)
        masks = {k: v for k, v in current_masks(model).items() if k in prunable_linears(model)}
        info = {"lottery_levels": levels, "lottery_rounds": rounds, "lottery_epochs": p.epochs * len(levels)}
        return masks, info

    @staticmethod
    def search(ctx: Context, p: RobustTicketsParams, sparsity: float) -> tuple[dict, dict, torch.nn.Module]:
        start = ctx.require(_source(p, sparsity))
        model = copy.deepcopy(start.model)
        tok = load_tokenizer(ctx.backbone)
        for q in model.parameters():
            q.requires_grad_(False)
        gates: list[HardConcreteMask] = []
        for lin in prunable_linears(model).values():
            w = lin.weight.detach().abs()
            tie_break = 0.01 * w / w.max().clamp_min(1e-12)  # untouched gates rank by magnitude, not position
            torch.nn.utils.parametrize.register_parametrization(
                lin, "weight", HardConcreteMask(p.init_log_alpha + tie_break))
            gates.append(lin.parametrizations.weight[0])
        draw_ticket(gates, sparsity, p.scope)
        sp = TrainParams(loss="ce", epochs=p.search_epochs, lr=p.mask_lr, batch_size=p.batch_size, warmup_ratio=0.0,
                         weight_decay=p.search_weight_decay, eval_every=p.eval_every, max_grad_norm=p.max_grad_norm)
        n_steps = total_steps(len(ctx.task.train), sp)
        norms: list[float] = []
        penalties: list[float] = []

        def lam(step: int) -> float:
            ramp = p.lambda_warmup * n_steps
            return p.lam * min(1.0, step / ramp) if ramp > 0 else p.lam

        def step_fn(m, inputs, y, idx, step, total):
            def penalty():
                value = l0_penalty(gates)
                penalties.append(float(value.detach()))
                return lam(step) * value

            return freelb_loss(m, inputs, y, p, ctx, extra=penalty, record=norms)

        result = train(model, tok, ctx, sp, loss_fn=None, step_fn=step_fn,  # type: ignore[arg-type]
                       on_eval=lambda step, total: draw_ticket(gates, sparsity, p.scope),
                       groups=[{"params": [g.log_alpha for g in gates], "weight_decay": p.search_weight_decay,
                                "lr": p.mask_lr}],
                       desc=f"ticket search {sparsity:.2f}")
        draw_ticket(gates, sparsity, p.scope)  # from the best checkpoint's log_alpha
        masks = {name: lin.parametrizations.weight[0].ticket.detach().cpu().clone()
                 for name, lin in prunable_linears(model).items()}
        info = {"start_model": start.lineage.get("key"), "search_steps": result.steps, "search_best_step": result.best_step,
                "search_best_dev": result.best_dev, "search_history": result.history, "search_seconds": result.seconds,
                "l0_start": penalties[0] if penalties else None, "l0_end": penalties[-1] if penalties else None,
                "max_delta_norm": max(norms) if norms else None, "kept": [result.kept("ticket search")]}
        return masks, info, model

    @staticmethod
    def retrain(ctx: Context, p: RobustTicketsParams, masks: dict, info: dict) -> Candidate:
        tok = load_tokenizer(ctx.backbone)
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)  # the pre-trained weights
        apply_masks(model, masks)
        rp = TrainParams(loss="ce", epochs=p.retrain_epochs, lr=p.retrain_lr, batch_size=p.batch_size,
                         warmup_ratio=p.warmup_ratio, weight_decay=p.weight_decay, eval_every=p.eval_every,
                         max_grad_norm=p.max_grad_norm)
        result = train(model, tok, ctx, rp, lambda logits, y, idx: ce(logits, y), desc="ticket retrain")
        info.update(retrain_steps=result.steps, best_step=result.best_step, best_dev=result.best_dev,
                    kept=[result.kept(), *info.get("kept", [])],
                    retrain_history=result.history, train_seconds=result.seconds, **budget(p, ctx.sparsity))
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)


def budget(p: RobustTicketsParams, sparsity: float) -> dict[str, float]:
    """What a ticket trained in all, its retraining included: optimizer epochs and passes over
    the training set (FreeLB's K ascent steps are K passes a step)."""
    rounds = prune_rounds(sparsity) if p.ticket == "imp" else 0
    before = {"robust": (p.epochs + p.search_epochs, p.epochs + p.search_epochs * p.adv_steps),
              "imp": (p.epochs * rounds, p.epochs * rounds), "random": (0.0, 0.0)}[p.ticket]
    return {"budget_epochs": before[0] + p.retrain_epochs, "budget_passes": before[1] + p.retrain_epochs}


def _source(p: RobustTicketsParams, sparsity: float | None) -> Need:
    """What a ticket starts from: the fine-tuned model (the search), or the robust ticket whose
    per-matrix sparsity a random ticket copies (the lottery ticket starts from pre-trained weights)."""
    if p.ticket == "random":
        return Need("robust_tickets", sparsity, {**dataclasses.asdict(p), "ticket": "robust"})
    if p.start in SMOOTHED:
        return Need("smoothing_aware", None, {"smoothing": p.start, **p.recipe()})
    return finetuned(p.recipe())


def random_like(masks: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    """A random mask per matrix with exactly the same number of kept weights."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, m in masks.items():
        flat = torch.zeros(m.numel(), dtype=torch.bool)
        flat[torch.randperm(m.numel(), generator=gen)[: int(m.sum())]] = True
        out[name] = flat.view_as(m)
    return out


@dataclass
class FreeLBTrainParams(TrainParams, FreeLBParams):
    ALLOWED_LOSSES: ClassVar[tuple[str, ...]] = ("ce",)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_adv()


@METHODS.register("freelb")
class FreeLB(Method):
    name = "freelb"
    description = "dense FreeLB adversarial fine-tuning (Zhu et al. 2020), the Robust Tickets control"
    Params = FreeLBTrainParams

    def label(self, p: FreeLBTrainParams) -> str:
        return "freelb (dense)"

    def epochs(self, p: FreeLBTrainParams, sparsity: float | None) -> float:
        return p.epochs * p.adv_steps  # K forward-backward passes a step

    def build(self, ctx: Context, p: FreeLBTrainParams) -> Candidate:
        tok = load_tokenizer(ctx.backbone)
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        result = train(model, tok, ctx, p, loss_fn=None,  # type: ignore[arg-type]
                       step_fn=lambda m, inputs, y, idx, step, total: freelb_loss(m, inputs, y, p, ctx), desc="freelb")
        info = {"best_step": result.best_step, "best_dev": result.best_dev, "train_steps": result.steps,
                "kept": [result.kept()], "train_seconds": result.seconds, "history": result.history}
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)
