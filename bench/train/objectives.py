"""Turns a loss name into the training loss of a method: fits the bias-only model (and, for
confidence regularisation, gets the standard fine-tuned teacher) so that every method that
trains with a debiasing loss uses it the same way; IMP included (docs/design.md section 7: the
published IMP trainer silently dropped the loss)."""

from __future__ import annotations

import numpy as np
import torch

from bench.api import Context
from bench.data.bias import fit_bias_model
from bench.metrics import accuracy
from bench.model import losses
from bench.model.predict import predict_logits
from bench.train.loop import LossFn


def make_loss(name: str, ctx: Context, model, tokenizer) -> tuple[LossFn, dict]:
    """(loss_fn(logits, y, idx), info) where info records the bias model's own accuracy."""
    if name == "ce":
        return (lambda logits, y, idx: losses.ce(logits, y)), {}
    bias = fit_bias_model(ctx.task, ctx.seed)
    p_bias = torch.tensor(bias.train_probs, dtype=torch.float32, device=ctx.device)
    info = {"bias_model": bias.description, **bias_accuracies(bias, ctx)}
    if name == "poe":
        return (lambda logits, y, idx: losses.poe(logits, y, p_bias[idx])), info
    if name == "reweight":
        return (lambda logits, y, idx: losses.reweight(logits, y, p_bias[idx])), info
    teacher = ctx.require(ctx.reference)  # the model F_bias compares with
    t_logits = predict_logits(teacher.model, teacher.tokenizer, ctx.task.train, ctx.task.max_length, ctx.device, ctx.precision)
    p_teacher = torch.softmax(torch.tensor(t_logits), -1).to(ctx.device)
    info["teacher"] = teacher.lineage.get("key", "finetune(ce)")
    return (lambda logits, y, idx: losses.confreg(logits, y, p_bias[idx], p_teacher[idx])), info


def bias_accuracies(bias, ctx: Context) -> dict[str, float]:
    """How strong the planted or natural bias is: the bias-only model's own accuracy in
    distribution (methods never see the OOD test sets; ``tests/bench/test_bias.py`` checks the
    synthetic OOD set defeats it)."""
    task = ctx.task
    y_tr = np.array([e.label for e in task.train])
    out = {
        "bias_acc/train_oof": accuracy(y_tr, bias.train_probs.argmax(1)),
        "bias_acc/test": accuracy(np.array([e.label for e in task.test]), bias.predict(task.test).argmax(1)),
    }
    return out
