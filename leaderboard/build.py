"""Build the leaderboard Markdown from run records (and nothing else).

One table per (task, suite, backbone): rows are method (+ loss) @ target sparsity, columns the
ID metric, every OOD set, HANS-style means over heuristics per gold label, F_bias per pool,
achieved sparsity, non-zero parameters and the seeds. A cell with several seeds shows
mean ± std (sample std) and the 95 % percentile-bootstrap interval of the mean over seeds.
A second table per task gives every OOD cell (heuristic x label). Published numbers that a
sweep spec carries (``<out>/references/``) are extra rows, labelled "published:", never
averaged with runs.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from bench.core.records import Record, Reference
from leaderboard.plot import ATTACKS, heatmap, plot


def fmt(values: list[float], scale: float = 100.0, digits: int = 1) -> str:
    vals = [v * scale for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return "–"
    if len(vals) == 1:
        return f"{vals[0]:.{digits}f}"
    lo, hi = ci95(vals)
    return f"{np.mean(vals):.{digits}f} ± {np.std(vals, ddof=1):.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def ci95(values: list[float]) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the mean over seeds (scipy; fixed resampling seed,
    so a leaderboard rebuilds identically). With 2-3 seeds it is wide and coarse: read it as
    such, not as a significance test."""
    from scipy.stats import bootstrap

    vals = np.asarray(values, dtype=float)
    if np.ptp(vals) == 0:
        return float(vals[0]), float(vals[0])
    res = bootstrap((vals,), np.mean, confidence_level=0.95, n_resamples=9999, method="percentile",
                    random_state=0, vectorized=True)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


SHOWN_IN_LABEL = ("loss", "rewind", "paradigm", "retrain_loss", "ticket")  # already part of the method's label


def _variant(r: Record) -> str:
    """What distinguishes runs of one label that must not be averaged as seeds: non-default
    parameters, the example cap, precision and device."""
    conf = r.provenance.get("config", {})
    parts = [f"{k}={v}" for k, v in sorted(conf.get("params", {}).items()) if k not in SHOWN_IN_LABEL]
    if conf.get("max_examples"):
        parts.append(f"max_examples={conf['max_examples']}")
    parts += [v for v in (conf.get("precision"), conf.get("device")) if v and v not in ("fp32", "cpu")]
    parts += [f"{k}={v}" for k, v in sorted(conf.get("suite_params", {}).items())]
    tag = r.details.get("resources_tag")
    if tag and tag != "official":
        parts.append(tag)
    return ", ".join(parts)


def _row_key(r: Record) -> tuple:
    target = r.sparsity.get("target")
    return (0 if target is None else 1, r.label, target or 0.0, _variant(r))


def _row_label(r: Record) -> str:
    v = _variant(r)
    return f"{r.label} [{v}]" if v else r.label


def _columns(records: list[Record], references: list[Reference] = ()) -> list[tuple[str, str, float, int]]:
    """(header, metric key, scale, digits) in a stable order."""
    keys = sorted({k for r in records for k in r.metrics} | {k for ref in references for k in ref.metrics})
    id_name = records[0].details.get("id_metric", "accuracy") if records else "accuracy"
    f1 = id_name == "f1_weighted"
    cols = [(f"ID {'F1' if f1 else 'acc'}", "id", 100.0, 1)] + ([("ID acc", "id_acc", 100.0, 1)] if f1 else [])
    if "id/gap" in keys:  # hypothesis-only easy / hard halves of MNLI
        cols += [("ID easy", "id/easy", 100.0, 1), ("ID hard", "id/hard", 100.0, 1), ("easy - hard", "id/gap", 100.0, 1)]
    sets = [k.split("/")[1] for k in keys if k.startswith("ood/") and k.count("/") == 1]
    for s in sets:
        cols.append((s, f"ood/{s}", 100.0, 1))
        if any(r.details.get("metrics", {}).get(s) == "f1_weighted" for r in records) or f1:
            cols.append((f"{s} acc", f"ood/{s}/acc", 100.0, 1))
        means = [k for k in keys if k.startswith(f"ood/{s}/mean/")]
        for k in means:
            cols.append((f"{s} {k.rsplit('/', 1)[1]} (mean of cells)", k, 100.0, 1))
        share = [k for k in keys if k.startswith(f"ood/{s}/share/")]
        if means:
            cols += [(f"{s} predicted {k.rsplit('/', 1)[1]} %", k, 100.0, 1) for k in share]
    cols += [(f"F_bias {k.split('/', 1)[1]}", k, 1.0, 2) for k in keys if k.startswith("f_bias/")]
    if "eff/params_m" in keys:  # measured beside the dense backbone in the same process
        cols += [("params (M)", "eff/params_m", 1.0, 2), ("disk (MB)", "eff/disk_mb", 1.0, 0),
                 ("ex/s bs32", "eff/throughput_bs32", 1.0, 0), ("speed-up bs32", "eff/speedup_bs32", 1.0, 2),
                 ("ms bs1", "eff/latency_bs1_ms", 1.0, 1), ("speed-up bs1", "eff/speedup_bs1", 1.0, 2)]
    for recipe, shown in ATTACKS.items():
        if f"{recipe}/aua" in keys:
            cols += [(f"{shown} Clean%", f"{recipe}/clean", 100.0, 1), (f"{shown} Aua%", f"{recipe}/aua", 100.0, 1),
                     (f"{shown} Suc%", f"{recipe}/suc", 100.0, 1), (f"{shown} #Query", f"{recipe}/queries", 1.0, 1)]
    return cols



