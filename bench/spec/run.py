"""A run, resolved once: command-line flags and sweep-spec rows become one typed, validated,
frozen ``RunSpec`` before anything runs, and every later step reads it, never the raw strings.

``resolve`` is the only constructor: it looks the method, suite and task up in the registry,
types the method's and the suite's parameters as their own dataclasses, gives sparsity its one
meaning (a target in [0, 1) for a sparse method, ``None`` for a dense one) and checks what the
method and suite can check from their parameters alone. ``grid`` expands sparsities, seeds and
comma-separated parameter values into runs; ``bench run`` and every ``bench sweep`` group call it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.data.places import default_data_dir
from bench.errors import BenchError
from bench.model.masking import check_sparsity
from bench.registry import METHODS, SUITES, TASKS
from bench.spec.params import parse_params

DEVICES = ("cpu", "cuda")
PRECISIONS = ("fp32", "bf16")


def overrides(params: Any) -> dict:
    """A Params instance as the values that differ from their defaults: one spelling per
    configuration, so that run ids do not change when a default is written out."""
    if params is None:
        return {}
    defaults = {f.name: f.default for f in dataclasses.fields(params)}
    return {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(params).items() if v != defaults[k]}


@dataclass(frozen=True, eq=False)
class RunSpec:
    """One run: a method's candidate judged by a suite (``suite`` is "" for a candidate alone).

    ``params`` is the method's Params instance and ``suite_params`` the suite's (or None),
    both typed and validated by ``resolve``."""

    method: str
    suite: str
    task: str
    backbone: str
    seed: int
    sparsity: float | None
    params: Any
    suite_params: Any
    data_dir: str | None
    max_examples: int | None
    device: str
    precision: str
    compile: bool = False  # torch.compile the training forward

    def config(self) -> dict:
        """The run as plain data (parameters as their non-default values): what a record's
        provenance stores and what run and job ids hash."""
        conf = {"method": self.method, "suite": self.suite, "task": self.task, "backbone": self.backbone,
                "seed": self.seed, "sparsity": self.sparsity, "params": overrides(self.params),
                "suite_params": overrides(self.suite_params), "data_dir": self.data_dir,
                "max_examples": self.max_examples, "device": self.device, "precision": self.precision}
        return conf | ({"compile": True} if self.compile else {})  # absent when off: earlier ids stay valid

    def key(self) -> str:
        return json.dumps(self.config(), sort_keys=True, default=str)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunSpec) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    @property
    def data_path(self) -> Path | None:
        return Path(self.data_dir).expanduser() if self.data_dir else None

    def candidate(self) -> RunSpec:
        """The same run without its suite: what a build job makes and the cache keys."""
        return dataclasses.replace(self, suite="", suite_params=None)

    def with_method(self, method: str, sparsity: float | None, params: dict) -> RunSpec:
        """Another method's candidate on the same task, backbone, seed and device."""
        return resolve(method, "", task=self.task, backbone=self.backbone, seed=self.seed, sparsity=sparsity,
                       params=params, data_dir=self.data_dir, max_examples=self.max_examples, device=self.device,
                       precision=self.precision, compile=self.compile, check_backbone=False, default_sparsity=False)


@functools.cache
def _check_backbone(name: str) -> None:
    from bench.model.backbone import check_available
    from bench.model.backbone import resolve as find

    check_available(find(name))


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def resolve(method: str, suite: str, *, task: str = "nli_synth", backbone: str = "minilm", seed: int = 0,
            sparsity: float | None = None, params: dict | None = None, suite_params: dict | None = None,
            data_dir: str | None = None, max_examples: int | None = None, device: str = "cpu",
            precision: str = "fp32", compile: bool = False, check_backbone: bool = True,
            default_sparsity: bool = True) -> RunSpec:
    """A validated RunSpec, or a one-line BenchError naming what is wrong."""
    m = METHODS.get(method)
    TASKS.get(task)
    if device not in DEVICES:
        raise BenchError(f"unknown device '{device}'; choose {' or '.join(DEVICES)}")
    if precision not in PRECISIONS:
        raise BenchError(f"unknown precision '{precision}'; choose {' or '.join(PRECISIONS)}")
    if not isinstance(compile, bool):
        raise BenchError(f"compile must be true or false, got {compile!r}")
    if compile and device != "cuda":
        raise BenchError("--compile needs --device cuda (on CPU, torch.compile needs a C compiler and gains little)")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise BenchError(f"--seed must be a whole number >= 0, got {seed!r}")
    if max_examples is not None and max_examples < 1:
        raise BenchError(f"--max-examples must be at least 1, got {max_examples}")
    if sparsity is not None and not m.sparse:
        raise BenchError(f"method '{method}' is dense and takes no --sparsity")
    if m.sparse and sparsity is None and default_sparsity:
        sparsity = m.default_sparsity
    if sparsity is not None:
        sparsity = check_sparsity(float(sparsity))
    typed = parse_params(m.Params, params or {}, f"method '{method}'")
    m.check(typed, sparsity)
    typed_suite = None
    if suite:
        s = SUITES.get(suite)
        if s.Params is None:
            if suite_params:
                raise BenchError(f"suite '{suite}' takes no parameters (got {', '.join(suite_params)})")
        else:
            typed_suite = parse_params(s.Params, suite_params or {}, f"suite '{suite}'")
    if check_backbone:  # a dry run may plan for a machine that has the backbone
        _check_backbone(backbone)
    return RunSpec(method=method, suite=suite, task=task, backbone=backbone, seed=int(seed), sparsity=sparsity,
                   params=typed, suite_params=typed_suite, data_dir=data_dir or default_data_dir(), max_examples=max_examples,
                   device=device, precision=precision, compile=compile)


def grid(method: str, suite: str, sparsities: list[float] | None, seeds: list[int], *,
         params: dict | None = None, **common: Any) -> list[RunSpec]:
    """One run per sparsity x seed x combination of comma-separated (or listed) parameter
    values (``loss=ce,poe``), all validated before any work starts."""
    raw = params or {}
    lists = {k: v if isinstance(v, list) else v.split(",") if isinstance(v, str) and "," in v else [v]
             for k, v in raw.items()}
    combos = [dict(zip(lists, combo, strict=True)) for combo in itertools.product(*lists.values())]
    return [resolve(method, suite, sparsity=s, seed=seed, params=p, **common)
            for p in combos for seed in seeds for s in (sparsities or [None])]
