"""Sparsity plots from run records (and nothing else), written beside the leaderboard.

One figure per leaderboard table: a panel for each of its main columns (as the suites declared
them), sparsity on x. Sparse methods are lines (one per leaderboard row
label, i.e. method + loss + non-default parameters), with a mean ± std band over seeds; dense
models (the full fine-tuned references) are horizontal lines. This is the figure of SRNet
(Liu et al. 2022, figures 2-4) drawn for whatever methods the records hold.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.store.atomic import save_atomic
from bench.store.records import Record

Row = tuple[str, float | None, list[Record]]  # (leaderboard row label, target sparsity, its records)
Panel = tuple[str, str, float]  # (title, metric key, scale)
MARKERS = "os^Dv<>Ph*"
DENSE_STYLES = ("--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)))
DENSE_GREYS = ("black", "grey", "silver")


def _nth(i: int, fast: Sequence, slow: Sequence) -> tuple:
    """The i-th of the pairs (fast, slow), the slow one changing each time the fast one wraps:
    no two alike below len(fast) * len(slow)."""
    return fast[i % len(fast)], slow[(i // len(fast)) % len(slow)]


def style(i: int, colors: list[str]) -> tuple[str, str]:
    """(colour, marker) of the i-th sparse line: a figure can hold more lines than colours (the
    by-task MNLI one, 30 against 10)."""
    return _nth(i, colors, MARKERS)


def dense_style(j: int) -> tuple[str, str | tuple]:
    """(colour, line style) of the j-th dense reference line: black line styles, then greys."""
    line, grey = _nth(j, DENSE_STYLES, DENSE_GREYS)
    return grey, line


def _values(rs: list[Record], key: str, scale: float) -> list[float]:
    vals = [r.metrics.get(key) for r in rs]
    return [v * scale for v in vals if v is not None and not (isinstance(v, float) and math.isnan(v))]


def plot(rows: list[Row], panels: list[Panel], path: Path, title: str) -> Path | None:
    """Write one PNG, a panel per main leaderboard column; None when there is nothing sparse."""
    if all(target is None for _, target, _ in rows) or not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines: dict[str, dict[float, list[Record]]] = defaultdict(lambda: defaultdict(list))
    dense: dict[str, list[Record]] = {}
    for label, target, rs in rows:
        if target is None:
            dense[label] = rs
        else:
            lines[label][target].extend(rs)

    ncols = min(2, len(panels))  # two panels a row: a page's width shows them at a readable size
    nrows = math.ceil(len(panels) / ncols)
    n_labels = len(lines) + len(dense)
    legend = 0.3 + 0.17 * math.ceil(n_labels / 2)
    fig, grid = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.2 * nrows + legend + 0.5), squeeze=False)
    axes = list(grid.flat)
    for ax in axes[len(panels):]:
        ax.remove()
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (name, key, scale) in zip(axes, panels, strict=False):
        for i, (label, by_s) in enumerate(sorted(lines.items())):
            xs, mean, std = [], [], []
            for s in sorted(by_s):
                vals = _values(by_s[s], key, scale)
                if vals:
                    xs.append(100 * s)
                    mean.append(float(np.mean(vals)))
                    std.append(float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0)
            if not xs:
                continue
            c, m = style(i, colors)
            ax.plot(xs, mean, marker=m, color=c, label=label)
            if any(std):
                ax.fill_between(xs, np.subtract(mean, std), np.add(mean, std), color=c, alpha=0.2)
        for j, (label, rs) in enumerate(sorted(dense.items())):
            vals = _values(rs, key, scale)
            if vals:
                c, ls = dense_style(j)
                ax.axhline(float(np.mean(vals)), color=c, linestyle=ls, linewidth=1, label=f"{label} (dense)")
        ax.set_title(name)
        ax.set_xlabel("sparsity %")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(2, max(1, len(labels))), fontsize=9, frameon=False)
    fig.suptitle(title, fontsize=11)
    # fixed margins in inches (tick labels, axis label, legend rows, title), not tight_layout:
    # that draws the whole figure once more to measure it, a third of a leaderboard's plotting time
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=0.7 / width, right=1 - 0.2 / width, bottom=(legend + 0.55) / height,
                        top=1 - 0.5 / height, wspace=0.7 / 4.3, hspace=0.75 / 2.7)
    save_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110))
    plt.close(fig)
    return path


MATRICES = {"Q": ("attention.self.query", "attention.q_lin"), "K": ("attention.self.key", "attention.k_lin"),
            "V": ("attention.self.value", "attention.v_lin"), "AO": ("attention.output.dense", "attention.out_lin"),
            "FFN-in": ("intermediate.dense", "ffn.lin1"), "FFN-out": ("output.dense", "ffn.lin2")}  # BERT/RoBERTa, DistilBERT
_LAYER = re.compile(r"layer\.(\d+)\.(.+)$")


def pattern(per_matrix: dict[str, float]) -> np.ndarray:
    """Sparsity per layer (rows) x matrix type (columns Q, K, V, AO, FFN-in, FFN-out)."""
    cells: dict[tuple[int, int], float] = {}
    for name, value in per_matrix.items():
        m = _LAYER.search(name)
        kind = next((i for i, names in enumerate(MATRICES.values()) if m and m.group(2) in names), None)
        if kind is not None:
            cells[(int(m.group(1)), kind)] = value
    out = np.full((max((k[0] for k in cells), default=-1) + 1, len(MATRICES)), np.nan)
    for (i, j), v in cells.items():
        out[i, j] = v
    return out


def heatmap(rows: list[Row], path: Path, title: str) -> Path | None:
    """The sparsity pattern of every sparse row whose matrices differ (global pruning, tickets),
    as in Zheng et al. (2022), figure 3: layers x matrix type, mean over seeds."""
    shown = []
    for label, target, rs in rows:
        grids = [g for r in rs if r.sparsity.get("per_matrix") and (g := pattern(r.sparsity["per_matrix"])).size]
        if target is None or not grids:
            continue
        grid = np.nanmean(grids, axis=0)
        if np.nanmax(grid) - np.nanmin(grid) > 1e-3:
            shown.append((f"{label} @ {target:.0%}", grid))
    if not shown:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(shown), figsize=(3.2 * len(shown), 3.4), squeeze=False)
    for ax, (name, grid) in zip(axes[0], shown, strict=True):
        im = ax.imshow(100 * grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
        ax.set_xticks(range(len(MATRICES)), list(MATRICES), rotation=45, fontsize=7)
        ax.set_yticks(range(grid.shape[0]))
        ax.set_ylabel("layer")
        ax.set_title(name, fontsize=8)
    fig.colorbar(im, ax=axes[0].tolist(), label="sparsity %", shrink=0.8)
    fig.suptitle(title, fontsize=9)
    save_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight"))
    plt.close(fig)
    return path


def radius(rows: list[Row], path: Path, title: str) -> Path | None:
    """Certified accuracy against the number of substituted words (RanMASK's radius curve, the
    records' ``cert/ranmask/r<k>``; at 0 the smoothed classifier's accuracy), a line per row
    with a mean +- std band over seeds; None when no record has the curve."""
    keys = sorted({k for _, _, rs in rows for r in rs for k in r.metrics if k.startswith("cert/ranmask/r")},
                  key=lambda k: int(k.rsplit("r", 1)[1]))
    if not keys:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    xs = [0] + [int(k.rsplit("r", 1)[1]) for k in keys]
    for i, (label, target, rs) in enumerate(rows):
        curves = [[r.metrics.get(k) for k in ("cert/ranmask/smoothed", *keys)] for r in rs if "cert/ranmask/smoothed" in r.metrics]
        curves = [c for c in curves if all(v is not None for v in c)]
        if not curves:
            continue
        mean, std = 100 * np.mean(curves, axis=0), 100 * np.std(curves, axis=0, ddof=1) if len(curves) > 1 else None
        c, m = style(i, colors)
        name = label if target is None else f"{label} {target:.0%}"
        ax.plot(xs, mean, marker=m, color=c, label=name)
        if std is not None:
            ax.fill_between(xs, mean - std, mean + std, color=c, alpha=0.15)
    ax.set_xlabel("substituted words (radius)")
    ax.set_ylabel("certified accuracy %")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    save_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight"))
    plt.close(fig)
    return path
