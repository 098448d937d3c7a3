"""The core flow of one run: resolved spec -> cached or built candidate -> suite -> record.

Knows methods and suites only through the registry, and nothing of the command line. A record
is written once its run has finished, atomically; a rerun skips runs whose record exists, so an
interrupted sweep picks up where it stopped.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import torch

from bench import __version__
from bench.api import Candidate, Context, Method, Need, Suite
from bench.core import cache
from bench.core.assemble import SELF, assemble
from bench.core.provenance import (
    Provenance,
    device_info,
    git_state,
    peak_memory,
    reset_peak_memory,
    versions,
)
from bench.data.examples import TaskData
from bench.errors import BenchError
from bench.model import accel
from bench.model.backbone import load_classifier, resolve
from bench.model.efficiency import measure
from bench.model.masking import bake, current_masks, sparsity_report
from bench.model.quant import restore
from bench.registry import METHODS, SUITES, TASKS
from bench.spec.requires import baseline_of, baseline_run, needed, reference_need, reference_of
from bench.spec.run import RunSpec, digest, reference_record
from bench.store import clusters
from bench.store.atomic import intact
from bench.store.records import Record, finished, load_predictions, load_record, record_path, write_run


def torch_device(spec: RunSpec) -> torch.device:
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise BenchError("--device cuda was asked for but torch sees no CUDA device (CPU wheel or no GPU)")
    return torch.device(spec.device)


def check_result(suite: Suite, result, task: TaskData, params) -> None:
    """What every suite promises, checked before a record is written: finite metrics, and
    prediction rows that name examples of the sets it says it evaluated."""
    for key, value in result.metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise BenchError(f"suite '{suite.name}' broke its contract: metric '{key}' is {value!r}, not a finite number")
    sets = {name: {e.uid for e in exs} for name, exs in suite.sets(task, params).items()}
    for row in result.predictions:
        if not isinstance(row, dict) or not {"set", "uid"} <= row.keys():
            raise BenchError(f"suite '{suite.name}' broke its contract: a prediction row without 'set' and 'uid' ({row!r:.80})")
        if sets and row["uid"] not in sets.get(row["set"], ()):
            raise BenchError(f"suite '{suite.name}' broke its contract: prediction row {row['set']}/{row['uid']} "
                             "is not one of the examples it evaluated")


class Runner:
    def __init__(self, out: Path, progress: bool = True, log=print) -> None:
        self.out = Path(out)
        self.progress = progress
        self.log = log
        self._dense: dict[tuple, torch.nn.Module] = {}
        self._tasks: dict[tuple, TaskData | BenchError] = {}
        git_state(), versions()  # the code's commit and packages now, before hours of runs

    def task_data(self, spec: RunSpec) -> TaskData:
        """The run's task, read or generated once per runner, capped at ``max_examples``."""
        k = (spec.task, spec.data_dir, spec.max_examples)
        if k not in self._tasks:
            try:
                self._tasks[k] = TASKS.get(spec.task).load(spec.data_path).limited(spec.max_examples)
            except BenchError as e:  # missing data stays missing: a dry run of 900 jobs asks once
                self._tasks[k] = e
        if isinstance(self._tasks[k], BenchError):
            raise self._tasks[k]
        return self._tasks[k]

    # --- candidates ---------------------------------------------------------------------------
    def artifact(self, spec: RunSpec) -> tuple[Path, dict]:
        """Where the candidate of ``spec`` is cached, and its lineage (with its ``key``)."""
        lineage = cache.lineage(spec, self.task_data(spec))
        return self.out / "artifacts" / lineage["key"], lineage

    def candidate(self, spec: RunSpec) -> Candidate:
        """The cached candidate of ``spec``, or its method's build, cached."""
        art, lineage = self.artifact(spec)
        if intact(art):  # a damaged copy is said on stderr whatever the executor, and rebuilt
            return cache.load(art, lineage)
        method: Method = METHODS.get(spec.method)
        self.log(f"[bench] building {method.label(spec.params)} sparsity={spec.sparsity} seed={spec.seed} on {spec.task}")
        torch.manual_seed(spec.seed)
        cand = method.build(self.context(spec, for_suite=False), spec.params)
        cand.lineage = lineage
        labels = self.task_data(spec).labels  # a saved candidate is a standard checkpoint of the task (cache.export)
        cand.model.config.id2label, cand.model.config.label2id = dict(enumerate(labels)), {x: i for i, x in enumerate(labels)}
        cand.masks = current_masks(cand.model)
        bake(cand.model)  # the report counts the plain exported weights, nothing of the mask machinery
        cand.sparsity = sparsity_report(cand.model)
        if method.sparse and spec.sparsity and cand.sparsity.sparsity < spec.sparsity - 1e-3:  # rounding
            raise BenchError(f"{spec.method} reached sparsity {cand.sparsity.sparsity:.4f} below its target "
                             f"{spec.sparsity} (too few training steps? raise --param epochs or --max-examples)")
        cache.save(art, cand)
        cand.model = restore(cand.model, cand.info)  # as evaluated: int8 where the method quantized
        return cand

    def context(self, spec: RunSpec, for_suite: bool) -> Context:
        """What a method's build (no OOD test sets) or a suite's evaluation may use."""
        declared = needed(spec.candidate())

        def require(need: Need) -> Candidate:
            sub = spec.with_method(need.method, need.sparsity, need.params)
            if sub not in declared:
                raise BenchError(f"method '{spec.method}' requires {need.method} (sparsity {need.sparsity}) without "
                                 "declaring it in its requires(); declare it so that sweeps build it first")
            return self.candidate(sub)

        task = self.task_data(spec)
        accel.setup(torch_device(spec))  # TF32 on CUDA for every build and evaluation alike
        return Context(
            task=task if for_suite else task.for_methods(), backbone=resolve(spec.backbone), seed=spec.seed,
            sparsity=spec.sparsity, device=torch_device(spec), precision=spec.precision, require=require,
            reference=reference_need(spec), progress=self.progress, data_dir=spec.data_path,
            suite_params=spec.suite_params if for_suite else None,
            scratch=self.out / "partial" / self.run_id(spec) if for_suite else None, compile=spec.compile,
        )

    def dense(self, spec: RunSpec, num_labels: int):
        """The uncompressed architecture of the backbone, timed beside every candidate."""
        key = (spec.backbone, num_labels)
        if key not in self._dense:
            self._dense[key] = load_classifier(resolve(spec.backbone), num_labels, seed=0)
        return self._dense[key]

    # --- runs ----------------------------------------------------------------------------------
    def run_id(self, spec: RunSpec) -> str:
        task = self.task_data(spec)
        sp = "dense" if spec.sparsity is None else f"s{spec.sparsity:g}"
        conf = spec.config() | {"data": task.checksums(), "params": dataclasses.asdict(spec.params),
                                "backbone_fingerprint": resolve(spec.backbone).fingerprint()}
        if suite_fp := SUITES.get(spec.suite).fingerprint(spec.data_path, spec.suite_params):
            conf["suite"] = suite_fp
        conf.pop("data_dir")  # where the files are does not change the run; their checksums do
        if spec.reference:  # the named F_bias reference by its record, not by where it lies: a folder and
            named = reference_record(spec.reference)  # the record of its evaluation are one reference
            conf["reference"] = named.run_id if named else self.run_id(reference_of(spec))
        return f"{spec.task}__{spec.method}__{spec.suite}__{sp}__seed{spec.seed}__{digest(conf)}"

    def run(self, spec: RunSpec, force: bool = False) -> Record:
        """The record of ``spec``: read when it exists (unless ``force``), else made and written."""
        rid = self.run_id(spec)
        path = record_path(self.out, rid)
        if path.is_file() and not force:
            if finished(self.out, rid):
                self.log(f"[bench] {rid}: record exists, skipped")
                return load_record(path)
            self.log(f"[bench] {rid}: record has no predictions (made before they were kept), made again")
        t0 = time.time()
        reset_peak_memory(torch_device(spec))
        method: Method = METHODS.get(spec.method)
        suite: Suite = SUITES.get(spec.suite)
        cand = self.candidate(spec.candidate())
        ctx = self.context(spec, for_suite=True)
        self.log(f"[bench] evaluating {method.label(spec.params)} with suite {spec.suite}")
        result = suite.evaluate(cand, ctx)
        check_result(suite, result, ctx.task, spec.suite_params)
        task = ctx.task
        baseline = self._baseline_rows(spec)
        eff = measure(cand.model, cand.tokenizer, self.dense(spec, len(task.labels)), task.test or task.dev,
                      task.max_length, ctx.device, spec.precision, self.out / "artifacts" / cand.lineage["key"])
        if eff.timing["under_load"]:
            self.log(f"[bench] speeds measured under load: {eff.timing['under_load']}")
        reference, compared_with = self._reference(spec, rid, suite)
        got = assemble(suite, result.metrics, result.predictions, result.details, baseline=baseline,
                       kept=eff.metrics, reference=compared_with, declare=True)
        metrics = got.metrics
        judged = suite.ood_sets(task, spec.suite_params)

        def record_of(predictions: str, checksum: str) -> Record:
            return Record(
                run_id=rid, method=spec.method, label=method.label(spec.params), params=dataclasses.asdict(spec.params),
                variant=method.variant(spec.params), baseline=cache.lineage(baseline_of(spec), task)["key"],
                task=spec.task, backbone=spec.backbone, seed=spec.seed, suite=spec.suite,
                sparsity={"target": spec.sparsity, **cand.sparsity.to_dict()}, metrics=metrics, details=result.details,
                method_info=cand.info, predictions=predictions, predictions_sha256=checksum, reference=reference,
                artifact={"dir": f"../artifacts/{cand.lineage['key']}", "key": cand.lineage["key"]},
                provenance=dataclasses.asdict(Provenance(
                    config={k: v for k, v in spec.config().items() if k != "params"} | {"bench": __version__},
                    data={"note": task.note, "sources": [dataclasses.asdict(s) for s in task.sources]
                          + [dataclasses.asdict(o.source) for o in task.ood.values()]
                          + [dataclasses.asdict(o.source) for o in judged if o.name not in task.ood]},
                    device=device_info(ctx.device), wall_seconds=round(time.time() - t0, 2), memory=peak_memory(ctx.device),
                    backbone={"name": spec.backbone, "files": resolve(spec.backbone).fingerprint(),
                              "loaded_weights": getattr(cand.model.config, "bench_loaded_weights", None)},
                    plugins={kind: dataclasses.asdict(registry.origin(name)) for kind, registry, name in
                             (("method", METHODS, spec.method), ("suite", SUITES, spec.suite), ("task", TASKS, spec.task))},
                )),
                created=datetime.now(UTC).isoformat(timespec="seconds"),
                degenerate=got.degenerate, one_class=got.one_class, timing=eff.timing,
                columns=[c.to_dict() for c in got.columns],
            )

        for found in judged:
            if found.clusters:  # before the record that needs them
                clusters.write(self.out, found.name, found.examples, found.clusters, found.source.sha256)
        record = load_record(write_run(self.out, rid, result.predictions, record_of))
        shutil.rmtree(ctx.scratch, ignore_errors=True)
        self.log(f"[bench] wrote {path}" + (f" (degenerate: {record.degenerate})" if record.degenerate else ""))
        return record  # exactly what a later reader sees (undefined numbers as None)

    def _baseline_rows(self, spec: RunSpec) -> list[dict] | None:
        """The rows of the candidate this one is compared with (``baseline_run``), evaluated by
        the same suite first, for its loyalty; None for a candidate that is its own baseline."""
        base = baseline_run(spec)
        if base is None:
            return None
        return load_predictions(self.out / "records", self.run(base))

    def _reference(self, spec: RunSpec, rid: str, suite: Suite) -> tuple[str | None, dict | str | None]:
        """The reference run's id (this run's own when it is the reference; a named record's)
        and the metrics the suite compares this run's with (F_bias; ``SELF``: its own)."""
        if spec.reference and suite.compares and (named := reference_record(spec.reference)) is not None:
            return named.run_id, named.metrics
        ref = reference_of(spec)
        if ref is None:
            return None, None
        if ref == spec:
            return rid, SELF
        record = self.run(ref)
        return record.run_id, record.metrics
