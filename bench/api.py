"""The two plug-in contracts: a Method makes a Candidate; a Suite judges any Candidate.

Neither side imports the other: both meet only here and in the runner, which finds them
through the registry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from bench.backbone import Backbone
from bench.data import TaskData
from bench.masking import SparsityReport, sparsity_report


@dataclass
class Context:
    """Everything a method or suite may use for one (task, backbone, seed, sparsity)."""

    task: TaskData
    backbone: Backbone
    seed: int
    sparsity: float | None
    device: torch.device
    precision: str  # "fp32" or "bf16" (autocast)
    # require(method, sparsity=None, **params) -> Candidate: another method's (cached) result
    require: Callable[..., Candidate]
    # parameters of the full standard-CE model for this run's recipe (F_bias reference, teacher)
    reference_params: dict = field(default_factory=dict)
    progress: bool = True
    suite_params: Any = None  # the suite's Params instance (suites only)
    data_dir: Path | None = None  # the user's data directory (resources such as word lists)
    scratch: Path | None = None  # a run's directory for a suite's partial results (resume)


@dataclass
class Candidate:
    """A model to judge, with its masks baked in, its sparsity and where it came from."""

    model: nn.Module
    tokenizer: Any
    lineage: dict
    info: dict = field(default_factory=dict)  # method-specific numbers worth recording
    sparsity: SparsityReport | None = None
    masks: dict[str, torch.Tensor] = field(default_factory=dict)  # filled when cached

    def __post_init__(self) -> None:
        if self.sparsity is None:
            self.sparsity = sparsity_report(self.model)


class Method(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type]  # a dataclass; every field is a --param with a default
    sparse: ClassVar[bool] = False  # takes --sparsity
    default_sparsity: ClassVar[float] = 0.5  # when --sparsity is not given

    def label(self, params: Any) -> str:
        """The leaderboard row label, e.g. 'finetune (poe)'."""
        loss = getattr(params, "loss", None)
        return f"{self.name} ({loss})" if loss else self.name

    def lineage_extra(self, task: TaskData, data_dir: Path | None, params: Any) -> dict:
        """Inputs beyond the task's ID data that decide the candidate (OOD training data, a
        distillation corpus, a student checkpoint): part of its cache key."""
        return {}

    def check(self, params: Any, sparsity: float | None) -> None:
        """Reject a parameter / sparsity combination before any work starts (BenchError)."""
        return None

    @abstractmethod
    def build(self, ctx: Context, params: Any) -> Candidate: ...


@dataclass
class SuiteResult:
    metrics: dict[str, float]
    predictions: list[dict]  # one row per evaluated example
    details: dict = field(default_factory=dict)  # e.g. per-cell HANS numbers, set sizes


class Suite(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type | None] = None  # a dataclass of --suite-param values, or None

    @abstractmethod
    def evaluate(self, candidate: Candidate, ctx: Context) -> SuiteResult: ...

    def fingerprint(self, data_dir: Path | None) -> dict:
        """What, beyond the task's data and the suite's parameters, decides this suite's numbers
        (resource files of a data directory, library versions): part of every run's id."""
        return {}

    def compare(self, metrics: dict[str, float], reference: dict[str, float]) -> dict[str, float]:
        """Metrics relative to the full standard-CE model of the same backbone, task and seed."""
        return {}
