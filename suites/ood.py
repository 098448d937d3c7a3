"""The OOD suite (DESIGN section 5): ID test metric plus every OOD set of the task.

Parts: ``hans`` (MNLI and the synthetic NLI task; 3-way predictions collapsed to
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

from bench.api import Candidate, Context, Suite, SuiteResult
from bench.errors import BenchError
from bench.metrics import accuracy, cells, collapse, f_bias, id_metric
from bench.model.predict import predict_logits, prediction_rows
from bench.registry import SUITES


@dataclass
class OODParams:
    pools: str = ""  # comma-separated F_bias pools to judge (hans, paws, fever_symm); "" = every OOD set

    def chosen(self) -> list[str]:
        return [p.strip() for p in self.pools.split(",") if p.strip()]


def _sets(task, p: OODParams | None):
    chosen = p.chosen() if p else []
    sets = [s for s in task.ood.values() if not chosen or s.pool in chosen]
    if not sets:
        have = sorted({s.pool for s in task.ood.values()})
        raise BenchError(f"suite 'ood' has no OOD set{' in pools ' + ','.join(chosen) if chosen else ''} for task "
                         f"'{task.name}' (its pools: {', '.join(have) or 'none'})")
    return sets


@SUITES.register("ood")
class OOD(Suite):
    name = "ood"
    description = "ID test metric, every OOD set of the task (HANS cells, PAWS, FEVER-Symm) and F_bias"
    Params = OODParams
    compares = True

    def check(self, params: OODParams | None, task, data_dir: Path | None) -> None:
        _sets(task, params)

    def evaluate(self, candidate: Candidate, ctx: Context) -> SuiteResult:
        task = ctx.task
        sets = _sets(task, ctx.suite_params)
        run = lambda exs: predict_logits(  # noqa: E731
            candidate.model, candidate.tokenizer, exs, task.max_length, ctx.device, ctx.precision
        )
        metrics: dict[str, float] = {}
        preds: list[dict] = []
        details: dict = {"id_metric": task.id_metric, "sizes": {"test": len(task.test)}, "pools": {},
                         "metrics": {s.name: s.metric for s in sets}}

        logits = run(task.test)
        y = np.array([e.label for e in task.test])
        p = logits.argmax(1)
        metrics["id"] = id_metric(task.id_metric, y, p)
        metrics["id_acc"] = accuracy(y, p)
        groups = np.array([e.group for e in task.test])
        if set(groups.tolist()) == {"easy", "hard"}:  # MNLI's hypothesis-only hardness (Du et al. 2023)
            for g in ("easy", "hard"):
                metrics[f"id/{g}"] = accuracy(y[groups == g], p[groups == g])
            metrics["id/gap"] = metrics["id/easy"] - metrics["id/hard"]
        preds += prediction_rows("test", task.test, logits, p)

        pooled: dict[str, tuple[list, list, str]] = {}
        for s in sets:
            logits = run(s.examples)
            y = np.array([e.label for e in s.examples])
            p = collapse(logits.argmax(1), s.collapse)
            metrics[f"ood/{s.name}"] = id_metric(s.metric, y, p)
            metrics[f"ood/{s.name}/acc"] = accuracy(y, p)
            details["sizes"][s.name] = len(s.examples)
            if any(e.group for e in s.examples):
                groups = [e.group for e in s.examples]
                c = cells(y, p, groups, s.labels)
                metrics.update({f"ood/{s.name}/{k}": v for k, v in c.items()})
                for lname in s.labels:  # mean over heuristics of one gold label
                    vals = [v for k, v in c.items() if k.endswith(f"/{lname}")]
                    metrics[f"ood/{s.name}/mean/{lname}"] = float(np.mean(vals))
            metrics[f"ood/{s.name}/share/{s.labels[0]}"] = float((p == 0).mean())
            preds += prediction_rows(s.name, s.examples, logits, p)
            ys, ps, _ = pooled.setdefault(s.pool, ([], [], s.metric))
            ys.extend(y.tolist())
            ps.extend(p.tolist())
        for pool, (ys, ps, metric) in pooled.items():
            metrics[f"pool/{pool}"] = id_metric(metric, np.array(ys), np.array(ps))
            details["pools"][pool] = [s.name for s in sets if s.pool == pool]
        return SuiteResult(metrics=metrics, predictions=preds, details=details)

    def compare(self, metrics: dict[str, float], reference: dict[str, float]) -> dict[str, float]:
        out = {}
        for key, value in metrics.items():
            if key.startswith("pool/") and key in reference:
                pool = key.removeprefix("pool/")
                out[f"f_bias/{pool}"] = f_bias(metrics["id"], value, reference["id"], reference[key])
        return out

