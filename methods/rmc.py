"""RMC: variance-smoothed distillation for robust compression, with its baselines.

Du et al., "Robustness Challenges in Model Distillation and Pruning for Natural Language
Understanding", EACL 2023, section 5 (docs/design.md section 4); no public code exists.

Stage 1, sample difficulty: the models IMP prunes to five sparsities (cached ``imp`` artifacts,
default 0.2, 0.4, 0.6, 0.7, 0.85) give every training example a loss each; v_i is the variance
of its five losses and

    d_i = alpha + (1 - alpha) (v_i - V_min) / (V_max - V_min)          (alpha: 0.5 NLI, 0.3 FEVER, 0.2 QQP)

Stage 2, robust distillation: the fine-tuned full model's probabilities p_t are smoothed per
example, s_i = p_t^(d_i) / sum(p_t^(d_i)) (hard examples keep their teacher, easy ones are
flattened), and the student minimises (1 - lambda) CE(y) + lambda KL(s_i || p_student), lambda
= 0.9. Students: a model IMP prunes to the run's sparsity during this training (``student=imp``,
40 % by default) or the backbone truncated to its first ``student_layers`` layers (half by
default) until a distilled student is available.

Baselines at the same student and budget (``objective``): ``vanilla`` CE; ``distil`` the teacher
unsmoothed (d = 1); ``smooth`` one global d = 0.9; ``focal`` focal loss, gamma = 2, the modulating
factor (1 - p_y)^gamma normalised to mean 1 over the batch; ``jtt`` just-train-twice: the
training examples that an ERM model trained ``jtt_epochs`` epochs (the identification model)
gets wrong, up-weighted by 2 with fixed weights normalised to mean 1 over the training set.

For MNLI the hypothesis-only hardness flags of ``mnli/dev_matched_hardness.csv`` (Gururangan et
al. 2018) come with the data; the record keeps how often the variance split (top half = hard)
agrees with them on the training examples (the paper reports 82.8 % on MNLI dev), and the OOD
suite reports every candidate's accuracy on the easy and hard test halves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from bench.api import Candidate, Context, Method, Need
from bench.errors import BenchError
from bench.metrics import check_sparsity
from bench.model.arch import layers as encoder_layers
from bench.model.arch import truncate
from bench.model.backbone import load_classifier, load_tokenizer
from bench.model.predict import predict_logits
from bench.registry import METHODS
from bench.train.loop import TrainParams, train
from methods.kit import IMPHook, finetuned

TASK_ALPHA = {"mnli": 0.5, "mnli_full": 0.5, "nli_synth": 0.5, "fever": 0.3, "qqp": 0.2}
EPS = 1e-12


# --- the formulas ---------------------------------------------------------------------------------
def difficulty(variance: np.ndarray, alpha: float) -> np.ndarray:
    """d_i = alpha + (1 - alpha)(v_i - V_min)/(V_max - V_min), in [alpha, 1]."""
    span = variance.max() - variance.min()
    if span <= 0:
        return np.ones_like(variance)
    return alpha + (1 - alpha) * (variance - variance.min()) / span


def smooth(p_teacher: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """s_i proportional to p_t^(d_i): d = 1 keeps the teacher, d -> 0 tends to uniform."""
    logp = torch.log(p_teacher.clamp_min(EPS)) * d.view(-1, 1)
    return torch.softmax(logp, dim=-1)


def distill_loss(logits: torch.Tensor, y: torch.Tensor, target: torch.Tensor, lam: float) -> torch.Tensor:
    """(1 - lambda) CE(y) + lambda KL(target || p_student), averaged over the batch."""
    logp = F.log_softmax(logits.float(), -1)
    kl = (target * (torch.log(target.clamp_min(EPS)) - logp)).sum(-1)
    return ((1 - lam) * F.nll_loss(logp, y, reduction="none") + lam * kl).mean()


def focal_loss(logits: torch.Tensor, y: torch.Tensor, gamma: float) -> torch.Tensor:
    """Du et al. 2023, appendix C: FL_i = -(1 - p_i)^gamma / ((1/N) sum_k (1 - p_k)^gamma) log p_i,
    averaged over the batch. The modulating factor is part of the loss and is differentiated, as
    in Lin et al. 2017 (eq. 5); the batch mean that normalises it is a constant (Du et al. do not
    say; normalising with a gradient would make a batch of one plain cross-entropy)."""
    logp = F.log_softmax(logits.float(), -1).gather(1, y[:, None]).squeeze(1)
    m = (1 - logp.exp()) ** gamma
    return -(m / m.detach().mean().clamp_min(EPS) * logp).mean()


def jtt_weights(wrong: torch.Tensor, up: float) -> torch.Tensor:
    """JTT (Liu et al. 2021): the identification model's errors weighted ``up``, the rest 1, fixed
    for the whole run and normalised once over the training set to mean 1 (Du et al. 2023,
    appendix C), not per batch."""
    w = torch.where(wrong, torch.full_like(wrong, up, dtype=torch.float32), torch.ones_like(wrong, dtype=torch.float32))
    return w / w.mean()


def weighted_ce(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (w * F.cross_entropy(logits.float(), y, reduction="none")).mean()


# --- the method -----------------------------------------------------------------------------------
@dataclass
class RMCParams(TrainParams):
    """The inherited recipe trains the teacher, the IMP models of stage 1 and the student."""

    objective: Literal["rmc", "vanilla", "distil", "smooth", "focal", "jtt"] = "rmc"
    student: Literal["imp", "truncated"] = "imp"
    student_layers: int = 0  # truncated student: 0 = half of the teacher's layers
    alpha: float = 0.0  # 0 = the task's value (0.5 NLI, 0.3 FEVER, 0.2 QQP)
    sparsities: str = "0.2:0.4:0.6:0.7:0.85"  # stage 1 IMP models, colon-separated
    lam: float = 0.9
    smooth_d: float = 0.9
    focal_gamma: float = 2.0
    jtt_up: float = 2.0
    jtt_epochs: float = 1.0  # T, the ERM identification model's epochs (Liu et al. 2021 tune it per task)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.loss != "ce":
            raise BenchError("rmc trains with its objective (objective=rmc|vanilla|distil|smooth|focal|jtt), not loss=")
        if self.alpha != 0.0 and not 0.0 < self.alpha <= 1.0:
            raise BenchError(f"alpha must be in (0, 1] (or 0 for the task's value), got {self.alpha}")
        if len(self.stage1()) < 2:
            raise BenchError(f"RMC needs at least two pruned models to measure variance, got sparsities '{self.sparsities}'")
        if not 0 <= self.lam <= 1 or not 0 < self.smooth_d <= 1 or self.focal_gamma < 0 or self.jtt_up < 1:
            raise BenchError("lam must be in [0, 1], smooth_d in (0, 1], focal_gamma >= 0, jtt_up >= 1")
        if not (math.isfinite(self.jtt_epochs) and self.jtt_epochs > 0):
            raise BenchError(f"jtt_epochs must be a positive number, got {self.jtt_epochs}")
        if self.student_layers < 0:
            raise BenchError(f"student_layers must be >= 0, got {self.student_layers}")

    def stage1(self) -> list[float]:
        try:
            values = [float(s) for s in self.sparsities.split(":") if s.strip()]
        except ValueError as e:
            raise BenchError(f"sparsities must be numbers separated by ':', got '{self.sparsities}'") from e
        return [check_sparsity(s) for s in values]


@METHODS.register("rmc")
class RMC(Method):
    name = "rmc"
    description = ("RMC (Du et al. 2023): variance-smoothed distillation into a pruned / truncated student; "
                   "objective=vanilla|distil|smooth|focal|jtt baselines")
    Params = RMCParams
    sparse = True

    def label(self, p: RMCParams) -> str:
        student = "IMP student" if p.student == "imp" else f"truncated {p.student_layers or 'half'}-layer student"
        return f"{p.objective} ({student})"

    default_sparsity = 0.4

    def check(self, p: RMCParams, sparsity: float | None) -> None:
        p.stage1()
        if p.student == "truncated" and sparsity:
            raise BenchError("student=truncated is a dense, smaller model: pass --sparsity 0")

    def requires(self, p: RMCParams, sparsity: float | None, reference: Need) -> list[Need]:
        teacher = [finetuned(p.recipe())]
        first = [_jtt_first(p)] if p.objective == "jtt" else []
        return teacher + first + ([Need("imp", s, p.recipe()) for s in p.stage1()] if p.objective == "rmc" else [])

    def epochs(self, p: RMCParams, sparsity: float | None) -> float:
        inference = 1 + (len(p.stage1()) if p.objective == "rmc" else 0)  # teacher and stage-1 losses
        return p.epochs + inference / 3  # a forward pass costs about a third of a training step

    def build(self, ctx: Context, p: RMCParams) -> Candidate:
        tok = load_tokenizer(ctx.backbone)
        task = ctx.task
        y = torch.tensor([e.label for e in task.train])
        teacher = ctx.require(finetuned(p.recipe()))
        t_logits = torch.tensor(predict_logits(teacher.model, teacher.tokenizer, task.train, task.max_length,
                                               ctx.device, ctx.precision))
        p_t = torch.softmax(t_logits, -1)
        info: dict = {"teacher": teacher.lineage.get("key")}
        if p.objective in ("rmc", "distil", "smooth"):
            if p.objective == "rmc":
                d, stage1 = self.difficulty(ctx, p, y)
                info.update(stage1)
            else:
                d = torch.full((len(y),), 1.0 if p.objective == "distil" else p.smooth_d)
            target = smooth(p_t, d).to(ctx.device)

            def loss_fn(logits, yb, idx):
                return distill_loss(logits, yb, target[idx], p.lam)
        elif p.objective == "focal":
            def loss_fn(logits, yb, idx):
                return focal_loss(logits, yb, p.focal_gamma)
        elif p.objective == "jtt":
            first = ctx.require(_jtt_first(p))
            f_logits = predict_logits(first.model, first.tokenizer, task.train, task.max_length, ctx.device, ctx.precision)
            wrong = torch.tensor(f_logits.argmax(-1)) != y
            weights = jtt_weights(wrong, p.jtt_up).to(ctx.device)
            info.update(jtt_first_model=first.lineage.get("key"), jtt_upweighted=int(wrong.sum()))

            def loss_fn(logits, yb, idx):
                return weighted_ce(logits, yb, weights[idx])
        else:
            def loss_fn(logits, yb, idx):
                return F.cross_entropy(logits.float(), yb)

        model, on_step, select_from, student_info = self.student(ctx, p, teacher.model)
        info.update(student_info)
        result = train(model, tok, ctx, TrainParams(loss="ce", **p.recipe()), loss_fn, on_step=on_step,
                       select_from=select_from, desc=f"rmc {p.objective} ({p.student})")
        info.update(best_step=result.best_step, best_dev=result.best_dev, train_steps=result.steps,
                    train_seconds=result.seconds, history=result.history)
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)

    @staticmethod
    def difficulty(ctx: Context, p: RMCParams, y: torch.Tensor) -> tuple[torch.Tensor, dict]:
        task = ctx.task
        losses = []
        for s in p.stage1():
            pruned = ctx.require(Need("imp", s, p.recipe()))
            logits = torch.tensor(predict_logits(pruned.model, pruned.tokenizer, task.train, task.max_length,
                                                 ctx.device, ctx.precision))
            losses.append(F.cross_entropy(logits, y, reduction="none").numpy())
        variance = np.var(np.stack(losses), axis=0)
        alpha = p.alpha or TASK_ALPHA.get(task.name, 0.5)
        d = difficulty(variance, alpha)
        info = {"alpha": alpha, "stage1_sparsities": p.stage1(), "difficulty_mean": float(d.mean()),
                "variance_median": float(np.median(variance))}
        flags = np.array([e.group for e in task.train])
        if set(flags) == {"easy", "hard"}:  # MNLI with the hypothesis-only hardness flags
            hard_by_variance = variance > np.median(variance)
            info["hardness_agreement"] = float((hard_by_variance == (flags == "hard")).mean())
        return torch.tensor(d, dtype=torch.float32), info

    @staticmethod
    def student(ctx: Context, p: RMCParams, teacher_model):
        """(model, on_step, select_from, info) for the student being trained."""
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        if p.student == "truncated":
            layers = encoder_layers(model)
            keep = p.student_layers or math.ceil(len(layers) / 2)
            if keep > len(layers):
                raise BenchError(f"student_layers={keep} is more than the teacher's {len(layers)} layers")
            truncate(model, keep)
            return model, None, lambda step: True, {"student": f"first {keep} of {len(layers)} layers"}
        hook = IMPHook(model, ctx.sparsity)
        return model, hook.on_step, hook.select_from, {"student": f"IMP to {ctx.sparsity:.0%} during distillation"}


def _jtt_first(p: RMCParams) -> Need:
    """JTT's identification model: ERM (standard CE) for ``jtt_epochs`` epochs of the recipe."""
    return finetuned({**p.recipe(), "epochs": p.jtt_epochs})
