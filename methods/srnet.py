"""SRNet: sparse and robust subnetworks by mask training with debiasing losses.

Liu et al., "A Win-win Deal: Towards Sparse and Robust Pre-trained Language Models",
NeurIPS 2022 (docs/design.md section 4). The weights stay frozen; every prunable matrix gets a
real-valued score per weight and the binary mask m = [score >= phi] with a straight-through
gradient (``bench.model.masking.ScoreMask``). phi is reset at every evaluation so that each matrix
meets its sparsity exactly. The mask is trained with any loss of the core (``ce``, ``poe``,
``reweight``, ``confreg``).

Initialisation (section 3.2): ``hard`` gives the top (1 - s) weights of each matrix by
magnitude the score alpha * phi (alpha = 2, phi = 0.01) and the rest 0, so training starts
from the one-shot magnitude mask; ``soft`` starts from scores = |W|. Sparsity schedule:
``fixed``, or ``gradual`` (section 5.2): the cubic s_t = s_f + (s_i - s_f)(1 - t/T)^3 from
``init_sparsity`` to the target, with checkpoints eligible only once the target is reached
(the published code saved the mask at the initial sparsity; docs/design.md section 7).

Paradigms (figure 1 of the paper):

- ``finetuned``: masks on the model fine-tuned with ``start_loss`` (``ce``: "subnetworks from
  standard fine-tuned BERT"; ``poe``: "from PoE fine-tuned BERT"), or on its checkpoint at
  ``start_step`` ("when to start searching", section 5.1). Model selection by ID dev only,
  after ``select_after`` (0.7) of mask training, as the paper.
- ``rewind``: the ``finetuned`` mask on the pre-trained weights (the classifier at its
  seed's initialisation), that subnetwork fine-tuned in isolation with ``retrain_loss``.
- ``pretrained``: masks on the pre-trained model, no weight training; the randomly
  initialised classifier head (pooler and classifier) is trained instead of masked.

``ood_mix`` > 0 is the "sparse and unbiased" upper bound (section 4.5): that fraction of the ID
training set is added as OOD *training* data (HANS train for MNLI, PAWS train for QQP,
FEVER-Symm v2 dev x10 for FEVER), never OOD test data; methods never see OOD test sets.

CPU scale (results/srnet/findings.md): the paper trains masks for ~60k steps at lr 5e-5 (warm-up
3,600) and resets phi every 1,000 steps; here mask training has ~300 steps. Adam moves every
score by about lr per step whatever its gradient's size, so with hard init all scores start
alpha*phi - phi = 0.01 from the threshold and cross it together: at lr 5e-5 none crosses in
300 steps (the mask stays the magnitude mask), at lr >= 2e-4 a large share crosses within a few
steps and the model collapses to a constant predictor (measured on ``nli_synth``). Soft init
spreads the scores, so only weights near the threshold swap; it trains stably at lr 2e-4.
The defaults here are therefore ``init=soft``, ``mask_lr=2e-4``, phi reset every 20 steps;
``init=hard mask_lr=5e-5`` with paper-scale epochs is the published setting.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Literal

import torch
from torch.nn.utils import parametrize

from bench.api import Candidate, Context, Method, Need, confreg_teacher
from bench.data.examples import Example, TaskData
from bench.errors import BenchError, MissingData
from bench.model.arch import HEAD
from bench.model.backbone import load_classifier, load_tokenizer
from bench.model.losses import LOSSES
from bench.model.masking import ScoreMask, apply_masks, cubic_sparsity, prunable_linears
from bench.registry import METHODS
from bench.train.loop import TrainParams, total_steps, train
from bench.train.objectives import make_loss
from methods.kit import finetuned


@dataclass
class SRNetParams(TrainParams):
    """``loss`` is the mask-training loss; the inherited recipe (epochs, lr, ...) is the
    fine-tuning recipe of the start model and of ``rewind`` retraining, so the F_bias
    reference is exactly the model the masks start from."""

    paradigm: Literal["finetuned", "rewind", "pretrained"] = "finetuned"
    init: Literal["hard", "soft"] = "soft"  # the paper's fixed-sparsity runs use hard (see module docstring)
    schedule: Literal["fixed", "gradual"] = "fixed"
    init_sparsity: float = 0.7  # gradual only
    ramp: float = 0.7  # gradual only: fraction of mask training over which sparsity rises (the paper: 1.0)
    mask_epochs: float = 3.0
    mask_lr: float = 2e-4
    mask_eval_every: int = 20  # steps between threshold resets (and ID-dev evaluations)
    mask_classifier: bool = True
    start_loss: str = "ce"
    start_step: int = 0  # 0: the best fine-tuned checkpoint; N: the checkpoint at step N
    retrain_loss: str = "ce"
    ood_mix: float = 0.0
    select_after: float = 0.7
    alpha: float = 2.0
    phi: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("start_loss", "retrain_loss"):
            if getattr(self, name) not in LOSSES:
                raise BenchError(f"unknown {name} '{getattr(self, name)}'; choose from {', '.join(LOSSES)}")
        if not (math.isfinite(self.mask_lr) and self.mask_lr > 0 and math.isfinite(self.mask_epochs) and self.mask_epochs > 0):
            raise BenchError("mask_lr and mask_epochs must be positive finite numbers")
        if not 0.0 <= self.init_sparsity < 1.0:
            raise BenchError(f"init_sparsity must be in [0, 1), got {self.init_sparsity}")
        if not 0.0 < self.ramp <= 1.0:
            raise BenchError(f"ramp must be in (0, 1], got {self.ramp}")
        if not 0.0 <= self.select_after < 1.0:
            raise BenchError(f"select_after must be in [0, 1), got {self.select_after}")
        if self.ood_mix < 0 or not math.isfinite(self.ood_mix):
            raise BenchError(f"ood_mix must be a fraction of the training set >= 0, got {self.ood_mix}")
        if self.start_step < 0 or self.mask_eval_every < 0:
            raise BenchError("start_step and mask_eval_every must be at least 0")
        if self.alpha <= 1 or self.phi <= 0:
            raise BenchError("hard init needs alpha > 1 and phi > 0 (scores alpha*phi above the threshold phi)")



def attach_score_masks(model, init: str, sparsity: float, heads: bool, alpha: float = 2.0, phi: float = 0.01) -> list[ScoreMask]:
    """A ScoreMask on every prunable matrix (and the head when ``heads``), initialised
    ``hard`` or ``soft`` and reset to ``sparsity`` per matrix."""
    targets = dict(prunable_linears(model))
    if heads:
        targets.update({n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and HEAD.search(n)})
    out = []
    for lin in targets.values():
        w = lin.weight.detach().abs().float()
        if init == "soft":
            scores = w.clone()
        else:
            keep = w.numel() - int(round(sparsity * w.numel()))
            scores = torch.zeros_like(w)
            if keep > 0:
                scores.view(-1)[torch.topk(w.flatten(), keep).indices] = alpha * phi
        sm = ScoreMask(scores, phi)
        sm.reset(sparsity)
        parametrize.register_parametrization(lin, "weight", sm)
        out.append(lin.parametrizations.weight[0])
    return out


def mix_ood(task: TaskData, fraction: float, seed: int) -> tuple[TaskData, dict]:
    """The task with ``fraction`` x |train| OOD training examples added (drawn with a fixed
    seed, cycling through the set when it is smaller, as FEVER-Symm dev x10)."""
    if task.ood_train is None:
        raise BenchError(f"task '{task.name}' has no OOD training data for ood_mix (only MNLI, QQP, FEVER and nli_synth have)")
    try:
        pool, source = task.ood_train()
    except MissingData as e:
        raise BenchError(f"ood_mix: {e}") from e
    n = int(round(fraction * len(task.train)))
    order = list(pool)
    random.Random(seed).shuffle(order)
    extra: list[Example] = [order[i % len(order)] for i in range(n)]
    info = {"ood_train": dataclasses.asdict(source), "ood_train_examples": n}
    return dataclasses.replace(task, train=task.train + extra), info


@METHODS.register("srnet")
class SRNet(Method):
    name = "srnet"
    description = "SRNet mask training (Liu et al. 2022): frozen weights, straight-through binary masks, debiasing losses"
    Params = SRNetParams
    sparse = True

    labelled = ("loss", "paradigm", "retrain_loss")

    def label(self, p: SRNetParams) -> str:
        if p.paradigm == "rewind":
            return f"srnet-rewind ({p.loss} mask, {p.retrain_loss} retrain)"
        return f"srnet{'' if p.paradigm == 'finetuned' else '-' + p.paradigm} ({p.loss})"

    def lineage_extra(self, task: TaskData, data_dir, p: SRNetParams) -> dict:
        if p.ood_mix <= 0 or task.ood_train is None:
            return {}
        try:
            return {"ood_train": task.ood_train()[1].sha256}
        except MissingData:
            return {"ood_train": "missing"}  # build() says which file

    def check(self, p: SRNetParams, sparsity: float | None) -> None:
        if p.schedule == "gradual" and p.init_sparsity > (sparsity or 0.0):
            raise BenchError(f"gradual schedule: final sparsity {sparsity} is below init_sparsity {p.init_sparsity}")

    def requires(self, p: SRNetParams, sparsity: float | None, reference: Need) -> list[Need]:
        if p.paradigm == "rewind":
            return [_found(p, sparsity)] + confreg_teacher(p.retrain_loss, reference)
        start = [_start(p)] if p.paradigm == "finetuned" else []
        return start + confreg_teacher(p.loss, reference)

    def epochs(self, p: SRNetParams, sparsity: float | None) -> float:
        return p.epochs if p.paradigm == "rewind" else p.mask_epochs

    def build(self, ctx: Context, p: SRNetParams) -> Candidate:
        sparsity = ctx.sparsity
        if p.paradigm == "rewind":
            return self._rewind(ctx, p, sparsity)
        tok = load_tokenizer(ctx.backbone)
        info: dict = {}
        if p.paradigm == "finetuned":
            start = ctx.require(_start(p))
            model = copy.deepcopy(start.model)
            info["start_model"] = start.lineage.get("key")
        else:
            model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        if p.ood_mix > 0:
            task, mix_info = mix_ood(ctx.task, p.ood_mix, ctx.seed)
            ctx = dataclasses.replace(ctx, task=task)
            info.update(mix_info)

        mp = TrainParams(loss=p.loss, epochs=p.mask_epochs, lr=p.mask_lr, batch_size=p.batch_size,
                         warmup_ratio=p.warmup_ratio, weight_decay=0.0, eval_every=p.mask_eval_every,
                         max_grad_norm=p.max_grad_norm)
        total = total_steps(len(ctx.task.train), mp)

        def target(step: int) -> float:
            if p.schedule == "fixed":
                return sparsity
            return cubic_sparsity(step, max(1, round(p.ramp * total)), p.init_sparsity, sparsity)

        loss_fn, loss_info = make_loss(p.loss, ctx, model, tok)
        info.update(loss_info)
        for q in model.parameters():
            q.requires_grad_(False)
        pretrained = p.paradigm == "pretrained"
        masks = attach_score_masks(model, p.init, target(0), heads=p.mask_classifier and not pretrained,
                                   alpha=p.alpha, phi=p.phi)
        initial = [m.mask.clone() for m in masks]
        groups = [{"params": [m.scores for m in masks], "weight_decay": 0.0, "lr": p.mask_lr}]
        if pretrained:  # a random head cannot be masked into a classifier: train it
            head = [q for n, q in model.named_parameters() if HEAD.search(n.rsplit(".", 1)[0])]
            for q in head:
                q.requires_grad_(True)
            groups.append({"params": head, "weight_decay": p.weight_decay, "lr": p.lr})
        resets: list[dict] = []

        def on_eval(step: int, _total: int) -> None:
            s = target(step)
            for m in masks:
                m.reset(s)
            zeros = [(m.scores.numel() - int(m.mask.sum()), m.scores.numel()) for m in masks]
            resets.append({"step": step, "target": s, "min": min(z / n for z, n in zeros), "max": max(z / n for z, n in zeros),
                           "off_by": max(abs(z - round(s * n)) for z, n in zeros)})  # weights away from exact

        start_select = p.select_after * total if p.paradigm == "finetuned" else 0
        result = train(model, tok, ctx, mp, loss_fn, on_eval=on_eval, groups=groups,
                       select_from=lambda step: step >= start_select and target(step) == sparsity,
                       desc=f"srnet {p.paradigm} {sparsity:.2f} {p.loss}")
        # how far mask training moved from its initial (magnitude, for hard init) mask
        kept = sum(int(a.sum()) for a in initial)
        info["mask_changed"] = sum(int((a & ~m.mask).sum()) for a, m in zip(initial, masks, strict=True)) / max(kept, 1)
        info.update(best_step=result.best_step, best_dev=result.best_dev, train_steps=result.steps, kept=[result.kept()],
                    train_seconds=result.seconds, history=result.history, resets=resets)
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)

    def _rewind(self, ctx: Context, p: SRNetParams, sparsity: float) -> Candidate:
        found = ctx.require(_found(p, sparsity))
        tok = load_tokenizer(ctx.backbone)
        model = rewound(ctx, found.masks)
        loss_fn, info = make_loss(p.retrain_loss, ctx, model, tok)
        result = train(model, tok, ctx, TrainParams(loss=p.retrain_loss, **p.recipe()), loss_fn,
                       desc=f"srnet-rewind {sparsity:.2f} {p.retrain_loss}")
        info.update(mask_from=found.lineage.get("key"), best_step=result.best_step, best_dev=result.best_dev,
                    train_steps=result.steps, kept=[result.kept()], train_seconds=result.seconds, history=result.history)
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)


def _start(p: SRNetParams) -> Need:
    """The fine-tuned model (or its checkpoint at ``start_step``) the masks are trained on."""
    return finetuned(p.recipe(), p.start_loss, p.start_step)


def _found(p: SRNetParams, sparsity: float | None) -> Need:
    """The mask ``rewind`` puts on the pre-trained weights: the ``finetuned`` paradigm's."""
    return Need("srnet", sparsity, {**dataclasses.asdict(p), "paradigm": "finetuned", "retrain_loss": "ce"})


def rewound(ctx: Context, masks: dict[str, torch.Tensor]):
    """The pre-trained weights (classifier at the seed's initialisation, as the fine-tuned
    model started) under a found mask: the subnetwork to fine-tune in isolation."""
    model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
    apply_masks(model, masks)
    return model
