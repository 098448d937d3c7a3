"""The common cases of a plug-in in a few lines (docs/plugins.md; examples/ has one of each).

- ``ExamplesSuite``: score sets of examples with the candidate. A subclass gives ``load(task,
  params) -> {set name: [Example]}`` (labels in the task's label space); it gets the standard
  rows and predictions file, the task's metric (accuracy or weighted F1) per set and accuracy
  per group, leaderboard columns, re-scoring and gold-label checks.
- ``LossMethod``: fine-tune with my loss. A subclass gives ``loss(logits, y)``; it trains with
  the harness's recipe parameters (epochs, lr, ...), keeping the best ID-dev checkpoint.
- ``PruneMethod``: prune with my score. A subclass gives ``score(layer) -> tensor`` (higher
  keeps; ``layer`` has the matrix's name, weight and its input's statistics over a calibration
  pass), or a whole ``prune(layer, sparsity, params)`` rule; each prunable matrix of the start model
  (the recipe's fine-tuned model, or a checkpoint as it is) keeps its top (1 - s) weights, per
  matrix or per output row, or N of every M; then the subnetwork is fine-tuned again with
  cross-entropy for ``retrain_epochs`` (0: not at all).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, ClassVar

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
from bench.errors import BenchError
from bench.metrics import accuracy, id_metric
from bench.model.backbone import load_classifier, load_tokenizer
from bench.model.losses import ce
from bench.model.masking import apply_masks
from bench.model.oneshot import Layer, calibration_sample, keep_mask, parse_pattern, prune_sequentially
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
                         info={"best_step": result.best_step, "best_dev": result.best_dev, "train_seconds": result.seconds,
                               "kept": [result.kept()]})


SMOOTHED = {"safer": "SAFER", "ranmask": "RanMASK"}  # the smoothing-trained start models, by smoothing
STARTS = ("finetune", "checkpoint", *SMOOTHED)


@dataclass
class StartParams(TrainParams):
    """A method that compresses a model it is given: the recipe's fine-tuned model, or the
    ``--backbone`` checkpoint as it is; the leaderboard compares it with that model."""

    # the model compressed: the recipe's fine-tuned model, "checkpoint" (--backbone as it is), or the
    # recipe's model trained for randomized smoothing, "safer" or "ranmask" (the smoothing_aware method)
    start: str = "finetune"
    label_map: str = ""  # with start=checkpoint: its label names mapped onto the task's (see the checkpoint method)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.start not in STARTS:
            raise BenchError(f"start must be one of {', '.join(STARTS)}, got '{self.start}'")

    def start_need(self) -> Need:
        if self.start == "checkpoint":
            return Need("checkpoint", None, {"label_map": self.label_map})
        if self.start in SMOOTHED:
            return Need("smoothing_aware", None, {"smoothing": self.start, **self.recipe()})
        return finetuned(self.recipe())

    def start_label(self) -> str:
        """How a label says where the compressed model came from ("" for the fine-tuned one)."""
        if self.start in SMOOTHED:
            return f"from {SMOOTHED[self.start]}-trained"
        return "from checkpoint" if self.start == "checkpoint" else ""


class CompressMethod(Method):
    """A method whose Params are ``StartParams``: it requires the model it compresses and is
    compared with it on the leaderboard."""

    def requires(self, p: StartParams, sparsity: float | None, reference: Need) -> list[Need]:
        return [p.start_need()]

    def baseline(self, p: StartParams, reference: Need) -> Need:
        return p.start_need()


@dataclass
class PruneParams(StartParams):
    retrain_epochs: float = 1.0  # 0: one-shot, no retraining
    calibration: int = 128  # calibration examples (a seeded sample of the training split) for Layer's statistics
    pattern: str = "unstructured"  # or N:M: the N highest of every M consecutive weights of a row are kept (2:4, 4:8)

    def __post_init__(self) -> None:
        super().__post_init__()
        parse_pattern(self.pattern)
        if not (math.isfinite(self.retrain_epochs) and self.retrain_epochs >= 0):
            raise BenchError(f"retrain_epochs must be at least 0 (0: no retraining), got {self.retrain_epochs}")
        if self.calibration < 1:
            raise BenchError(f"calibration must be at least 1 example, got {self.calibration}")


class PruneMethod(CompressMethod):
    """Prune the start model's prunable matrices encoder block by encoder block with a score (or
    a whole rule), from input statistics of a calibration pass (``bench.model.oneshot``), then
    retrain for ``retrain_epochs`` (0: none)."""

    Params = PruneParams
    sparse = True
    labelled = ("loss", "pattern", "start")
    group: ClassVar[str] = "layer"  # where scores compete: the whole matrix ("layer") or each output row ("row")
    hessian: ClassVar[bool] = False  # whether ``prune`` needs Layer.hessian (an in x in matrix per layer)

    def score(self, layer: Layer) -> torch.Tensor:
        """Higher keeps; the shape of ``layer.weight``."""
        raise NotImplementedError

    def prune(self, layer: Layer, sparsity: float, p: PruneParams) -> torch.Tensor:
        """The layer's new weight, pruned weights zero: by default the top scores of each group kept."""
        return layer.weight * keep_mask(self.score(layer).float(), sparsity, self.group, parse_pattern(p.pattern))

    def label(self, p: PruneParams) -> str:
        parts = [p.pattern] if p.pattern != "unstructured" else []
        parts += [p.start_label()] if p.start_label() else []
        return f"{self.name} ({', '.join(parts)})" if parts else self.name

    def check(self, p: PruneParams, sparsity: float | None) -> None:
        nm = parse_pattern(p.pattern)
        if nm and sparsity is not None and abs(sparsity - (1 - nm[0] / nm[1])) > 1e-9:
            raise BenchError(f"pattern {p.pattern} keeps {nm[0]} of every {nm[1]} weights: --sparsity {1 - nm[0] / nm[1]:g}, "
                             f"not {sparsity:g}")

    def epochs(self, p: PruneParams, sparsity: float | None) -> float:
        return p.retrain_epochs

    def fixed_examples(self, p: PruneParams) -> int:
        return 2 * p.calibration  # a forward pass of the sample per encoder block, about a third of a training step each

    def build(self, ctx: Context, p: PruneParams) -> Candidate:
        start = ctx.require(p.start_need())
        model, tok = copy.deepcopy(start.model), start.tokenizer
        sample = calibration_sample(ctx.task.train, p.calibration, ctx.seed)
        masks = prune_sequentially(model, tok, sample, ctx.task.max_length, ctx.device,
                                   lambda layer: self.prune(layer, ctx.sparsity, p), hessian=self.hessian)
        apply_masks(model, masks)
        info = {"start_model": start.lineage.get("key"), "calibration": len(sample)}
        if p.retrain_epochs > 0:
            rp = TrainParams(**{**p.recipe(), "epochs": p.retrain_epochs})
            result = train(model, tok, ctx, rp, lambda logits, y, idx: ce(logits, y), desc=f"{self.name} retrain")
            info |= {"best_dev": result.best_dev, "kept": [result.kept()]}
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)
