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
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.data.places import default_data_dir
from bench.errors import BenchError
from bench.registry import METHODS, SUITES, TASKS, did_you_mean
from bench.spec.params import convert, parse_params
from bench.store.records import Record, load_record

DEVICES = ("cpu", "cuda")
PRECISIONS = ("fp32", "bf16")
SEEDS = 2**32  # numpy's and scikit-learn's seeds are below it (torch's below 2**64)


def overrides(params: Any) -> dict:
    """A Params instance as the values that differ from their defaults: one spelling per
    configuration, so that run ids do not change when a default is written out."""
    if params is None:
        return {}
    defaults = {f.name: f.default for f in dataclasses.fields(params)}
    return {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(params).items() if v != defaults[k]}


def _field(help: str, kind: str, default: Any = dataclasses.MISSING, *, axis: bool = False, choices: tuple = (),
           bounds: tuple | None = None, omit_default: bool = False):
    """A run field and what every interface derives from it: its help, its kind (``text``,
    ``count``, ``number``, ``flag`` or ``table`` of parameters), whether it is a grid axis (a list
    in a sweep spec, several values on the command line), its allowed values, its range
    ``[low, high)`` (``high`` None: no upper end), and whether its default is left out of the
    run's configuration (a field added later: earlier run ids stay). Its type is its annotation."""
    meta = {"help": help, "kind": kind, "axis": axis, "choices": choices, "bounds": bounds, "omit_default": omit_default}
    return field(metadata=meta) if default is dataclasses.MISSING else field(default=default, metadata=meta)


@dataclass(frozen=True, eq=False)
class RunSpec:
    """One run: a method's candidate judged by a suite (``suite`` is "" for a candidate alone).

    The one declaration of a run's fields: ``bench run``'s options, a sweep spec's keys and
    their types, the defaults, the configuration a run id hashes and a candidate's lineage are
    all read from these fields and their metadata (``_field``). ``params`` is the method's Params
    instance and ``suite_params`` the suite's (or None), both typed and validated by ``resolve``."""

    method: str = _field("the method (bench ls)", "text", axis=True)
    suite: str = _field("the suite that judges the candidates (bench ls)", "text", axis=True)
    task: str = _field("the task (bench ls)", "text", "nli_synth", axis=True)
    backbone: str = _field("'minilm' (embedded), a local model directory or a hub id", "text", "minilm", axis=True)
    seed: int = _field("training seeds", "count", 0, axis=True, bounds=(0, SEEDS))
    sparsity: float | None = _field("target sparsities in [0, 1) (a sparse method's default if none)", "number", None,
                                    axis=True, bounds=(0, 1))
    params: Any = _field("method parameter KEY=VALUE (see 'bench ls'); KEY=a,b is a grid axis", "table", None)
    suite_params: Any = _field("suite parameter KEY=VALUE (see 'bench ls')", "table", None)
    data_dir: str | None = _field("folder of the real data files (docs/data.md; default $BENCH_DATA, else "
                                  "~/.local/share/robust-compression-bench/data)", "text", None)
    max_examples: int | None = _field("cap every split at N examples (stratified, seeded)", "count", None, bounds=(1, None))
    device: str = _field("where to train and evaluate", "text", "cpu", choices=DEVICES)
    precision: str = _field("bf16 autocast or fp32", "text", "fp32", choices=PRECISIONS)
    compile: bool = _field("torch.compile the training forward (worth it on a GPU)", "flag", False, omit_default=True)
    reference: str | None = _field("what F_bias compares with: a checkpoint folder (judged as it is by the same suite) "
                                   "or a record JSON file of the same task and suite (default: the recipe's fine-tuned "
                                   "model; none for a candidate that trains nothing, such as a checkpoint)", "text", None,
                                   omit_default=True)

    def config(self) -> dict:
        """The run as plain data (parameters as their non-default values): what a record's
        provenance stores and what run and job ids hash."""
        conf = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.metadata["kind"] == "table":
                value = overrides(value)
            if not (f.metadata["omit_default"] and value == f.default):
                conf[f.name] = value
        return conf

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
        return dataclasses.replace(self, suite="", suite_params=None, reference=None)

    def with_method(self, method: str, sparsity: float | None, params: dict) -> RunSpec:
        """Another method's candidate on the same task, backbone, seed and device."""
        shared = {f.name: getattr(self, f.name) for f in FIELDS if f.name not in OWN}
        return resolve(method, "", sparsity=sparsity, params=params, check_backbone=False, default_sparsity=False,
                       **shared)


FIELDS = dataclasses.fields(RunSpec)
FIELD_NAMES = tuple(f.name for f in FIELDS)
DEFAULTS = {f.name: f.default for f in FIELDS if f.default is not dataclasses.MISSING}
OWN = ("method", "suite", "sparsity", "params", "suite_params", "reference")  # what one candidate asks of another's
TYPES = typing.get_type_hints(RunSpec)


def check_field(name: str, value: Any, *, parse: bool = True) -> Any:
    """One value of a run field, typed by its annotation (``bench.spec.params.convert``: text
    read as the type when ``parse``, the command line; a sweep spec's values must already be of
    it), then checked against its allowed values and range; a text field is not empty. Both
    front doors go through it before anything runs: ``bench run`` by ``resolve``, a sweep spec
    when it is loaded (and ``resolve`` again)."""
    f = next(f for f in FIELDS if f.name == name)
    value = convert(value, TYPES[name], name, parse=parse)
    if value == "" and TYPES[name] is str:
        raise BenchError(f"{name} expects a name, got ''")
    if f.metadata["choices"] and value not in f.metadata["choices"]:
        raise BenchError(f"unknown {name} {value!r}; choose {' or '.join(f.metadata['choices'])}")
    if f.metadata["bounds"] and value is not None:
        low, high = f.metadata["bounds"]
        if not (low <= value and (high is None or value < high)):  # NaN is in no range
            raise BenchError(f"{name} must be in [{low}, {high}), got {value}" if high is not None else
                             f"{name} must be at least {low}, got {value}")
    return value


