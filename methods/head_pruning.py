"""Attention-head pruning (Michel et al., "Are Sixteen Heads Really Better than One?", NeurIPS
2019; Du et al. 2023, section 3; docs/design.md section 4).

On the fine-tuned full model, a gate xi_{l,h} = 1 multiplies every head's output; a head's
importance is E|dL/dxi_{l,h}| over the training data (CE loss, |gradient| summed per batch,
``bench.model.heads``). The least important ``fraction`` of all heads (20 % by default: 28 of 144 in
BERT-base, 14 of 72 in MiniLM-L6) is removed at once (``schedule=one_shot``), or in ``rounds``
equal steps with importance measured again between them with the removed heads gated to 0
(``iterative``, as Michel et al. section 5). The heads are then physically removed (rows of Q,
K, V, columns of the output projection), so the model is smaller and faster. The pruned model
is used as it is, as Michel et al. and Du et al. do; ``retrain_epochs`` > 0 fine-tunes it again
with the task recipe. A layer never loses all of its heads unless ``allow_empty_layers=true``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from bench.api import Candidate, Context, Method, Need
from bench.data.examples import stratified_sample
from bench.errors import BenchError
from bench.model.backbone import load_tokenizer
from bench.model.heads import HeadGates, heads_to_prune, remove_heads
from bench.model.losses import ce
from bench.model.predict import autocast, collate, encode
from bench.registry import METHODS
from bench.train.loop import TrainParams, train
from methods.kit import finetuned


@dataclass
class HeadPruningParams(TrainParams):
    """The inherited recipe fine-tunes the start model; ``retrain_epochs`` > 0 fine-tunes the
    pruned one again with it (Michel et al. 2019 and Du et al. 2023 do not)."""

    ALLOWED_LOSSES: ClassVar[tuple[str, ...]] = ("ce",)

    fraction: float = 0.2
    schedule: Literal["one_shot", "iterative"] = "one_shot"
    rounds: int = 2  # iterative only
    importance_examples: int = 0  # 0: the whole training set
    allow_empty_layers: bool = False
    retrain_epochs: float = 0.0  # 0: the pruned model as it is, as published

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.fraction < 1.0:
            raise BenchError(f"head fraction must be in [0, 1), got {self.fraction}")
        if self.retrain_epochs < 0 or not math.isfinite(self.retrain_epochs):
            raise BenchError(f"retrain_epochs must be >= 0, got {self.retrain_epochs}")
        if self.rounds < 1 or self.importance_examples < 0:
            raise BenchError("rounds must be at least 1 and importance_examples at least 0")



def head_importance(model, tokenizer, ctx: Context, gates: HeadGates, batch_size: int, limit: int = 0) -> torch.Tensor:
    """E|dL/dxi| over the training set (Michel et al. 2019, eq. 2), normalised per layer by its
    L2 norm (their default) so that layers compare."""
    task = ctx.task
    examples = stratified_sample(task.train, limit, seed=0) if limit else task.train  # never the first N
    enc = encode(tokenizer, examples, task.max_length)
    y = torch.tensor([e.label for e in examples])
    model.to(ctx.device).eval()  # no dropout: the importance of the model as it predicts
    for s in range(0, len(enc), batch_size):
        batch = {k: v.to(ctx.device) for k, v in collate(enc[s : s + batch_size], tokenizer.pad_token_id).items()}
        with autocast(ctx.device, ctx.precision):
            logits = model(**batch).logits
        ce(logits, y[s : s + batch_size].to(ctx.device)).backward()
        gates.accumulate()
    model.zero_grad(set_to_none=True)
    imp = gates.importance / max(gates.batches, 1)
    return imp / imp.norm(dim=1, keepdim=True).clamp_min(1e-12)


@METHODS.register("head_pruning")
class HeadPruning(Method):
    name = "head_pruning"
    description = "attention-head pruning by gate importance (Michel et al. 2019), heads physically removed, then fine-tuned"
    Params = HeadPruningParams

    def label(self, p: HeadPruningParams) -> str:
        return f"head pruning {p.fraction:.0%} ({p.schedule.replace('_', '-')})"

    def requires(self, p: HeadPruningParams, sparsity: float | None, reference: Need) -> list[Need]:
        return [finetuned(p.recipe())]  # the fine-tuned model whose heads are scored

    def epochs(self, p: HeadPruningParams, sparsity: float | None) -> float:
        return p.retrain_epochs + (p.rounds if p.schedule == "iterative" else 1)  # importance: forward + backward

    def build(self, ctx: Context, p: HeadPruningParams) -> Candidate:
        start = ctx.require(finetuned(p.recipe()))
        model = copy.deepcopy(start.model)
        tok = load_tokenizer(ctx.backbone)
        gates = HeadGates(model)
        rounds = p.rounds if p.schedule == "iterative" else 1
        chosen: dict[int, list[int]] = {}
        history = []
        for r in range(rounds):
            for layer, heads in chosen.items():
                gates.keep[layer, heads] = 0.0
            gates.importance.zero_()
            gates.batches = 0
            importance = head_importance(model, tok, ctx, gates, p.batch_size, p.importance_examples)
            chosen = heads_to_prune(importance, p.fraction * (r + 1) / rounds, p.allow_empty_layers, chosen)
            history.append({"round": r + 1, "importance": importance.tolist(), "pruned": sum(map(len, chosen.values()))})
        gates.remove()
        remove_heads(model, chosen)
        for q in model.parameters():
            q.requires_grad_(True)
        info = {"start_model": start.lineage.get("key"), "pruned_heads": {str(k): v for k, v in chosen.items()},
                "heads_removed": sum(map(len, chosen.values())), "importance_rounds": history}
        if p.retrain_epochs > 0:
            result = train(model, tok, ctx, TrainParams(loss="ce", **{**p.recipe(), "epochs": p.retrain_epochs}),
                           lambda logits, y, idx: ce(logits, y), desc=f"head-pruned {p.fraction:.0%}")
            info.update(best_step=result.best_step, best_dev=result.best_dev, train_steps=result.steps, kept=[result.kept()],
                        train_seconds=result.seconds, history=result.history)
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)