def _resources(records: list[Record]) -> list[str]:
    """One line per recipe naming the resources its numbers were made with."""
    lines = []
    for recipe, shown in ATTACKS.items():
        used = sorted({f"{res['role']}: {res['name']} ({res['kind']})" for r in records
                       for res in r.details.get("recipes", {}).get(recipe, {}).get("resources", [])})
        tags = sorted({r.details.get("resources_tag", "") for r in records if recipe in r.details.get("recipes", {})})
        if used:
            lines.append(f"- {shown} resources ({', '.join(tags)}): {'; '.join(used)}")
    return lines


def nonzero(r: Record) -> int:
    """Non-zero parameters counted alike for every method: all parameters less the zeros of the
    prunable matrices (a method that also masks the pooler or classifier, as SRNet's released
    code does, reports that as head sparsity, not as fewer parameters)."""
    return r.sparsity["total_params"] - r.sparsity["zeros"]


def _full_params(records: list[Record]) -> int:
    return max((r.sparsity.get("total_params", 0) for r in records), default=0)


def _target(r: Record, full: int) -> str:
    """'dense', a target sparsity, or 'structured' for a smaller architecture (heads removed,
    fewer layers) that has no unstructured target."""
    target = r.sparsity.get("target")
    if target is not None:
        return f"{target:.0%}"
    return "structured" if r.sparsity.get("total_params", full) < full else "dense"


def _flag(records: list[Record]) -> str:
    """A mark on a row any of whose seeds did not learn its task (bench.metrics.degenerate)."""
    bad = [str(r.seed) for r in records if getattr(r, "degenerate", None)]
    return f" ⚠ DEGENERATE (seed {', '.join(bad)}: one class / majority-level; not ranked)" if bad else ""


def table(records: list[Record], references: list[Reference] = ()) -> pd.DataFrame:
    full = _full_params(records)
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in records:
        groups[_row_key(r)].append(r)
    cols = _columns(records, references)
    rows = []
    for ref in references:
        row = {"method": f"published: {ref.label} ({ref.source})",
               "target sparsity": "dense" if ref.sparsity is None else f"{ref.sparsity:.0%}"}
        for header, metric, scale, digits in cols:
            row[header] = fmt([ref.metrics.get(metric)], scale, digits)
        rows.append(row | {"sparsity % (achieved)": "", "non-zero params (M)": "", "seed(s)": "published"})
    for key in sorted(groups):
        rs = sorted(groups[key], key=lambda r: r.seed)
        row = {"method": _row_label(rs[0]) + _flag(rs), "target sparsity": _target(rs[0], full)}
        for header, metric, scale, digits in cols:
            row[header] = fmt([r.metrics.get(metric) for r in rs], scale, digits)
        row["sparsity % (achieved)"] = fmt([r.sparsity["sparsity"] for r in rs], 100.0, 1)
        row["non-zero params (M)"] = fmt([nonzero(r) for r in rs], 1e-6, 2)
        row["seed(s)"] = ",".join(str(r.seed) for r in rs)
        rows.append(row)
    return pd.DataFrame(rows)


