"""The numbers of one tiny run per method and per suite, pinned: a change of shape (moving
modules, resolving specs differently) must not change a single metric.

The runs go through the command line, as a user would, on the tiny random BERT of
``conftest.py``. ``tests/assets/unchanged.json`` was written by the code before the move
(``BENCH_WRITE_UNCHANGED=1 pytest tests/integration/test_unchanged.py``); timing metrics
(throughput, latency, speed-ups) are left out, everything else must agree. A deliberate recipe
fix rewrites only the runs it changes, in the commit that makes it (the IMP and RMC entries
when IMP began to follow SRNet's algorithm 1, the PoE entry when the bias model took GloVe,
the head-pruning entry when it stopped fine-tuning the pruned model again).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from bench.cli import main
from bench.store.records import load_predictions, load_record

PINNED = Path(__file__).resolve().parents[1] / "assets" / "unchanged.json"
TIMED = ("eff/throughput", "eff/latency", "eff/speedup")
RECIPE = ["--param", "epochs=2", "--param", "batch_size=8"]

RUNS = {
    "finetune_poe": ["--method", "finetune", "--param", "loss=poe", *RECIPE],
    "imp": ["--method", "imp", "--sparsity", "0.5", *RECIPE],
    "srnet": ["--method", "srnet", "--sparsity", "0.5", "--param", "mask_epochs=1", *RECIPE],
    "head_pruning": ["--method", "head_pruning", "--param", "fraction=0.5", *RECIPE],
    "distilled": ["--method", "distilled", "--param", "student=truncated", *RECIPE],
    "rmc": ["--method", "rmc", "--sparsity", "0.4", "--param", "epochs=1", "--param", "batch_size=8"],
    "robust_tickets": ["--method", "robust_tickets", "--sparsity", "0.5", "--task", "sent_synth", "--suite",
                       "adversarial", "--suite-param", "recipes=textfooler", "--suite-param", "n=8",
                       "--param", "search_epochs=1", "--param", "retrain_epochs=1", "--param", "retrain_lr=1e-3",
                       "--param", "lr=1e-3", *RECIPE],
    "freelb": ["--method", "freelb", "--task", "sent_synth", "--suite", "adversarial", "--suite-param",
               "recipes=textbugger", "--suite-param", "n=8", "--param", "lr=1e-3", *RECIPE],
}


def _numbers(out: Path) -> dict[str, dict]:
    """Every record of ``out``: method, target, achieved sparsity and its untimed metrics."""
    found = {}
    for p in sorted((out / "records").glob("*.json")):
        r = json.loads(p.read_text())
        key = f"{r['method']} {r['label']} {r['task']} {r['suite']} {r['sparsity']['target']}"
        metrics = {k: v for k, v in r["metrics"].items() if not k.startswith(TIMED)}
        rows = load_predictions(p.parent, load_record(p))
        found[key] = {"sparsity": r["sparsity"]["sparsity"], "nonzero": r["sparsity"]["nonzero_params"],
                      "metrics": metrics | _per_example(rows)}
    return found


def _per_example(rows: list[dict]) -> dict[str, float]:
    """What accuracy alone can hide (a tiny model may predict one class before and after a
    change): the mean probability per set and class, and each attacked example's outcome."""
    out: dict[str, float] = {}
    for r in rows:
        if "probs" in r:
            for i, v in enumerate(r["probs"]):
                out[f"rows/{r['set']}/prob{i}"] = out.get(f"rows/{r['set']}/prob{i}", 0.0) + v
        else:
            out[f"rows/{r['set']}/{r['uid']}/{r['result']}"] = float(r["queries"])
    counts = {s: sum(1 for r in rows if r["set"] == s) for s in {r["set"] for r in rows}}
    return {k: v / counts[k.split("/")[1]] if "/prob" in k else v for k, v in out.items()}


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_numbers_unchanged(name, tiny_bert, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["run", *RUNS[name], "--backbone", str(tiny_bert), "--max-examples", "40", "--out", str(out), "--quiet"]
    if "--suite" not in argv:
        argv += ["--suite", "ood"]
    assert main(argv) == 0, capsys.readouterr().err
    got = _numbers(out)
    pinned = json.loads(PINNED.read_text()) if PINNED.is_file() else {}
    if os.environ.get("BENCH_WRITE_UNCHANGED"):
        pinned[name] = got
        PINNED.parent.mkdir(parents=True, exist_ok=True)
        PINNED.write_text(json.dumps(pinned, indent=1, sort_keys=True) + "\n")
        return
    want = pinned[name]
    assert sorted(got) == sorted(want)
    for key, w in want.items():
        g = got[key]
        assert _close(g["sparsity"], w["sparsity"]) and g["nonzero"] == w["nonzero"], key
        assert sorted(g["metrics"]) == sorted(w["metrics"]), key
        bad = {k: (g["metrics"][k], v) for k, v in w["metrics"].items() if not _close(g["metrics"][k], v)}
        assert not bad, f"{key}: {bad}"
