"""The common cases of a plug-in in a few lines (docs/plugins.md; examples/ has one of each).

- ``ExamplesSuite``: score sets of examples with the candidate. A subclass gives ``load(task,
  params) -> {set name: [Example]}`` (labels in the task's label space); it gets the standard
  rows and predictions file, the task's metric (accuracy or weighted F1) per set and accuracy
  per group, leaderboard columns, re-scoring and gold-label checks.
- ``LossMethod``: fine-tune with my loss. A subclass gives ``loss(logits, y)``; it trains with
  the harness's recipe parameters (epochs, lr, ...), keeping the best ID-dev checkpoint.
- ``PruneMethod``: prune with my score. A subclass gives ``score(weight) -> tensor`` (higher
  keeps); each prunable matrix of the recipe's fine-tuned model keeps its top (1 - s) weights,
  then the subnetwork is fine-tuned again with cross-entropy for ``retrain_epochs``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bench.api import (
    Candidate,
    Column,
    Context,
    Example,
    Method,
    Need,
    Suite,
    SuiteResult,
    TaskData,
)
from bench.metrics import accuracy, id_metric
from bench.model.backbone import load_classifier, load_tokenizer
from bench.model.losses import ce
from bench.model.masking import apply_masks, prunable_linears, top_masks
from bench.model.predict import predict_logits, prediction_rows
from bench.train.loop import TrainParams, train


def finetuned(recipe: dict, loss: str = "ce", checkpoint_step: int = 0) -> Need:
    """The fully fine-tuned model of ``recipe`` (or its checkpoint at ``checkpoint_step``)."""
    return Need("finetune", None, {"loss": loss, "checkpoint_step": checkpoint_step, **recipe})


class ExamplesSuite(Suite):
    def load(self, task: TaskData, params: Any) -> dict[str, list[Example]]:
        raise NotImplementedError

    def sets(self, task: TaskData, params: Any) -> dict[str, list[Example]]:
        return {"test": task.test, **self.load(task, params)}

    def check(self, params: Any, task: TaskData, data_dir) -> None:
        self.load(task, params)  # a set that cannot be made fails before anything trains

    def evaluate(self, candidate: Candidate, ctx: Context) -> SuiteResult:
        task, rows = ctx.task, []
        sets = self.sets(task, ctx.suite_params)
        for name, examples in sets.items():
            logits = predict_logits(candidate.model, candidate.tokenizer, examples, task.max_length, ctx.device, ctx.precision)
            rows += prediction_rows(name, examples, logits, logits.argmax(1))
        details = {"id_metric": task.id_metric, "sizes": {n: len(e) for n, e in sets.items()}, "sets": list(sets)}
        return SuiteResult(metrics=self.score(rows, details), predictions=rows, details=details)

    def score(self, rows: list[dict], details: dict) -> dict[str, float]:
        out = {}
        for name in details["sets"]:
            mine = [r for r in rows if r["set"] == name]
            y, p = np.array([r["gold"] for r in mine]), np.array([r["pred"] for r in mine])
            out["id" if name == "test" else f"{self.name}/{name}"] = id_metric(details["id_metric"], y, p)
            for g in sorted({r.get("group") or "" for r in mine} - {""}):
                sel = np.array([r.get("group") == g for r in mine])
                out[f"{self.name}/{name}/{g}"] = accuracy(y[sel], p[sel])
        return out

    def columns(self, details: dict, metrics: dict[str, float]) -> list[Column]:
        f1 = details.get("id_metric") == "f1_weighted"
        cols = [Column("id", "ID F1" if f1 else "ID acc", rows=("test",))]
        cols += [Column(f"{self.name}/{n}", n, rows=(n,), primary=i == 0) for i, n in enumerate(s for s in details["sets"] if s != "test")]
        cols += [Column(k, k.split("/", 1)[1], table=f"{self.name} groups") for k in metrics if k.count("/") == 2]
        return [c for c in cols if c.key in metrics]


class LossMethod(Method):
    Params = TrainParams

    def loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def label(self, p: TrainParams) -> str:
        return self.name

    def build(self, ctx: Context, p: TrainParams) -> Candidate:
        tok = load_tokenizer(ctx.backbone)
        model = load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed)
        result = train(model, tok, ctx, p, lambda logits, y, idx: self.loss(logits, y), desc=self.name)
        return Candidate(model=model, tokenizer=tok, lineage={},
                         info={"best_step": result.best_step, "best_dev": result.best_dev, "train_seconds": result.seconds})


@dataclass
class PruneParams(TrainParams):
    retrain_epochs: float = 1.0


class PruneMethod(Method):
    Params = PruneParams
    sparse = True

    def score(self, weight: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def label(self, p: PruneParams) -> str:
        return self.name

    def requires(self, p: PruneParams, sparsity: float | None, reference: Need) -> list[Need]:
        return [finetuned(p.recipe())]

    def build(self, ctx: Context, p: PruneParams) -> Candidate:
        start = ctx.require(finetuned(p.recipe()))
        model, tok = copy.deepcopy(start.model), start.tokenizer
        scores = {name: self.score(lin.weight.detach()).float() for name, lin in prunable_linears(model).items()}
        apply_masks(model, top_masks(scores, ctx.sparsity))
        rp = TrainParams(epochs=p.retrain_epochs, lr=p.lr, batch_size=p.batch_size, weight_decay=p.weight_decay,
                         warmup_ratio=p.warmup_ratio, eval_every=p.eval_every, max_grad_norm=p.max_grad_norm)
        result = train(model, tok, ctx, rp, lambda logits, y, idx: ce(logits, y), desc=f"{self.name} retrain")
        return Candidate(model=model, tokenizer=tok, lineage={},
                         info={"start_model": start.lineage.get("key"), "best_dev": result.best_dev})