def cell_table(records: list[Record]) -> pd.DataFrame | None:
    cell_keys = sorted({k for r in records for k in r.metrics if k.startswith("ood/") and k.count("/") == 3
                        and "/mean/" not in k and "/share/" not in k})
    if not cell_keys:
        return None
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in records:
        groups[_row_key(r)].append(r)
    rows = []
    for key in sorted(groups):
        rs = groups[key]
        row = {"method": _row_label(rs[0]), "target sparsity": _target(rs[0], _full_params(records))}
        for k in cell_keys:
            row["/".join(k.split("/")[1:])] = fmt([r.metrics.get(k) for r in rs])
        rows.append(row)
    return pd.DataFrame(rows)


def _sources(records: Iterable[Record]) -> str:
    notes = {r.provenance["data"].get("note", "") for r in records} - {""}
    kinds = {s["kind"] + ": " + s["detail"] for r in records for s in r.provenance["data"]["sources"]}
    return "; ".join(sorted(notes)) or "; ".join(sorted(kinds))


def build(records: list[Record], markdown: Path | None = None, references: list[Reference] = ()) -> str:
    """The leaderboard Markdown; with ``markdown`` (where it will be written), the sparsity
    plots are written to ``plots/`` beside it and linked."""
    out = [
        "# Leaderboard",
        "",
        f"Generated from {len(records)} run records by `python -m bench leaderboard` on "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC. Do not edit by hand.",
        "",
        "Numbers are percentages (F_bias a ratio; below 1 is less biased than the full standard-CE model "
        "of the same backbone, task and seed). Several seeds: mean ± sample std [95 % percentile-bootstrap interval of the mean]. "
        "Sparsity counts the encoder's Q, K, V, attention-output and FFN matrices (DESIGN section 3); "
        "structurally compressed models (heads removed, fewer layers) show their size in the params columns.",
        "",
    ]
    by_table: dict[tuple, list[Record]] = defaultdict(list)
    for r in records:
        by_table[(r.task, r.suite, r.backbone)].append(r)
    refs: dict[tuple, list[Reference]] = defaultdict(list)
    for ref in references:
        refs[(ref.task, ref.suite, ref.backbone)].append(ref)
    for key in sorted(set(refs) - set(by_table)):  # published numbers no run has reproduced yet
        task, suite, backbone = key
        out += [f"## {task} — suite `{suite}`", "", f"- backbone: `{backbone}`; no runs yet, published numbers only", "",
                table([], refs[key]).to_markdown(index=False), ""]
    for (task, suite, backbone), rs in sorted(by_table.items()):
        versions = sorted({f"transformers {r.provenance['versions'].get('transformers')}, torch {r.provenance['versions'].get('torch')}"
                           + (f", textattack {r.details['textattack']}" if r.details.get("textattack") else "") for r in rs})
        devices = sorted({r.provenance["device"].get("name", "?") for r in rs})
        sizes = rs[0].details.get("sizes", {})
        out += [
            f"## {task} — suite `{suite}`",
            "",
            f"- backbone: `{backbone}`; data: {_sources(rs)}",
            f"- evaluated examples: {', '.join(f'{k} {v}' for k, v in sizes.items())}",
            f"- {'; '.join(versions)}; device: {'; '.join(devices)}",
            *_resources(rs),
            "",
            table(rs, refs.get((task, suite, backbone), [])).to_markdown(index=False),
            "",
        ]
        if markdown is not None:
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{task}_{suite}_{backbone}").strip("-")
            groups: dict[tuple, list[Record]] = defaultdict(list)
            for r in rs:
                groups[_row_key(r)].append(r)
            full = _full_params(rs)
            rows = [(_row_label(g[0]), g[0].sparsity.get("target"), g) for _, g in sorted(groups.items())
                    if _target(g[0], full) != "structured"]  # the plot's x axis is unstructured sparsity
            png = plot(rows, markdown.parent / "plots" / f"{slug}.png", f"{task}, suite {suite}, backbone {backbone}")
            if png is not None:
                out += [f"![sparsity against the table's metrics, {task}](plots/{png.name})", ""]
            png = heatmap(rows, markdown.parent / "plots" / f"{slug}_pattern.png", f"sparsity per layer and matrix, {task}")
            if png is not None:
                out += [f"![sparsity pattern per layer and matrix, {task}](plots/{png.name})", ""]
        cells = cell_table(rs)
        if cells is not None:
            out += [f"Per-cell accuracy (heuristic / gold label), {task}:", "", cells.to_markdown(index=False), ""]
    return "\n".join(out)
