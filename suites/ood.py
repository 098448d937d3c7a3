"""The OOD suite (DESIGN section 5): ID test metric plus every OOD set of the task.

Parts: ``hans`` (MNLI and the synthetic NLI task; 3-way predictions collapsed to
entailment / non-entailment, reported overall and per heuristic x gold label), ``paws``
(PAWS-QQP and PAWS-Wiki, weighted F1 and accuracy) and ``fever_symm`` (Symm v1 and v2).
F_bias (Du et al. 2023) pools the sets of one pool: FEVER pools Symm1+2, QQP pools PAWS.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from bench.api import Candidate, Context, Suite, SuiteResult
from bench.errors import BenchError
from bench.metrics import accuracy, cells, collapse, f_bias, id_metric
from bench.predict import predict_logits
from bench.registry import SUITES


class OODSuite(Suite):
    name = "ood"
    description = "ID test metric, every OOD set of the task (HANS cells, PAWS, FEVER-Symm) and F_bias"
    pools: ClassVar[tuple[str, ...] | None] = None  # None: every OOD set of the task

    def _sets(self, ctx: Context):
        sets = [s for s in ctx.task.ood.values() if self.pools is None or s.pool in self.pools]
        if not sets:
            raise BenchError(f"suite '{self.name}' has no OOD set for task '{ctx.task.name}'")
        return sets

    def evaluate(self, candidate: Candidate, ctx: Context) -> SuiteResult:
        task = ctx.task
        sets = self._sets(ctx)
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
        preds += _rows("test", task.test, logits, p)

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
            preds += _rows(s.name, s.examples, logits, p)
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


def _rows(name: str, examples, logits: np.ndarray, pred: np.ndarray) -> list[dict]:
    return [
        {"set": name, "uid": e.uid, "gold": e.label, "pred": int(q), "group": e.group, "logits": [round(float(v), 4) for v in lg]}
        for e, lg, q in zip(examples, logits, pred, strict=True)
    ]


@SUITES.register("ood")
class OOD(OODSuite):
    pass


@SUITES.register("hans")
class HANS(OODSuite):
    name = "hans"
    description = "HANS (or the synthetic HANS-like set): overall, per heuristic x gold label, F_bias"
    pools = ("hans",)


@SUITES.register("paws")
class PAWS(OODSuite):
    name = "paws"
    description = "PAWS-QQP and PAWS-Wiki for QQP: weighted F1, accuracy, pooled F_bias"
    pools = ("paws",)


@SUITES.register("fever_symm")
class FeverSymm(OODSuite):
    name = "fever_symm"
    description = "FEVER-Symmetric v1 and v2: accuracy, pooled F_bias"
    pools = ("fever_symm",)
