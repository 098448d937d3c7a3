"""A leaderboard row: the records of one method, parameters and sparsity over every suite and
seed (``Candidate``), with what tells such rows apart (``_variant``) and how a column's numbers
are shown (``SCALE``) and bounded (``BOUNDS``). Below ``pairing`` and ``sections``: both read
candidates, neither is read by this module.

Runs of one label that differ in a setting (non-default parameters, an example cap, precision,
device, a suite's settings where one table holds several) are separate rows, never averaged
as seeds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import PurePath

from bench.metrics import COLLAPSE, Collapse, CollapseRule
from bench.store.records import Record
from leaderboard.evidence import outcomes_of

SCALE = {"percent": (100.0, 1), "points": (100.0, 1), "ratio": (1.0, 2), "signed": (1.0, 2), "number": (1.0, 1),
         "divergence": (1.0, 3)}
SHARE, DIFFERENCE, AMOUNT = (0.0, 1.0), (-1.0, 1.0), (0.0, math.inf)
# the range a column's interval must stay in: a latency, a size, a count or a speed-up is never
# negative, whatever a t-interval of three spread-out seeds says (``stats.interval``)
BOUNDS = {"percent": SHARE, "points": DIFFERENCE, "ratio": AMOUNT, "number": AMOUNT, "divergence": AMOUNT}


def slug(task: str, backbone: str) -> str:
    """A table's file-name stem (its plots, its CSV and JSON)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{task}_{backbone}").strip("-")


def shown(name: str) -> str:
    """A user's path as its file name (a checkpoint folder, an eval file): a table shows what it
    is, not where it was on one machine. A hub id (``org/model``) or a registry name stays."""
    if name.startswith(("/", "./", "../", "~")) or "\\" in name:
        return PurePath(name.replace("\\", "/")).name or name
    return name


def nonzero(r: Record) -> int:
    """Non-zero parameters counted alike for every method: all parameters less the zeros of the
    prunable matrices (a method that also masks the pooler or classifier, as SRNet's released
    code does, reports that as head sparsity, not as fewer parameters)."""
    return r.sparsity["total_params"] - r.sparsity["zeros"]


def suite_setting(r: Record) -> str:
    parts = [f"{k}={shown(str(v))}" for k, v in sorted(r.provenance.get("config", {}).get("suite_params", {}).items())]
    tag = r.details.get("resources_tag")
    return ", ".join(parts + ([tag] if tag and tag != "official" else []))


def _variant(r: Record, suite_varies: bool) -> tuple[str, ...]:
    """What distinguishes runs of one label that must not be averaged as seeds: the parameters
    the method names as its variant, the example cap, precision and device (and the suite's
    settings where one table holds several)."""
    conf = r.provenance.get("config", {})
    parts = list(r.variant)
    if conf.get("max_examples"):
        parts.append(f"max_examples={conf['max_examples']}")
    parts += [v for v in (conf.get("precision"), conf.get("device")) if v and v not in ("fp32", "cpu")]
    parts += ["compiled"] if conf.get("compile") else []
    if suite_varies and suite_setting(r):
        parts.append(f"{r.suite}: {suite_setting(r)}")
    return tuple(parts)


@dataclass
class Candidate:
    """One leaderboard row: the records of one method, parameters and sparsity, every suite and seed."""

    label: str
    target: float | None
    settings: tuple[str, ...]  # what ``_variant`` found, one setting each
    records: list[Record] = field(default_factory=list)

    @property
    def variant(self) -> str:
        return ", ".join(self.settings)

    @property
    def name(self) -> str:
        return f"{self.label} [{self.variant}]" if self.variant else self.label

    @property
    def seeds(self) -> list[int]:
        return sorted({r.seed for r in self.records})

    def record(self, seed: int, key: str) -> Record | None:
        """The record of ``seed`` holding metric ``key`` (the first suite's, by name)."""
        return next((r for r in sorted(self.records, key=lambda r: r.suite) if r.seed == seed and key in r.metrics), None)

    def values(self, key: str) -> list[float | None]:
        return [rec.metrics[key] for s in self.seeds if (rec := self.record(s, key)) is not None]

    @property
    def degenerate(self) -> list[int]:
        return sorted({r.seed for r in self.records if r.degenerate})

    def collapsed(self, key: str, rows: tuple[str, ...], seeds: list[int] | None = None,
                  rule: CollapseRule = COLLAPSE) -> dict[int, Collapse]:
        """The seeds (of ``seeds``, default all) whose record of metric ``key`` has partly
        collapsed on one of the sets ``rows`` (``bench.metrics.CollapseRule``, from the kept
        predictions), each with how."""
        return {s: how for s, (_, how) in self.collapsed_on(key, rows, seeds, rule).items()}

    def collapsed_on(self, key: str, rows: tuple[str, ...], seeds: list[int] | None = None,
                     rule: CollapseRule = COLLAPSE) -> dict[int, tuple[str, Collapse]]:
        """``collapsed``, each seed with the set it collapsed on (whose labels name its class)."""
        out = {}
        for s in self.seeds if seeds is None else seeds:
            if (rec := self.record(s, key)) is not None:
                why = next(((name, w) for name, o in sorted(outcomes_of(rec).items()) if name in rows and (w := o.collapse(rule))), None)
                if why:
                    out[s] = why
        return out

    def under_load(self, key: str) -> dict[int, str]:
        """The seeds whose record timed metric ``key`` while other work held the cores (the
        ``timing.under_load`` of ``bench.model.efficiency``), each with why: such a number is a
        measure of the machine's load as much as of the model, so its cell is flagged and never
        ranked."""
        out = {}
        for s in self.seeds:
            rec = self.record(s, key)
            timing = rec.timing if rec is not None else None
            if timing and timing.get("under_load") and key in timing.get("metrics", ()):
                out[s] = timing["under_load"]
        return out
