"""What a run needs before it can run, from the registry alone (no runner): the candidates its
method declares in ``Method.requires`` (the model masks start from, a teacher, the IMP models of
RMC's stage 1), and the reference run its suite compares with (F_bias is measured against the
full model of the registry's reference method, with the same recipe, task, backbone and seed,
for a candidate that trains; otherwise only against the model ``--reference`` names).

``bench run`` and ``bench sweep`` plan with these two functions, and the runner checks every
``ctx.require`` against ``needed``, so a plan is never missing a build.
"""

from __future__ import annotations

import dataclasses

from bench.api import Need
from bench.errors import BenchError
from bench.registry import METHODS, SUITES
from bench.spec.run import RunSpec, reference_record
from bench.train.loop import TrainParams


def reference_method() -> str:
    """The registered method whose ``loss=ce`` model every F_bias is measured against: the one
    that declares ``reference = True`` (the built-in ``finetune``)."""
    found = [name for name in METHODS.names() if getattr(METHODS.get(name), "reference", False)]
    if len(found) != 1:
        raise BenchError(f"exactly one method must declare reference = True, found {found or 'none'}")
    return found[0]


def reference_need(spec: RunSpec) -> Need:
    """The full standard-CE model with the same training recipe as ``spec``'s method."""
    recipe = {f.name: getattr(spec.params, f.name) for f in dataclasses.fields(TrainParams)
              if f.name != "loss" and hasattr(spec.params, f.name)}
    return Need(reference_method(), None, recipe)


def needed(spec: RunSpec) -> list[RunSpec]:
    """The candidates (suite-less specs) that ``spec``'s method declares it will require."""
    method = METHODS.get(spec.method)
    return [spec.with_method(n.method, n.sparsity, n.params)
            for n in method.requires(spec.params, spec.sparsity, reference_need(spec))]


def baseline_of(spec: RunSpec) -> RunSpec:
    """The candidate ``spec``'s candidate is compared with, whatever its suite: the one its
    method names (``Method.baseline``; by default the full standard-CE model with the same
    recipe). Every record names it, so that the leaderboard's reference is declared by the
    records, not by a method's name."""
    need = METHODS.get(spec.method).baseline(spec.params, reference_need(spec))
    return spec.with_method(need.method, need.sparsity, need.params)


def baseline_run(spec: RunSpec) -> RunSpec | None:
    """The evaluation, by ``spec``'s suite, of the candidate ``spec``'s is compared with
    (``baseline_of``), whose predictions loyalty is measured against; None when the candidate
    is its own baseline."""
    base = baseline_of(spec)
    if base.candidate() == spec.candidate():
        return None
    return dataclasses.replace(base, suite=spec.suite, suite_params=spec.suite_params)


def trains_itself(spec: RunSpec) -> bool:
    """Whether ``spec``'s method makes passes over the training set to build its candidate, what
    it requires aside (``Method.epochs``; a one-shot prune's calibration sample is no training)."""
    return METHODS.get(spec.method).epochs(spec.params, spec.sparsity) > 0


def trains(spec: RunSpec) -> bool:
    """Whether building ``spec``'s candidate trains anything, what it requires included: not a
    checkpoint judged as it is, nor one quantized or pruned one-shot without retraining."""
    return trains_itself(spec) or any(trains(n) for n in needed(spec))


def reference_of(spec: RunSpec) -> RunSpec | None:
    """The run whose metrics ``spec``'s suite compares with (``Suite.compare``); None when the
    suite compares nothing, when the reference is a record file (``spec.reference``: the runner
    reads it), or when none is named for a candidate that trains nothing: a model judged as it
    is must not pull hours of fine-tuning in, so its F_bias is left out. It may be
    ``spec`` itself (the reference compares with itself). A named checkpoint folder is that
    checkpoint judged as it is by the same suite: the record ``bench run --method checkpoint
    --backbone DIR`` would make."""
    if not spec.suite or not SUITES.get(spec.suite).compares:
        return None
    if spec.reference:
        if reference_record(spec.reference) is not None:
            return None
        named = dataclasses.replace(spec.with_method("checkpoint", None, {}), backbone=spec.reference)
        return dataclasses.replace(named, suite=spec.suite, suite_params=spec.suite_params)
    if not trains(spec.candidate()):
        return None
    need = reference_need(spec)
    ref = spec.with_method(need.method, None, need.params)
    return dataclasses.replace(ref, suite=spec.suite, suite_params=spec.suite_params)
