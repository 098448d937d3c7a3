"""A record's metrics, put together in one place: a run (``runner``), ``bench rescore`` and
``bench migrate`` (``upgrade``) all call ``assemble``, so that what a record holds and what its
checks recompute cannot drift apart. Needs no torch: the leaderboard re-scores through it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.metrics import calibration, degenerate, flips, loyalty, one_class_sets
from bench.store.records import Column

if TYPE_CHECKING:
    from bench.api import Suite

SELF = "self"  # ``reference=SELF``: the run is its own F_bias reference


@dataclass(frozen=True)
class Assembled:
    metrics: dict[str, float]  # the record's
    own: dict[str, float]  # what its own rows give alone (the suite's metrics and calibration)
    degenerate: str | None  # of the test rows; None also when there are none
    one_class: dict[str, str]
    has_test: bool
    declared: list[Column] = field(default_factory=list)  # with ``declare``, every column declared today

    @property
    def columns(self) -> list[Column]:
        """The declared columns of the record's metrics."""
        return [c for c in self.declared if c.key in self.metrics]


def assemble(suite: Suite, scored: dict[str, float], rows: list[dict], details: dict, *,
             baseline: list[dict] | None = None, kept: dict | None = None,
             reference: dict | str | None = None, declare: bool = False) -> Assembled:
    """``scored`` (the suite's metrics: ``evaluate``'s, or ``Suite.score`` of ``rows``), the
    calibration of ``rows``, their loyalty and flips to the ``baseline``'s rows, then ``kept`` (numbers that
    stand as given and win: a run's timings, an older record's own), then the suite's comparison
    with the ``reference``'s metrics (F_bias; ``SELF``: these). ``declare``: the suite's, the
    rows' and the efficiency columns too (imports torch)."""
    own = dict(scored) | calibration(rows, details.get("collapse"))
    kept = kept or {}
    made = own | (loyalty(rows, baseline) | flips(rows, baseline) if baseline is not None else {})
    metrics = dict(kept) | {k: v for k, v in made.items() if k not in kept}
    if reference is not None:
        metrics |= suite.compare(metrics, metrics if reference == SELF else reference)
    test = [r for r in rows if r.get("set") == "test"]  # the ID test set, clean
    declared = []
    if declare:
        from bench.model.efficiency import COLUMNS as EFFICIENCY

        declared = suite.columns(details, metrics) + row_columns(metrics) + EFFICIENCY
    return Assembled(metrics, own, degenerate([r["gold"] for r in test], [r["pred"] for r in test]),
                     one_class_sets(rows), bool(test), declared)


FROM_ROWS_TABLE = "calibration and loyalty"


def row_columns(metrics: dict[str, float]) -> list[Column]:
    """How the leaderboard shows ``calibration`` and ``loyalty``: one details table."""
    shown = {"ece": ("ECE", False, "percent"), "loyalty": ("label loyalty", True, "percent"),
             "loyalty_prob": ("prob. loyalty", True, "percent"), "flips": ("flips", False, "percent"),
             "flips_cw": ("flips right→wrong", False, "percent"), "flips_wc": ("flips wrong→right", False, "percent"),
             "kl": ("KL (nats)", False, "divergence")}
    cols = []
    for key in metrics:
        kind, _, name = key.partition("/")
        if kind in shown and name:
            label, higher, unit = shown[kind]
            cols.append(Column(key, f"{label} {name}", unit, higher, FROM_ROWS_TABLE))
    return sorted(cols, key=lambda c: (c.key.split("/", 1)[1] != "test", c.key.split("/", 1)[1], list(shown).index(c.key.split("/")[0])))
