"""The plug-in contracts: a Method makes a Candidate; a Suite judges any Candidate; a Command is
a ``bench`` subcommand that another package brings (the leaderboard's).

Neither side imports the other: both meet only here and in the runner, which finds them
through the registry. What a plug-in needs to read a task (``Example``, ``TaskData``) is
re-exported here, so that a plug-in imports ``bench.api`` and nothing else of the harness's
insides. Importing it needs no torch: a suite's ``score`` is a function of rows, and the
leaderboard checks records with it on machines without torch.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from bench.data.examples import EvalSet, Example, TaskData
from bench.model.backbone import Backbone
from bench.store.records import Column

if TYPE_CHECKING:
    import torch
    from torch import nn

    from bench.model.masking import SparsityReport

__all__ = ["Candidate", "Column", "Command", "Context", "EvalSet", "Example", "Method", "Need", "Suite", "SuiteResult",
           "TaskData", "confreg_teacher"]


@dataclass
class Context:
    """Everything a method or suite may use for one (task, backbone, seed, sparsity)."""

    task: TaskData
    backbone: Backbone
    seed: int
    sparsity: float | None
    device: torch.device
    precision: str  # "fp32" or "bf16" (autocast)
    # require(Need) -> Candidate: another method's (cached) result, declared by Method.requires
    require: Callable[[Need], Candidate]
    # the full standard-CE model of this run's recipe (the F_bias reference, a teacher)
    reference: Need | None = None
    progress: bool = True
    suite_params: Any = None  # the suite's Params instance (suites only)
    data_dir: Path | None = None  # the user's data directory (resources such as word lists)
    scratch: Path | None = None  # a run's directory for a suite's partial results (resume)
    compile: bool = False  # torch.compile the training forward (bench.model.accel)


@dataclass(frozen=True)
class Need:
    """Another method's candidate that a method's ``build`` asks for with ``ctx.require``
    (the model masks start from, a teacher, the IMP models of a stage). Declared up front by
    ``Method.requires`` so that a sweep builds it first, once, for every method that shares it."""

    method: str
    sparsity: float | None = None
    params: dict = field(default_factory=dict)


@dataclass
class Candidate:
    """A model to judge, with its masks baked in, its sparsity and where it came from."""

    model: nn.Module
    tokenizer: Any
    lineage: dict
    info: dict = field(default_factory=dict)  # the method's own numbers; ``kept``: [[stage, step kept, steps run], ...]
    sparsity: SparsityReport | None = None
    masks: dict[str, torch.Tensor] = field(default_factory=dict)  # filled when cached

    def __post_init__(self) -> None:
        if self.sparsity is None:
            from bench.model.masking import sparsity_report

            self.sparsity = sparsity_report(self.model)


class Method(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type]  # a dataclass; every field is a --param with a default
    sparse: ClassVar[bool] = False  # takes --sparsity
    default_sparsity: ClassVar[float] = 0.5  # when --sparsity is not given
    reference: ClassVar[bool] = False  # its loss=ce model is what F_bias compares with (one method)
    labelled: ClassVar[tuple[str, ...]] = ("loss",)  # the parameters ``label`` shows; the others tell variants apart

    def variant(self, params: Any) -> list[str]:
        """What tells this run's leaderboard row apart from others of its label: the parameters
        that differ from their defaults and that ``label`` does not show, as ``key=value``."""
        defaults = {f.name: f.default for f in dataclasses.fields(params)}
        values = dataclasses.asdict(params)
        return [f"{k}={v}" for k, v in sorted(values.items()) if v != defaults[k] and k not in self.labelled]

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

    def check_inputs(self, params: Any, task: TaskData, backbone: Backbone) -> None:
        """Reject what only the task or the backbone shows (a checkpoint's labels that do not
        match the task's), in preflight, before any job of the plan runs (BenchError)."""
        return None

    def requires(self, params: Any, sparsity: float | None, reference: Need) -> list[Need]:
        """Every candidate ``build`` will ``ctx.require``; ``reference`` is the full standard-CE
        model (the confidence-regularisation teacher). The runner refuses a ``require`` that is
        not declared here, so a sweep's plan is never incomplete."""
        return confreg_teacher(getattr(params, "loss", None), reference)

    def baseline(self, params: Any, reference: Need) -> Need:
        """The candidate this method's is compared with on the leaderboard (its records'
        ``baseline``): the full standard-CE model of the recipe (``reference``), or, for a
        method that compresses a given model, that model."""
        return reference

    def epochs(self, params: Any, sparsity: float | None) -> float:
        """Passes over the training set that ``build`` itself makes (requirements excluded),
        weighted by their cost relative to a fine-tuning pass, at ``sparsity`` (iterative pruning
        trains once a round): for sweep estimates only."""
        return float(getattr(params, "epochs", 0.0))

    def fixed_examples(self, params: Any) -> int:
        """Training examples ``build`` processes whatever the training set's size (a one-time
        distillation, counted as if not yet cached): for sweep estimates only."""
        return 0

    @abstractmethod
    def build(self, ctx: Context, params: Any) -> Candidate: ...


def confreg_teacher(loss: str | None, reference: Need) -> list[Need]:
    """Confidence regularisation distils from the full standard-CE model (docs/design.md section 4)."""
    return [reference] if loss == "confreg" else []


@dataclass
class SuiteResult:
    metrics: dict[str, float]
    predictions: list[dict]  # one row per evaluated example
    details: dict = field(default_factory=dict)  # e.g. per-cell HANS numbers, set sizes


class Suite(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type | None] = None  # a dataclass of --suite-param values, or None
    compares: ClassVar[bool] = False  # compare() needs the reference run's record (F_bias)

    @abstractmethod
    def evaluate(self, candidate: Candidate, ctx: Context) -> SuiteResult: ...

    def check(self, params: Any, task: TaskData, data_dir: Path | None) -> None:
        """Reject parameters that cannot work on this task (BenchError) before anything trains:
        ``bench run`` and ``bench sweep`` call it for every evaluation once the plan is made."""
        return None

    def fingerprint(self, data_dir: Path | None, params: Any = None) -> dict:
        """What, beyond the task's data and the suite's parameters, decides this suite's numbers
        (resource files of a data directory, library versions): part of every run's id."""
        return {}

    def compare(self, metrics: dict[str, float], reference: dict[str, float]) -> dict[str, float]:
        """Metrics relative to the full standard-CE model of the same backbone, task and seed."""
        return {}

    def columns(self, details: dict, metrics: dict[str, float]) -> list[Column]:
        """How the leaderboard shows this suite's metrics (undeclared ones still appear, under
        their own names, in a table of other metrics)."""
        return []

    def score(self, rows: list[dict], details: dict) -> dict[str, float] | None:
        """Every metric of an evaluation recomputed from its per-example rows and its details
        (what ``bench rescore`` checks a record with); None: this suite cannot re-score."""
        return None

    def sets(self, task: TaskData, params: Any) -> dict[str, list[Example]]:
        """The evaluated examples by the ``set`` name their rows carry, so that a re-score can
        check each row's gold label against the data; {} when the suite cannot say."""
        return {}

    def ood_sets(self, task: TaskData, params: Any) -> list[EvalSet]:
        """The out-of-distribution sets it judges, the task's and any a user gave: their data
        sources go into the record's provenance, and the clusters their examples declare beside
        the record (``bench.store.clusters``); [] for a suite that judges none."""
        return []

    def examples(self, sizes: dict[str, int], params: Any) -> float:
        """Model forward passes (in examples) one evaluation makes, given the task's split
        sizes (``test``, ``ood/<set>``): for sweep estimates only."""
        return float(sum(n for k, n in sizes.items() if k == "test" or k.startswith("ood/")))


class Command(ABC):
    """A ``bench`` subcommand registered through the ``bench.commands`` entry points, so that the
    harness's command line offers what packages above it do (the leaderboard, claims tables)
    without importing them. ``run`` returns the exit code; a ``BenchError`` is one line, exit 2."""

    name: ClassVar[str]
    help: ClassVar[str]

    def arguments(self, parser) -> None:
        """Add this command's options to its ``argparse`` parser (none by default)."""
        return None

    @abstractmethod
    def run(self, args) -> int: ...
