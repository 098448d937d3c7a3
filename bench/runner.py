"""The core flow: (method, params, task, backbone, seed, sparsity) -> cached candidate ->
suite -> record. Knows methods and suites only through the registry, and nothing of the CLI.

Caching: a candidate is stored under ``<out>/artifacts/<method>-<key>`` where key hashes its
whole lineage (method, resolved params, task and data checksums, backbone, seed, sparsity,
precision, device type), so a rerun or another suite reuses it. A record is written once its
run has finished, atomically; a rerun skips runs whose record exists, so an interrupted
sweep picks up where it stopped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from bench import __version__
from bench.api import Candidate, Context, Method, Need, Suite
from bench.backbone import Backbone, check_available, load_classifier, load_tokenizer, resolve
from bench.data import TaskData
from bench.efficiency import measure
from bench.errors import BenchError
from bench.heads import load_pruned
from bench.masking import bake, check_sparsity, current_masks, sparsity_report
from bench.params import parse_params
from bench.records import (
    Provenance,
    Record,
    device_info,
    git_state,
    load_record,
    versions,
    write_atomic,
)
from bench.registry import METHODS, SUITES, TASKS
from bench.train import TrainParams

REFERENCE_METHOD = "finetune"  # the full model F_bias is measured against, with loss=ce


@dataclass(frozen=True)
class RunSpec:
    method: str
    suite: str
    task: str = "nli_synth"
    backbone: str = "minilm"
    seed: int = 0
    sparsity: float | None = None
    params: dict = field(default_factory=dict)
    suite_params: dict = field(default_factory=dict)
    data_dir: str | None = None
    max_examples: int | None = None
    device: str = "cpu"
    precision: str = "fp32"


def expand(method: str, suite: str, sparsities: list[float] | None, seeds: list[int], **common) -> list[RunSpec]:
    """Several sparsities, seeds and comma-separated parameter values (``loss=ce,poe``) ->
    one run per combination, all validated before any work starts."""
    raw = common.pop("params", {}) or {}
    lists = {k: v if isinstance(v, list) else v.split(",") if isinstance(v, str) and "," in v else [v]
             for k, v in raw.items()}
    grid = [dict(zip(lists, combo, strict=True)) for combo in itertools.product(*lists.values())]
    return [spec for params in grid for spec in _expand_one(method, suite, sparsities, seeds, params=params, **common)]


def _expand_one(method: str, suite: str, sparsities: list[float] | None, seeds: list[int],
                check_backbone: bool = True, **common) -> list[RunSpec]:
    m: Method = METHODS.get(method)
    common["suite_params"] = suite_canonical(SUITES.get(suite), common.get("suite_params", {}))
    TASKS.get(common.get("task", "nli_synth"))
    if check_backbone:  # a dry run may plan for a machine that has the backbone
        check_available(resolve(common.get("backbone", "minilm")))
    if sparsities and not m.sparse:
        raise BenchError(f"method '{method}' is dense and takes no --sparsity")
    sp = [check_sparsity(s) for s in sparsities] if sparsities else ([m.default_sparsity] if m.sparse else [None])
    common["params"] = canonical(m, common.get("params", {}))
    for s in sp:
        m.check(parse_params(m.Params, common["params"], f"method '{method}'"), s)
    return [RunSpec(method=method, suite=suite, sparsity=s, seed=seed, **common) for seed in seeds for s in sp]


def _key(obj: dict) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


class Runner:
    def __init__(self, out: Path, progress: bool = True, log=print) -> None:
        self.out = Path(out)
        self.progress = progress
        self.log = log
        self._tasks: dict[tuple, TaskData] = {}
        self._dense: dict[tuple, torch.nn.Module] = {}
        git_state(), versions()  # the code's commit and packages now, before hours of runs

    # --- data and devices --------------------------------------------------------------------
    def task_data(self, spec: RunSpec) -> TaskData:
        k = (spec.task, spec.data_dir, spec.max_examples)
        if k not in self._tasks:
            data_dir = Path(spec.data_dir).expanduser() if spec.data_dir else None
            data = TASKS.get(spec.task).load(data_dir)
            self._tasks[k] = data.limited(spec.max_examples)
        return self._tasks[k]

    @staticmethod
    def device(spec: RunSpec) -> torch.device:
        if spec.device == "cuda" and not torch.cuda.is_available():
            raise BenchError("--device cuda was asked for but torch sees no CUDA device (CPU wheel or no GPU)")
        if spec.device not in ("cpu", "cuda"):
            raise BenchError(f"unknown device '{spec.device}'; choose cpu or cuda")
        if spec.precision not in ("fp32", "bf16"):
            raise BenchError(f"unknown precision '{spec.precision}'; choose fp32 or bf16")
        return torch.device(spec.device)

    # --- candidates ---------------------------------------------------------------------------
    def lineage(self, spec: RunSpec, method: Method, params) -> dict:
        task = self.task_data(spec)
        return {
            "method": spec.method, "params": dataclasses.asdict(params), "task": spec.task,
            "data": task.id_checksums(), "max_examples": spec.max_examples, "backbone": spec.backbone,
            "backbone_fingerprint": resolve(spec.backbone).fingerprint(),
            "seed": spec.seed, "sparsity": spec.sparsity, "precision": spec.precision, "device": spec.device,
        } | ({"extra": extra} if (extra := method.lineage_extra(
            task, Path(spec.data_dir).expanduser() if spec.data_dir else None, params)) else {})

    def artifact(self, spec: RunSpec) -> tuple[Path, dict]:
        """Where the candidate of ``spec`` is cached, and its lineage (with its ``key``)."""
        method: Method = METHODS.get(spec.method)
        lineage = self.lineage(spec, method, parse_params(method.Params, spec.params, f"method '{spec.method}'"))
        lineage["key"] = f"{spec.method}-{_key(lineage)}"
        return self.out / "artifacts" / lineage["key"], lineage

    def candidate(self, spec: RunSpec) -> Candidate:
        method: Method = METHODS.get(spec.method)
        params = parse_params(method.Params, spec.params, f"method '{spec.method}'")
        art, lineage = self.artifact(spec)
        if (art / "candidate.json").is_file():
            return self._load_candidate(art, lineage)
        self.log(f"[bench] building {method.label(params)} sparsity={spec.sparsity} seed={spec.seed} on {spec.task}")
        bb = resolve(spec.backbone)
        ctx = self.context(spec, bb)
        torch.manual_seed(spec.seed)
        cand = method.build(ctx, params)
        cand.lineage = lineage
        cand.masks = current_masks(cand.model)
        bake(cand.model)  # the report counts the plain exported weights, nothing of the mask machinery
        cand.sparsity = sparsity_report(cand.model)
        if method.sparse and spec.sparsity and cand.sparsity.sparsity < spec.sparsity - 1e-3:  # rounding
            raise BenchError(f"{spec.method} reached sparsity {cand.sparsity.sparsity:.4f} below its target "
                             f"{spec.sparsity} (too few training steps? raise --param epochs or --max-examples)")
        self._save_candidate(art, cand)
        return cand

    def context(self, spec: RunSpec, bb: Backbone) -> Context:
        method: Method = METHODS.get(spec.method)
        params = parse_params(method.Params, spec.params, f"method '{spec.method}'")
        declared = needed(spec)

        def require(need: Need) -> Candidate:
            sub = dataclasses.replace(spec, method=need.method, sparsity=need.sparsity,
                                      params=canonical(METHODS.get(need.method), need.params), suite="", suite_params={})
            if sub not in declared:
                raise BenchError(f"method '{spec.method}' requires {need.method} (sparsity {need.sparsity}) without "
                                 "declaring it in its requires(); declare it so that sweeps build it first")
            return self.candidate(sub)

        return Context(
            task=self.task_data(spec).for_methods(), backbone=bb, seed=spec.seed, sparsity=spec.sparsity,
            device=self.device(spec), precision=spec.precision, require=require,
            reference_params=self.reference_spec(spec, params).params, progress=self.progress,
            data_dir=Path(spec.data_dir).expanduser() if spec.data_dir else None,
        )

    def _save_candidate(self, art: Path, cand: Candidate) -> None:
        tmp = art.with_name(art.name + f".tmp{int(time.time() * 1e6)}")
        cand.model.save_pretrained(tmp, safe_serialization=True)
        cand.tokenizer.save_pretrained(tmp)
        if cand.masks:
            save_file({k: v.to(torch.uint8).contiguous() for k, v in cand.masks.items()}, str(tmp / "masks.safetensors"))
        meta = {"lineage": cand.lineage, "info": cand.info, "sparsity": cand.sparsity.to_dict()}
        write_atomic(tmp / "candidate.json", json.dumps(meta, indent=1, default=str))
        try:
            tmp.rename(art)
        except OSError:
            if not (art / "candidate.json").is_file():
                raise
            shutil.rmtree(tmp)  # another worker finished the same candidate first: keep theirs

    def _load_candidate(self, art: Path, lineage: dict) -> Candidate:
        from transformers import AutoModelForSequenceClassification

        try:
            meta = json.loads((art / "candidate.json").read_text())
            if "bench_kept_heads" in json.loads((art / "config.json").read_text()):  # heads removed
                model = load_pruned(art, AutoModelForSequenceClassification)
            else:
                model = AutoModelForSequenceClassification.from_pretrained(art, local_files_only=True, use_safetensors=True)
            masks = {}
            if (art / "masks.safetensors").is_file():
                masks = {k: v.bool() for k, v in load_file(str(art / "masks.safetensors")).items()}
        except Exception as e:
            raise BenchError(f"cached checkpoint {art} is unreadable ({type(e).__name__}); delete that directory to rebuild it") from e
        tok = load_tokenizer(Backbone(str(art), str(art), True))
        return Candidate(model=model, tokenizer=tok, lineage=lineage, info=meta["info"], masks=masks,
                         sparsity=sparsity_report(model))  # counted from the weights, as when it was saved

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
        method: Method = METHODS.get(spec.method)
        params = dataclasses.asdict(parse_params(method.Params, spec.params, f"method '{spec.method}'"))
        data_dir = Path(spec.data_dir).expanduser() if spec.data_dir else None
        conf = dataclasses.asdict(spec) | {"data": task.checksums(), "params": params,
                                           "backbone_fingerprint": resolve(spec.backbone).fingerprint()}
        if suite_fp := SUITES.get(spec.suite).fingerprint(data_dir):
            conf["suite"] = suite_fp
        conf.pop("data_dir")  # where the files are does not change the run; their checksums do
        return f"{spec.task}__{spec.method}__{spec.suite}__{sp}__seed{spec.seed}__{_key(conf)}"

    def run(self, spec: RunSpec, force: bool = False) -> Record:
        method: Method = METHODS.get(spec.method)
        spec = dataclasses.replace(spec, params=canonical(method, spec.params))
        rid = self.run_id(spec)
        path = self.out / "records" / f"{rid}.json"
        if path.is_file() and not force:
            self.log(f"[bench] {rid}: record exists, skipped")
            return load_record(path)
        t0 = time.time()
        suite: Suite = SUITES.get(spec.suite)
        params = parse_params(method.Params, spec.params, f"method '{spec.method}'")
        cand = self.candidate(spec)
        scratch = self.out / "partial" / rid  # a suite's finished work, kept until the record is written
        ctx = dataclasses.replace(self.context(spec, resolve(spec.backbone)), task=self.task_data(spec),  # suites see OOD sets
                                  suite_params=suite_params(suite, spec.suite_params), scratch=scratch)
        self.log(f"[bench] evaluating {method.label(params)} with suite {spec.suite}")
        result = suite.evaluate(cand, ctx)
        metrics = dict(result.metrics)
        task = self.task_data(spec)
        metrics.update(measure(cand.model, cand.tokenizer, self.dense(spec, len(task.labels)), task.test or task.dev,
                               task.max_length, ctx.device, spec.precision, self.out / "artifacts" / cand.lineage["key"]))
        reference = None
        ref_spec = self.reference_spec(spec, params)
        if ref_spec == spec:
            metrics.update(suite.compare(metrics, metrics))
            reference = rid
        elif type(suite).compare is not Suite.compare:
            ref = self.run(ref_spec)
            metrics.update(suite.compare(metrics, ref.metrics))
            reference = ref.run_id
        pred_rel = f"../predictions/{rid}.jsonl"
        write_atomic(self.out / "predictions" / f"{rid}.jsonl", "".join(json.dumps(r) + "\n" for r in result.predictions))
        record = Record(
            run_id=rid, method=spec.method, label=method.label(params), params=dataclasses.asdict(params),
            task=spec.task, backbone=spec.backbone, seed=spec.seed, suite=spec.suite,
            sparsity={"target": spec.sparsity, **cand.sparsity.to_dict()}, metrics=metrics, details=result.details,
            method_info=cand.info, predictions=pred_rel, reference=reference,
            artifact={"dir": f"../artifacts/{cand.lineage['key']}", "key": cand.lineage["key"]},
            provenance=dataclasses.asdict(Provenance(
                config=dataclasses.asdict(spec) | {"bench": __version__},
                data={"note": task.note, "sources": [dataclasses.asdict(s) for s in task.sources]
                      + [dataclasses.asdict(o.source) for o in task.ood.values()]},
                device=device_info(ctx.device), wall_seconds=round(time.time() - t0, 2),
            )),
            created=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        write_atomic(path, record.to_json())
        shutil.rmtree(scratch, ignore_errors=True)
        self.log(f"[bench] wrote {path}")
        return load_record(path)  # exactly what a later reader sees (undefined numbers as None)

    @staticmethod
    def reference_spec(spec: RunSpec, params) -> RunSpec:
        """The full standard-CE model with the same training recipe, task, backbone and seed."""
        recipe = {f.name: getattr(params, f.name) for f in dataclasses.fields(TrainParams)
                  if f.name != "loss" and hasattr(params, f.name)}
        return dataclasses.replace(spec, method=REFERENCE_METHOD, sparsity=None,
                                   params=canonical(METHODS.get(REFERENCE_METHOD), recipe))


def needed(spec: RunSpec) -> list[RunSpec]:
    """The candidates (as suite-less specs) that ``spec``'s method declares it will require."""
    method: Method = METHODS.get(spec.method)
    params = parse_params(method.Params, spec.params, f"method '{spec.method}'")
    reference = Runner.reference_spec(spec, params).params
    return [dataclasses.replace(spec, method=n.method, sparsity=n.sparsity, suite="", suite_params={},
                                params=canonical(METHODS.get(n.method), n.params))
            for n in method.requires(params, spec.sparsity, reference)]


def canonical(method: Method, raw: dict) -> dict:
    """Typed parameters that differ from their defaults: one spelling per configuration."""
    params = parse_params(method.Params, raw, f"method '{method.name}'")
    defaults = {f.name: f.default for f in dataclasses.fields(params)}
    return {k: v for k, v in dataclasses.asdict(params).items() if v != defaults[k]}


def suite_params(suite: Suite, raw: dict):
    if suite.Params is None:
        if raw:
            raise BenchError(f"suite '{suite.name}' takes no parameters (got {', '.join(raw)})")
        return None
    return parse_params(suite.Params, raw, f"suite '{suite.name}'")


def suite_canonical(suite: Suite, raw: dict) -> dict:
    """A suite's typed parameters that differ from their defaults."""
    params = suite_params(suite, raw)
    if params is None:
        return {}
    defaults = {f.name: f.default for f in dataclasses.fields(params)}
    return {k: v for k, v in dataclasses.asdict(params).items() if v != defaults[k]}
