"""A fine-tuned checkpoint judged as it is: the ``--backbone`` directory (or cached hub id) with
its own classification head, no training. The question a practitioner brings is what compressing
*their* model does to its robustness; this is its dense starting point, and the ``start`` of the
post-training methods.

Labels are matched by name between the checkpoint's ``id2label`` and the task's labels (case and
``-``/``_``/space aside), or through ``label_map`` ("theirs:ours+..."); the head's output rows are
reordered into the task's label order, so that every suite reads the task's label ids. A
checkpoint whose labels cannot be matched is refused in preflight, before any job runs, naming
both label sets. The record names the checkpoint (its backbone) and the sha256 of its weight
files (``provenance.backbone.files``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench.api import Candidate, Context, Method, Need, TaskData
from bench.errors import BenchError
from bench.model.backbone import Backbone, load_finetuned, load_tokenizer
from bench.registry import METHODS


@dataclass
class CheckpointParams:
    # "theirs:ours+...": the checkpoint's label names mapped onto the task's, where they differ
    # (LABEL_0:negative+LABEL_1:positive; a comma would make a grid of runs)
    label_map: str = ""

    def __post_init__(self) -> None:
        self.mapping()

    def mapping(self) -> dict[str, str]:
        out = {}
        for part in filter(None, (s.strip() for s in self.label_map.split("+"))):
            theirs, colon, ours = part.partition(":")
            if not colon or not theirs.strip() or not ours.strip():
                raise BenchError(f"label_map must be theirs:ours pairs joined by '+' (LABEL_0:negative+LABEL_1:positive), got '{part}'")
            out[_norm(theirs)] = ours.strip()
        return out


def _norm(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def label_order(id2label: dict[int, str], task_labels: tuple[str, ...], mapping: dict[str, str]) -> list[int]:
    """For each task label in order, the checkpoint's output index that means it; a one-line
    error naming both label sets when they cannot be matched one to one."""
    ours = {_norm(t): i for i, t in enumerate(task_labels)}
    found: dict[int, int] = {}
    for idx, name in id2label.items():
        target = _norm(mapping.get(_norm(name), name))
        if target in ours:
            found.setdefault(ours[target], int(idx))
    theirs = [id2label[i] for i in sorted(id2label)]
    if len(id2label) != len(task_labels) or len(found) != len(task_labels) or len(set(found.values())) != len(task_labels):
        raise BenchError(f"the checkpoint's labels {theirs} do not match the task's {list(task_labels)} one to one; "
                         "name them with --param label_map=THEIRS:OURS+...")
    return [found[i] for i in range(len(task_labels))]


@torch.no_grad()
def reorder_head(model, order: list[int]) -> None:
    """The head's output rows in the task's label order (the last Linear with one row per label)."""
    n = model.config.num_labels
    out = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == n][-1]
    idx = torch.tensor(order)
    out.weight.copy_(out.weight[idx].clone())
    if out.bias is not None:
        out.bias.copy_(out.bias[idx].clone())


@METHODS.register("checkpoint")
class Checkpoint(Method):
    name = "checkpoint"
    description = "a fine-tuned classification checkpoint (--backbone) judged as it is: its own head, labels matched by name"
    Params = CheckpointParams
    labelled = ()

    def label(self, p: CheckpointParams) -> str:
        return "checkpoint (as is)"

    def requires(self, p, sparsity, reference) -> list:
        return []

    def baseline(self, p: CheckpointParams, reference: Need) -> Need:
        return Need("checkpoint", None, {"label_map": p.label_map})  # itself: what its compressions are compared with

    def epochs(self, p, sparsity) -> float:
        return 0.0

    def check_inputs(self, p: CheckpointParams, task: TaskData, backbone: Backbone) -> None:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(backbone.path, local_files_only=backbone.local_only, trust_remote_code=False)
        if not getattr(config, "architectures", None) or not any("SequenceClassification" in a for a in config.architectures):
            raise BenchError(f"backbone {backbone.name} is not a sequence-classification checkpoint "
                             f"(architectures: {getattr(config, 'architectures', None)}); fine-tune it with --method finetune")
        label_order({int(k): v for k, v in config.id2label.items()}, task.labels, p.mapping())

    def build(self, ctx: Context, p: CheckpointParams) -> Candidate:
        model = load_finetuned(ctx.backbone)
        order = label_order({int(k): v for k, v in model.config.id2label.items()}, ctx.task.labels, p.mapping())
        reorder_head(model, order)
        theirs = {int(k): v for k, v in model.config.id2label.items()}
        labels = {ours: theirs[i] for ours, i in zip(ctx.task.labels, order, strict=True)}
        return Candidate(model=model, tokenizer=load_tokenizer(ctx.backbone), lineage={},
                         info={"checkpoint": ctx.backbone.name, "labels": labels})
