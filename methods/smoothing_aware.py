"""Training for randomized smoothing: a model fine-tuned on random copies of its training
examples, drawn from the distribution the ``certified`` suite's smoothed classifier votes over
(``bench.data.perturb``), so that its top class wins the votes by a margin (docs/methods.md).

- ``smoothing=safer``: SAFER's data augmentation (Ye, Gong and Liu, ACL 2020; its released
  ``train.py`` replaces every training example, each epoch, by one fresh random substitution of
  its words from their perturbation sets).
- ``smoothing=ranmask``: RanMASK's training (Zeng et al., Computational Linguistics 2023; its
  released ``trainer/mask.py`` masks each example afresh in every batch, at the same rate).

Here a fresh copy is drawn each time an example comes round. ``start=backbone`` trains from the
pre-trained model, as both papers do; ``start=finetune`` (the recipe's fine-tuned model) or
``checkpoint`` (``--backbone`` as it is) goes on training that model for smoothing. A sparse start
(a pruned candidate, through ``bench export``) stays as sparse: its zeros are masked while it
trains, so a compressed model can be trained for smoothing as well as certified as it is. The recipe
is the harness's fine-tuning recipe, so that the twin differs from the CE model only in what it
is trained on; the papers' (SAFER: 3 epochs at 5e-5, batch 8; RanMASK: 10 epochs, batch 32) are a
``--param`` away.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from bench.api import Candidate, Context, Method, Need
from bench.data.perturb import NEIGHBOURS, masked, perturbed, substitutions
from bench.errors import BenchError
from bench.model.backbone import load_classifier, load_tokenizer
from bench.model.masking import fix_zeros
from bench.plugin import finetuned
from bench.registry import METHODS
from bench.store.atomic import sha256_file
from bench.train.loop import TrainParams, train
from bench.train.objectives import make_loss

SMOOTHINGS = ("safer", "ranmask")
STARTS = ("backbone", "finetune", "checkpoint")


@dataclass
class SmoothedParams(TrainParams):
    smoothing: str = "safer"  # safer | ranmask: the certified suite's smoothing it trains for
    mask_rate: float = 0.7  # ranmask: the share of words masked (RanMASK's default)
    neighbours: int = 100  # safer: the perturbation set's largest size (SAFER's run.sh: K = 100)
    start: str = "backbone"  # backbone (as the papers) | finetune | checkpoint: the model trained for smoothing
    label_map: str = ""  # with start=checkpoint: its label names mapped onto the task's

    ALLOWED_LOSSES = ("ce",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.smoothing not in SMOOTHINGS:
            raise BenchError(f"smoothing must be one of {', '.join(SMOOTHINGS)}, got '{self.smoothing}'")
        if self.start not in STARTS:
            raise BenchError(f"start must be one of {', '.join(STARTS)}, got '{self.start}'")
        if not 0 < self.mask_rate < 1 or self.neighbours < 2:
            raise BenchError("mask_rate must lie in (0, 1) and neighbours be at least 2")

    def start_need(self) -> Need | None:
        if self.start == "checkpoint":
            return Need("checkpoint", None, {"label_map": self.label_map})
        return finetuned(self.recipe()) if self.start == "finetune" else None


@METHODS.register("smoothing_aware")
class SmoothingAware(Method):
    name = "smoothing_aware"
    description = "training for randomized smoothing: SAFER's random substitutions or RanMASK's masks (from the backbone or a model)"
    Params = SmoothedParams
    labelled = ("smoothing", "start")

    def label(self, p: SmoothedParams) -> str:
        return f"{'SAFER' if p.smoothing == 'safer' else 'RanMASK'}-trained" + ("" if p.start == "backbone" else f", from {p.start}")

    def lineage_extra(self, task, data_dir: Path | None, p: SmoothedParams) -> dict:
        listed = data_dir / NEIGHBOURS if data_dir else None
        return {"neighbours": sha256_file(listed)} if p.smoothing == "safer" and listed and listed.is_file() else {}

    def requires(self, p: SmoothedParams, sparsity: float | None, reference: Need) -> list[Need]:
        return [n] if (n := p.start_need()) else []

    def baseline(self, p: SmoothedParams, reference: Need) -> Need:
        return p.start_need() or reference

    def build(self, ctx: Context, p: SmoothedParams) -> Candidate:
        need = p.start_need()
        if need is None:
            tok, model = load_tokenizer(ctx.backbone), load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        else:
            start = ctx.require(need)
            tok, model = start.tokenizer, copy.deepcopy(start.model)
        zeros = fix_zeros(model)
        loss_fn, info = make_loss(p.loss, ctx, model, tok)
        result = train(model, tok, ctx, p, loss_fn, desc=f"smoothing-aware {p.smoothing}", augment=augmenter(p, ctx, tok))
        info.update(best_step=result.best_step, best_dev=result.best_dev, train_steps=result.steps, kept=[result.kept()],
                    train_seconds=result.seconds, history=result.history, start_zeros_kept=round(zeros, 6))
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)


def augmenter(p: SmoothedParams, ctx: Context, tokenizer):
    """A fresh random copy of an example (its second text, on a pair task), as the suite draws them."""
    if p.smoothing == "safer":
        perturb = substitutions(ctx.data_dir, p.neighbours).sample
    else:
        perturb = lambda text, rng: masked(text, p.mask_rate, tokenizer.mask_token, rng)  # noqa: E731

    return lambda ex, rng: perturbed(ex, perturb, rng)
