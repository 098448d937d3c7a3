"""The one training loop: AdamW with linear warm-up and decay, evaluation on ID dev every N
steps, the best checkpoint by ID dev only, dynamic padding, optional bf16 autocast, seeded;
on CUDA also TF32, fused AdamW, pinned transfers, length buckets and optional compile
(``bench.model.accel``).

Methods customise it with a loss function (which sees the batch's example indices, so
per-example bias or teacher probabilities can be looked up) and a step hook (IMP prunes there).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import torch
from torch import nn
from tqdm import tqdm
from transformers import get_linear_schedule_with_warmup

from bench.api import Context
from bench.data.examples import Example
from bench.errors import BenchError
from bench.metrics import id_metric
from bench.model import accel
from bench.model.losses import LOSSES
from bench.model.predict import autocast, collate, encode, predict_logits

LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]  # (logits, y, idx)
StepFn = Callable[[nn.Module, dict, torch.Tensor, torch.Tensor, int, int], torch.Tensor]


@dataclass
class TrainParams:
    """Fine-tuning recipe (docs/design.md section 4, SRNet's MNLI recipe scaled to CPU epochs)."""

    loss: str = "ce"
    epochs: float = 2.0
    lr: float = 5e-5
    batch_size: int = 32
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    eval_every: int = 0  # steps between ID-dev evaluations; 0 = twice per epoch
    max_grad_norm: float = 1.0

    ALLOWED_LOSSES: ClassVar[tuple[str, ...]] = LOSSES  # a method that cannot use a loss narrows this

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise BenchError(f"unknown loss '{self.loss}'; choose from {', '.join(LOSSES)}")
        if self.loss not in self.ALLOWED_LOSSES:
            raise BenchError(f"this method trains with loss {' | '.join(self.ALLOWED_LOSSES)} only, not '{self.loss}'")
        for name in ("epochs", "lr", "max_grad_norm"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise BenchError(f"parameter '{name}' must be a positive finite number, got {value}")
        if self.batch_size < 1 or self.eval_every < 0 or not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise BenchError("batch_size must be at least 1, eval_every and weight_decay at least 0")
        if not 0 <= self.warmup_ratio < 1:
            raise BenchError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")

    def recipe(self) -> dict:
        """The training recipe without its loss: what the fine-tuned start model, a teacher or
        the F_bias reference shares with the method that needs it."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(TrainParams) if f.name != "loss"}


@dataclass
class TrainResult:
    steps: int
    best_step: int
    best_dev: float
    seconds: float
    history: list[dict] = field(default_factory=list)

    def kept(self, stage: str = "training") -> list:
        """[stage, step kept, steps run]: which checkpoint the model is, the best on dev, as a
        candidate's ``info["kept"]`` lists it (shown beside its robustness numbers)."""
        return [stage, self.best_step, self.steps]


def total_steps(n_train: int, p: TrainParams) -> int:
    return max(1, math.ceil(p.epochs * math.ceil(n_train / p.batch_size)))


def train(
    model: nn.Module,
    tokenizer,
    ctx: Context,
    p: TrainParams,
    loss_fn: LossFn,
    on_step: Callable[[int, int], None] | None = None,
    on_eval: Callable[[int, int], None] | None = None,
    select_from: Callable[[int], bool] = lambda step: True,
    groups: list[dict] | None = None,
    stop_at: int = 0,
    step_fn: StepFn | None = None,
    restart: frozenset[int] = frozenset(),
    desc: str = "train",
    augment: Callable[[Example, random.Random], Example] | None = None,
) -> TrainResult:
    """Train in place; on return the model holds the best checkpoint by ID dev.

    ``on_step(step, total)`` runs before each optimizer step (step counts from 0) and
    ``on_eval(step, total)`` before each ID-dev evaluation (SRNet resets its thresholds there);
    ``select_from(step)`` says whether a checkpoint at this step may be selected (IMP: only
    once the target sparsity is reached). ``groups`` replaces the default AdamW parameter
    groups (all trainable parameters, decay on matrices); only their parameters are updated
    and clipped. ``stop_at`` > 0 stops at that step of the same schedule and returns the model
    there (an intermediate fine-tuning checkpoint), not the best one. ``step_fn(model, inputs,
    y, idx, step, total)`` replaces the forward pass, loss and backward of a step (it calls
    backward itself and returns the loss); ``loss_fn`` is then unused. At each step in ``restart``
    (after ``on_step``) the optimizer and its schedule start afresh over the remaining steps
    (IMP's "optimizer rewinding" at every prune, SRNet's released ``trainer_imp.py``).
    ``augment(example, rng)`` gives each example of a batch a fresh random copy, drawn anew every
    time the example comes round (SAFER's and RanMASK's training for randomized smoothing).
    """
    task, device = ctx.task, ctx.device
    torch.manual_seed(ctx.seed)
    model.to(device).train()
    forward = accel.compiled(model, ctx.compile)
    enc = encode(tokenizer, task.train, task.max_length)
    lengths = [len(e["input_ids"]) for e in enc]
    labels = torch.tensor([ex.label for ex in task.train])
    steps_per_epoch = math.ceil(len(enc) / p.batch_size)
    total = total_steps(len(enc), p)
    if stop_at > total:
        raise BenchError(f"checkpoint step {stop_at} is beyond the {total} steps of this recipe")
    last = stop_at or total
    eval_every = p.eval_every or max(1, steps_per_epoch // 2)
    if groups is None:
        trainable = [q for q in model.parameters() if q.requires_grad]
        groups = [{"params": [q for q in trainable if q.ndim >= 2], "weight_decay": p.weight_decay},
                  {"params": [q for q in trainable if q.ndim < 2], "weight_decay": 0.0}]
    params = [q for g in groups for q in g["params"]]

    def optimizer(remaining: int):
        opt = accel.adamw([{"lr": p.lr, **g} for g in groups if g["params"]], p.lr, device)
        return opt, get_linear_schedule_with_warmup(opt, int(p.warmup_ratio * remaining), remaining)

    opt, sched = optimizer(total)
    gen = torch.Generator().manual_seed(ctx.seed)
    rng = random.Random(ctx.seed)
    best = TrainResult(steps=last, best_step=-1, best_dev=-math.inf, seconds=0.0)
    best_state = None
    t0 = time.time()
    step = 0
    bar = tqdm(total=last, desc=desc, disable=not ctx.progress, leave=False, dynamic_ncols=True)
    while step < last:
        for idx in accel.batch_order(lengths, p.batch_size, gen, bucket=device.type == "cuda"):
            if step >= last:
                break
            if on_step:
                on_step(step, total)
            if step in restart and step > 0:
                opt, sched = optimizer(total - step)
            items = [enc[i] for i in idx] if augment is None else \
                encode(tokenizer, [augment(task.train[i], rng) for i in idx], task.max_length)
            inputs = accel.to_device(collate(items, tokenizer.pad_token_id), device)
            if step_fn is None:
                with autocast(device, ctx.precision):
                    logits = forward(**inputs).logits
                loss = loss_fn(logits.float(), labels[idx].to(device), idx)
            else:  # e.g. FreeLB: several forward/backward passes per optimizer step
                loss = step_fn(model, inputs, labels[idx].to(device), idx, step, total)
            if not torch.isfinite(loss):
                raise BenchError(f"loss became {loss.item()} at step {step} (lr {p.lr}, loss {p.loss}); lower --param lr")
            if step_fn is None:
                loss.backward()
            torch.nn.utils.clip_grad_norm_(params, p.max_grad_norm)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            bar.update(1)
            if step % eval_every == 0 or step == last:
                if on_eval:
                    on_eval(step, total)
                dev = evaluate_dev(model, tokenizer, ctx)
                best.history.append({"step": step, "loss": loss.item(), "dev": dev})
                bar.set_postfix(loss=f"{loss.item():.3f}", dev=f"{dev:.3f}")
                eligible = step == stop_at if stop_at else select_from(step)
                if eligible and dev > best.best_dev:
                    best.best_dev, best.best_step = dev, step
                    best_state = copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})
                model.train()
    bar.close()
    if best_state is None:
        raise BenchError("no checkpoint was eligible for selection; train longer (--param epochs)")
    model.load_state_dict(best_state)
    best.seconds = time.time() - t0
    return best


def evaluate_dev(model: nn.Module, tokenizer, ctx: Context) -> float:
    logits = predict_logits(model, tokenizer, ctx.task.dev, ctx.task.max_length, ctx.device, ctx.precision)
    return id_metric(ctx.task.id_metric, np.array([e.label for e in ctx.task.dev]), logits.argmax(1))
