"""Movement pruning (Sanh, Wolf and Rush 2020): pruning while fine-tuning from the pre-trained
weights, keeping the weights that move away from zero rather than the large ones.

Every prunable matrix gets a real-valued score per weight (initialised to 0: the released
``mask_init constant, mask_scale 0``) and W' = W * m(S) with a straight-through
gradient, so that dL/dS = W * dL/dW': trained with the weights, the scores accumulate
-W * dL/dW (section 4, the movement score). ``soft=false`` (movement pruning) keeps the top
fraction of each matrix's scores; ``soft=true`` (soft movement pruning) keeps sigmoid(S) > tau
and adds lambda * mean sigmoid(S) (the L1 penalty of the released code) to the loss.

The fraction kept (or tau) follows the released ``schedule_threshold``: unchanged for
``initial_warmup`` learning-rate warm-ups, then cubic (Zhu and Gupta 2018) to its final value,
held for the last ``final_warmup`` warm-ups; lambda grows with it. The best checkpoint on ID dev
is taken only once the final value is reached. ``distil=true`` adds the released code's
distillation from the recipe's fine-tuned model (alpha_distil KL at temperature 2 + alpha_ce CE).

Soft movement's sparsity is set by lambda, not by a target; here the target caps what is kept
from the hold on (so the kept checkpoint is selected with the cap): where more than (1 - s) of a
matrix's weights pass tau, the lowest scores among them are dropped. ``method_info.capped``
counts the matrices where tau alone kept more at the kept checkpoint, and
``sparsity_by_lambda`` gives the mean sparsity tau alone reached there. The distillation
teacher is fine-tuned with this recipe (lr 3e-5, batch 16). Budget: 2 epochs here, 10 in the
released commands (``epochs``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize

from bench.api import Candidate, Context, Method, Need
from bench.errors import BenchError
from bench.model.backbone import load_classifier, load_tokenizer
from bench.model.losses import ce
from bench.model.masking import ScoreMask, prunable_linears
from bench.model.predict import predict_logits
from bench.registry import METHODS
from bench.train.loop import TrainParams, total_steps, train
from methods.kit import finetuned


@dataclass
class MovementParams(TrainParams):
    lr: float = 3e-5  # released README: --learning_rate 3e-5
    batch_size: int = 16  # released README: --per_gpu_train_batch_size 16
    weight_decay: float = 0.0  # released masked_run_glue.py default
    mask_lr: float = 1e-2  # released README: --mask_scores_learning_rate 1e-2
    soft: bool = False  # soft movement pruning (sigmoid threshold and L1 penalty)
    initial_warmup: int = 1  # learning-rate warm-ups before pruning starts
    final_warmup: int = 2  # learning-rate warm-ups held at the final value at the end
    final_threshold: float = 0.1  # soft: the final tau (released README's soft command)
    final_lambda: float = 400.0  # soft: the final L1 strength (released README's soft command)
    distil: bool = False  # distil from the recipe's fine-tuned model as well
    alpha_distil: float = 0.5  # released masked_run_glue.py default
    alpha_ce: float = 0.5  # released masked_run_glue.py default
    temperature: float = 2.0  # released masked_run_glue.py default

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mask_lr <= 0 or self.initial_warmup < 0 or self.final_warmup < 0 or not 0 < self.final_threshold < 1:
            raise BenchError("mask_lr must be positive, initial_warmup and final_warmup at least 0, final_threshold in (0, 1)")
        if self.final_lambda < 0 or self.temperature <= 0 or min(self.alpha_ce, self.alpha_distil) < 0:
            raise BenchError("final_lambda, alpha_ce and alpha_distil must be at least 0 and temperature positive")


def schedule(step: int, total: int, warmup: int, initial: float, final: float, initial_warmup: int,
             final_warmup: int) -> float:
    """The released ``schedule_threshold``: ``initial`` for ``initial_warmup * warmup`` steps,
    ``final`` for the last ``final_warmup * warmup``, cubic in between."""
    if step <= initial_warmup * warmup:
        return initial
    if step > total - final_warmup * warmup:
        return final
    span = total - (initial_warmup + final_warmup) * warmup
    mul = 1 - (step - initial_warmup * warmup) / span
    return final + (initial - final) * mul**3


class TopKMask(nn.Module):
    """W -> W * m, m the top ``keep`` fraction of the scores recomputed at every forward (the
    released ``TopKBinarizer``: int(keep * numel) kept), with a straight-through gradient to the
    scores, so that a matrix is at its scheduled sparsity whatever its scores did since."""

    def __init__(self, shape: torch.Size) -> None:
        super().__init__()
        self.scores = nn.Parameter(torch.zeros(shape))  # released mask_init constant, mask_scale 0
        self.register_buffer("keep", torch.tensor(1.0, dtype=torch.float64))  # int(keep * numel) exact

    @property
    def mask(self) -> torch.Tensor:
        flat = self.scores.detach().flatten()
        m = torch.zeros_like(flat, dtype=torch.bool)
        m[torch.topk(flat, int(float(self.keep) * flat.numel())).indices] = True
        return m.view_as(self.scores)

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return w * (self.mask.to(w.dtype) + (self.scores - self.scores.detach()).to(w.dtype))


def _logit(tau: float) -> float:
    return -math.inf if tau <= 0 else math.log(tau / (1 - tau))


@METHODS.register("movement")
class Movement(Method):
    name = "movement"
    description = "movement pruning (Sanh et al. 2020): scores learned while fine-tuning, cubic schedule; soft=true for soft movement"
    Params = MovementParams
    sparse = True
    labelled = ("loss", "soft", "distil")

    def label(self, p: MovementParams) -> str:
        return ("soft movement" if p.soft else "movement") + (" (distilled)" if p.distil else "")

    def requires(self, p: MovementParams, sparsity: float | None, reference: Need) -> list[Need]:
        return [finetuned(p.recipe())] if p.distil else []

    def build(self, ctx: Context, p: MovementParams) -> Candidate:
        tok = load_tokenizer(ctx.backbone)
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        masks = []
        for lin in prunable_linears(model).values():
            mask = ScoreMask(torch.zeros_like(lin.weight), threshold=-math.inf) if p.soft else TopKMask(lin.weight.shape)
            parametrize.register_parametrization(lin, "weight", mask)
            masks.append(mask)
        teacher = None  # the fine-tuned model's logits on every training example, computed once
        if p.distil:
            t = ctx.require(finetuned(p.recipe()))
            teacher = torch.from_numpy(predict_logits(t.model, t.tokenizer, ctx.task.train, ctx.task.max_length, ctx.device,
                                                      ctx.precision)).to(ctx.device)
        total = total_steps(len(ctx.task.train), p)
        warmup = int(p.warmup_ratio * total)
        initial, final = (0.0, p.final_threshold) if p.soft else (1.0, 1.0 - ctx.sparsity)
        state = {"lambda": 0.0}
        held = total - p.final_warmup * warmup  # the first step whose update runs at the final value

        def on_step(step: int, total: int) -> None:
            level = schedule(step, total, warmup, initial, final, p.initial_warmup, p.final_warmup)
            for m in masks:
                if p.soft:
                    m.threshold.fill_(_logit(level))
                    if step >= held and float((~m.mask).float().mean()) < ctx.sparsity:
                        m.reset(ctx.sparsity)  # the target caps what passes tau during the hold (module docstring)
                else:
                    m.keep.fill_(level)
            state["lambda"] = p.final_lambda * level / final if p.soft else 0.0

        def loss_fn(logits, y, idx):
            loss = ce(logits, y)
            if teacher is not None:
                kl = F.kl_div(F.log_softmax(logits / p.temperature, -1), F.softmax(teacher[idx] / p.temperature, -1),
                              reduction="batchmean") * p.temperature**2
                loss = p.alpha_distil * kl + p.alpha_ce * loss
            if state["lambda"]:
                loss = loss + state["lambda"] * sum(torch.sigmoid(m.scores).mean() for m in masks) / len(masks)
            return loss

        scores = [m.scores for m in masks]
        ids = {id(s) for s in scores}
        rest = [q for q in model.parameters() if q.requires_grad and id(q) not in ids]
        groups = [{"params": scores, "lr": p.mask_lr, "weight_decay": 0.0},
                  {"params": [q for q in rest if q.ndim >= 2], "weight_decay": p.weight_decay},
                  {"params": [q for q in rest if q.ndim < 2], "weight_decay": 0.0}]
        result = train(model, tok, ctx, p, loss_fn, on_step=on_step, groups=groups, select_from=lambda step: step > held,
                       desc=f"{self.label(p)} {ctx.sparsity:.2f}")
        capped, by_lambda = 0, []
        for m in masks if p.soft else ():  # the kept checkpoint's scores: tau alone, or the cap where it keeps more
            by_lambda.append(float((m.scores.detach() < _logit(p.final_threshold)).float().mean()))
            if by_lambda[-1] < ctx.sparsity:
                capped += 1
                m.reset(ctx.sparsity)
            else:
                m.threshold.fill_(_logit(p.final_threshold))
        info = {"best_step": result.best_step, "best_dev": result.best_dev, "train_steps": result.steps,
                "kept": [result.kept()], "train_seconds": result.seconds, "history": result.history}
        soft = {"capped": capped, "sparsity_by_lambda": round(sum(by_lambda) / len(by_lambda), 4)} if p.soft else {}
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info | soft)