@functools.cache
def _check_backbone(name: str) -> None:
    from bench.model.backbone import check_available
    from bench.model.backbone import resolve as find

    check_available(find(name))


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def resolve(method: str, suite: str, *, check_backbone: bool = True, default_sparsity: bool = True,
            **values: Any) -> RunSpec:
    """A validated RunSpec from a method, a suite and any other field of ``RunSpec`` (the rest
    take their defaults), or a one-line BenchError naming what is wrong."""
    if unknown := sorted(set(values) - set(FIELD_NAMES)):
        raise BenchError(f"unknown run field '{unknown[0]}'{did_you_mean(unknown[0], list(FIELD_NAMES))}")
    v = {k: x if k in ("params", "suite_params") else check_field(k, x) for k, x in (DEFAULTS | values).items()}
    method, suite = check_field("method", method), suite and check_field("suite", suite)  # "": a candidate alone
    task, backbone, seed, sparsity, device, precision, compile, max_examples = (
        v["task"], v["backbone"], v["seed"], v["sparsity"], v["device"], v["precision"], v["compile"], v["max_examples"])
    params, suite_params, data_dir, reference = v["params"], v["suite_params"], v["data_dir"], v["reference"]
    m = METHODS.get(method)
    TASKS.get(task)
    if compile and device != "cuda":
        raise BenchError("--compile needs --device cuda (on CPU, torch.compile needs a C compiler and gains little)")
    if sparsity is not None and not m.sparse:
        raise BenchError(f"method '{method}' is dense and takes no --sparsity")
    if m.sparse and sparsity is None and default_sparsity:
        sparsity = m.default_sparsity
    sparsity = check_field("sparsity", sparsity)  # the method's default too
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
    if reference is not None:
        _check_reference(reference, task, suite, check_backbone)
    return RunSpec(method=method, suite=suite, task=task, backbone=backbone, seed=int(seed), sparsity=sparsity,
                   params=typed, suite_params=typed_suite, data_dir=data_dir or default_data_dir(), max_examples=max_examples,
                   device=device, precision=precision, compile=compile, reference=reference)


def reference_record(reference: str) -> Record | None:
    """The record file ``--reference`` names, read (None when it names a checkpoint folder, whose
    evaluation is a job of the plan); a one-line error when it names neither."""
    path = Path(reference).expanduser()
    if path.is_dir():
        return None
    if not path.is_file():
        raise BenchError(f"--reference {reference}: no such checkpoint folder or record file")
    try:
        record = load_record(path)
    except BenchError as e:
        raise BenchError(f"--reference: {e}") from None
    if not isinstance(record.metrics, dict) or isinstance(record.metrics.get("id"), bool) or not isinstance(
            record.metrics.get("id"), int | float):
        raise BenchError(f"--reference {reference}: a run record without a numeric 'id' metric")
    return record


def _check_reference(reference: Any, task: str, suite: str, check_backbone: bool) -> None:
    """A named F_bias reference: a checkpoint folder (judged by the same suite, in the plan) or a
    record of the same task and suite, for a suite that compares with one."""
    if not isinstance(reference, str) or not reference:
        raise BenchError(f"--reference must name a checkpoint folder or a record file, got {reference!r}")
    if not suite or not SUITES.get(suite).compares:
        raise BenchError(f"--reference: suite '{suite}' compares nothing with a reference (F_bias is the ood suite's)")
    record = reference_record(reference)
    if record is None:
        if check_backbone:
            _check_backbone(reference)
    elif (record.task, record.suite) != (task, suite):
        raise BenchError(f"--reference {reference}: a record of task '{record.task}' and suite '{record.suite}', "
                         f"not of '{task}' and '{suite}'")


def as_list(value: Any) -> list:
    """A grid axis's values: a list as it is, one value as a list of it."""
    return list(value) if isinstance(value, list | tuple) else [value]


def param_values(value: Any) -> list:
    """A parameter's values in a grid: a list's, comma-separated text's (``loss=ce,poe``), or the one."""
    return list(value) if isinstance(value, list) else value.split(",") if isinstance(value, str) and "," in value else [value]


def grid(check_backbone: bool = True, **values: Any) -> list[RunSpec]:
    """Every run of a group of values: one per combination of its axes (each a value or a list:
    method, suite, task, backbone, then the method's parameters, seed, sparsity) and of the
    method's comma-separated (or listed) parameter values (``loss=ce,poe``), all validated
    before any work starts. ``bench run`` and every ``bench sweep`` group call it."""
    outer = [f.name for f in FIELDS if f.metadata["axis"] and f.name not in ("seed", "sparsity")]
    raw = values.get("params") or {}
    lists = {k: param_values(v) for k, v in raw.items()}
    combos = [dict(zip(lists, combo, strict=True)) for combo in itertools.product(*lists.values())]
    rest = {k: v for k, v in values.items() if k not in (*outer, "params", "seed", "sparsity")}
    out = []
    for head in itertools.product(*(as_list(values[k]) if k in values else [None] for k in outer)):
        fixed = {k: check_field(k, x) for k, x in zip(outer, head, strict=True) if x is not None}  # no suite ""
        for p in combos:
            for seed in as_list(values.get("seed", 0)):
                for s in as_list(values.get("sparsity")):
                    out.append(resolve(**fixed, sparsity=s, seed=seed, params=p,
                                       check_backbone=check_backbone, **rest))
    return out
