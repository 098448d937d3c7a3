"""The OOD suite (docs/design.md section 5): ID test metric plus every OOD set of the task.

``--suite-param eval_file=PATH[,PATH...]`` adds a user's own sets (bench/data/evalfile.py), each
judged as the built-in ones and as its own pool: its own column, in the same run, on any task (on
one with no OOD set of its own, as SST-2, the ID test and the files). A file labelled entailment /
non-entailment on a 3-way NLI task is collapsed as HANS is. The eval suite (suites/eval.py) is
this suite without the task's own sets. Parts: ``hans``
(MNLI and the synthetic NLI task; 3-way predictions collapsed to
entailment / non-entailment, reported overall and per heuristic x gold label), ``paws``
(PAWS-QQP and PAWS-Wiki, weighted F1 and accuracy) and ``fever_symm`` (Symm v1 and v2).
F_bias (Du et al. 2023) pools the sets of one pool: FEVER pools Symm1+2, QQP pools PAWS.
``--suite-param pools=hans`` judges one pool only (a parameter, not another suite, so that one
evaluation has one run id).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.api import Candidate, Column, Context, Suite, SuiteResult
from bench.data.evalfile import eval_sets
from bench.errors import BenchError
from bench.metrics import accuracy, cells, collapse, f_bias, id_metric
from bench.registry import SUITES
from bench.store.atomic import sha256_file


@dataclass
class OODParams:
    pools: str = ""  # comma-separated F_bias pools to judge (hans, paws, fever_symm); "" = every OOD set
    eval_file: tuple[Path, ...] = ()  # a user's own sets, judged beside them (JSONL, TSV or CSV; bench/data/evalfile.py)

    def chosen(self) -> list[str]:
        return [p.strip() for p in self.pools.split(",") if p.strip()]


@SUITES.register("ood")
class OOD(Suite):
    name = "ood"
    description = "ID test metric, every OOD set of the task (HANS cells, PAWS, FEVER-Symm) and F_bias"
    Params = OODParams
    compares = True

    def fingerprint(self, data_dir: Path | None, params: OODParams | None = None) -> dict:
        """A user's evaluation files by their checksums: the same path with other contents is another run."""
        files = [Path(f).expanduser() for f in (params.eval_file if params else ())]
        return {"eval_file": [sha256_file(f) for f in files if f.is_file()]} if files else {}

    def judged(self, task, p: OODParams | None) -> list:
        """The sets it judges: the task's OOD sets (of the chosen pools) and the user's files."""
        chosen = p.chosen() if p else []
        sets = [s for s in task.ood.values() if not chosen or s.pool in chosen] + eval_sets(p.eval_file if p else (), task)
        if not sets:
            have = sorted({s.pool for s in task.ood.values()})
            raise BenchError(f"suite 'ood' has no OOD set{' in pools ' + ','.join(chosen) if chosen else ''} for task "
                             f"'{task.name}' (its pools: {', '.join(have) or 'none'}); judge your own file with "
                             "--suite-param eval_file=PATH")
        return sets

    def check(self, params: OODParams | None, task, data_dir: Path | None) -> None:
        self.judged(task, params)

    def evaluate(self, candidate: Candidate, ctx: Context) -> SuiteResult:
        from bench.model.predict import predict_logits, prediction_rows

        task = ctx.task
        sets = self.judged(task, ctx.suite_params)
        run = lambda exs: predict_logits(  # noqa: E731
            candidate.model, candidate.tokenizer, exs, task.max_length, ctx.device, ctx.precision
        )
        logits = run(task.test)
        rows = prediction_rows("test", task.test, logits, logits.argmax(1))
        for s in sets:
            logits = run(s.examples)
            rows += prediction_rows(s.name, s.examples, logits, collapse(logits.argmax(1), s.collapse))
        details: dict = {"id_metric": task.id_metric, "sizes": {"test": len(task.test)} | {s.name: len(s.examples) for s in sets},
                         "pools": {}, "metrics": {s.name: s.metric for s in sets}, "labels": {s.name: list(s.labels) for s in sets},
                         "collapse": {s.name: list(s.collapse) for s in sets if list(s.collapse) != list(range(len(s.collapse)))}}
        for s in sets:
            details["pools"].setdefault(s.pool, []).append(s.name)
        return SuiteResult(metrics=self.score(rows, details), predictions=rows, details=details)

    def score(self, rows: list[dict], details: dict) -> dict[str, float] | None:
        """ID metric (and MNLI's easy / hard halves), each OOD set's metric, accuracy, cells
        (group x gold label), their means per label and the share predicted as the first label,
        and each pool's metric over its sets' examples together."""
        if "labels" not in details:  # records made before the suite kept what re-scoring needs
            return None
        by_set: dict[str, list[dict]] = {}
        for r in rows:
            by_set.setdefault(r["set"], []).append(r)
        arrays = {name: (np.array([r["gold"] for r in rs]), np.array([r["pred"] for r in rs])) for name, rs in by_set.items()}
        y, p = arrays.get("test", (np.array([]), np.array([])))
        metrics = {"id": id_metric(details["id_metric"], y, p), "id_acc": accuracy(y, p)}
        groups = np.array([r.get("group") for r in by_set.get("test", [])])
        if set(groups.tolist()) == {"easy", "hard"}:  # MNLI's hypothesis-only hardness (Du et al. 2023)
            for g in ("easy", "hard"):
                metrics[f"id/{g}"] = accuracy(y[groups == g], p[groups == g])
            metrics["id/gap"] = metrics["id/easy"] - metrics["id/hard"]
        for name, metric in details["metrics"].items():
            y, p = arrays.get(name, (np.array([]), np.array([])))
            labels = details["labels"][name]
            metrics[f"ood/{name}"] = id_metric(metric, y, p)
            metrics[f"ood/{name}/acc"] = accuracy(y, p)
            if any(r.get("group") for r in by_set.get(name, [])):
                c = cells(y, p, [r.get("group") for r in by_set[name]], labels)
                metrics.update({f"ood/{name}/{k}": v for k, v in c.items()})
                for lname in labels:  # mean over heuristics of one gold label (of the groups that have it)
                    if vals := [v for k, v in c.items() if k.endswith(f"/{lname}")]:
                        metrics[f"ood/{name}/mean/{lname}"] = float(np.mean(vals))
            metrics[f"ood/{name}/share/{labels[0]}"] = float((p == 0).mean())
        for pool, names in details["pools"].items():
            ys = np.concatenate([arrays[n][0] for n in names if n in arrays] or [np.array([])])
            ps = np.concatenate([arrays[n][1] for n in names if n in arrays] or [np.array([])])
            metrics[f"pool/{pool}"] = id_metric(details["metrics"][names[0]], ys, ps)
        return metrics

    def columns(self, details: dict, metrics: dict[str, float]) -> list[Column]:
        """Main: the ID metric, each OOD set (each pool of several sets pooled too; the first
        pool ranks), F_bias per pool. Details: ID accuracy and easy / hard halves; per OOD set
        its accuracy, the mean of its cells per gold label and the share predicted as the
        first label; every cell (group x gold label)."""
        f1 = details.get("id_metric") == "f1_weighted"
        cols = [Column("id", "ID F1" if f1 else "ID acc", rows=("test",), primary=not details.get("pools"))]
        details_id = [Column("id_acc", "ID acc", table="ID", rows=("test",))] if f1 else []
        details_id += [Column(f"id/{g}", f"ID {g}", table="ID") for g in ("easy", "hard")]
        details_id += [Column("id/gap", "ID easy - hard", "points", False, "ID")] if "id/gap" in metrics else []
        ood, cells = [], []
        for i, (pool, names) in enumerate(details.get("pools", {}).items()):
            for name in names:
                f1_set = details["metrics"][name] == "f1_weighted"
                cols.append(Column(f"ood/{name}", f"{name} F1" if f1_set else name, rows=(name,),
                                   primary=i == 0 and len(names) == 1))
                ood += [Column(f"ood/{name}/acc", f"{name} acc", table="OOD")] if f1_set else []
                ood += [Column(k, f"{name} {k.rsplit('/', 1)[1]} (mean of cells)", table="OOD") for k in metrics
                        if k.startswith(f"ood/{name}/mean/")]
                ood += [Column(k, f"{name} predicted {k.rsplit('/', 1)[1]} %", "percent", None, "OOD") for k in metrics
                        if k.startswith(f"ood/{name}/share/")]
                cells += [Column(k, k.split("/", 2)[2], table=f"{name} cells") for k in metrics
                          if k.startswith(f"ood/{name}/") and k.count("/") == 3 and "/mean/" not in k and "/share/" not in k]
            if len(names) > 1:
                cols.append(Column(f"pool/{pool}", f"{pool} (pooled)", rows=tuple(names), primary=i == 0))
        cols += [Column(f"f_bias/{pool}", f"F_bias {pool}", "signed", False) for pool in details.get("pools", {})]
        return [c for c in cols + details_id + ood + cells if c.key in metrics]

    def sets(self, task, params: OODParams | None) -> dict[str, list]:
        return {"test": task.test} | {s.name: s.examples for s in self.judged(task, params)}

    def ood_sets(self, task, params: OODParams | None) -> list:
        return self.judged(task, params)

    def compare(self, metrics: dict[str, float], reference: dict[str, float]) -> dict[str, float]:
        out = {}
        for key, value in metrics.items():
            if key.startswith("pool/") and key in reference:
                pool = key.removeprefix("pool/")
                out[f"f_bias/{pool}"] = f_bias(metrics["id"], value, reference["id"], reference[key])
        return out

