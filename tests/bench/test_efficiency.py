"""Speeds timed on a busy machine: the contention criterion, the bounded repeats, and what the
record keeps of them, with the clocks injected (no real load needed)."""

from __future__ import annotations

import functools

import pytest
import torch

from bench.data.examples import Example
from bench.model import efficiency
from bench.model.efficiency import ATTEMPTS, REPEATS, Attempt, Reading, busy_threads, cpu_share


def _clock(shares: list[float], busy: int, load: float = 3.5):
    """Readings around each attempt such that attempt k gets CPU share ``shares[k]``; an attempt
    past the list is a test failure (the loop went on when it should have stopped)."""
    readings = iter([r for s in shares for r in (Reading(0.0, 0.0, load), Reading(2.0, 2.0 * s * busy, load))])
    return lambda: next(readings)


def test_the_contention_criterion_reads_cpu_time_against_wall_time_and_threads():
    idle, busy = Reading(10.0, 5.0, 0.2), Reading(12.0, 8.8, 2.9)
    assert cpu_share(idle, busy, 2) == pytest.approx(0.95)  # 3.8 CPU s over 2 s on 2 threads
    assert cpu_share(idle, busy, 3) == pytest.approx(3.8 / 6)  # the same seconds owed to 3 threads
    at = lambda cpu: Attempt([], [], Reading(0.0, 0.0), Reading(1.0, cpu), 2)  # noqa: E731
    assert not at(1.62).contended and at(1.58).contended  # the line is a share of 0.8
    assert at(1.6).share == 0.8 and not at(1.6).contended  # a share of exactly 0.8 is not contended
    assert cpu_share(Reading(1.0, 0.0), Reading(1.0, 0.0), 2) == 1.0  # no wall time: nothing to contend for
    # the load average is context only: a high one with the whole CPU share is not contended
    assert not Attempt([], [], Reading(0.0, 0.0, 40.0), Reading(1.0, 2.0, 40.0), 2).contended


def test_busy_threads_are_torchs_threads_on_at_most_every_core_and_one_on_an_accelerator(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 64)
    cores = len(efficiency.os.sched_getaffinity(0)) if hasattr(efficiency.os, "sched_getaffinity") else efficiency.os.cpu_count()
    assert busy_threads(torch.device("cpu")) == min(64, cores)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert busy_threads(torch.device("cpu")) == 1
    assert busy_threads(torch.device("cuda")) == 1


@pytest.fixture(scope="module")
def models(tiny_bert):
    from bench.model.backbone import load_classifier, load_tokenizer, resolve

    bb = resolve(str(tiny_bert))
    examples = [Example(f"u{i}", f"a short sentence number {i}", None, i % 2) for i in range(40)]
    return load_classifier(bb, 2, seed=0), load_tokenizer(bb), load_classifier(bb, 2, seed=1), examples


def _timed(monkeypatch, models, shares: list[float], speedups: list[float]):
    """``measure`` with the clocks of ``shares`` and passes whose candidate takes 1 / speedups[k]
    of the dense model's time in attempt k."""
    model, tok, dense, examples = models
    calls = {"reads": 0}
    clock = _clock(shares, busy_threads(torch.device("cpu")))

    def read():
        calls["reads"] += 1
        return clock()

    def seconds(m, batches, device, precision):
        attempt = (calls["reads"] - 1) // 2
        return 1.0 if m is dense or calls["reads"] == 0 else 1.0 / speedups[attempt]

    monkeypatch.setattr(efficiency, "_seconds", seconds)
    return efficiency.measure(model, tok, dense, examples, 64, torch.device("cpu"), "fp32", None, read=read)


def test_an_idle_machine_is_timed_once(monkeypatch, models):
    eff = _timed(monkeypatch, models, [0.97], [1.5])
    t = eff.timing
    assert (t["repeats"], t["attempts"], t["kept"], t["under_load"]) == (REPEATS, 1, 1, None)
    assert t["cpu_share"] == [0.97] and t["load_1min"] == [[3.5, 3.5]]
    assert eff.metrics["eff/speedup_bs1"] == pytest.approx(1.5)
    assert set(t["metrics"]) == {"eff/throughput_bs32", "eff/latency_bs1_ms", "eff/speedup_bs32", "eff/speedup_bs1"}
    assert set(t["metrics"]) <= set(eff.metrics) and "eff/params_m" not in t["metrics"]  # a count is not timed


def test_a_contended_attempt_is_timed_again_and_the_least_contended_kept(monkeypatch, models):
    eff = _timed(monkeypatch, models, [0.5, 0.93], [0.18, 1.07])
    t = eff.timing
    assert (t["attempts"], t["kept"], t["under_load"]) == (2, 2, None)  # stopped at the first clean attempt
    assert eff.metrics["eff/speedup_bs1"] == pytest.approx(1.07) and eff.metrics["eff/speedup_bs32"] == pytest.approx(1.07)


def test_a_machine_contended_in_every_attempt_is_marked_under_load(monkeypatch, models):
    eff = _timed(monkeypatch, models, [0.5, 0.7, 0.6], [0.18, 0.92, 0.5])
    t = eff.timing
    assert t["attempts"] == ATTEMPTS == 3 and t["kept"] == 2 and t["cpu_share"] == [0.5, 0.7, 0.6]
    assert t["under_load"] == "CPU share 0.70 < 0.8 in each of 3 timed attempts"
    assert eff.metrics["eff/speedup_bs1"] == pytest.approx(0.92)  # the least contended attempt's, not the median's 0.5


def test_the_record_keeps_the_repeat_count_and_the_load_mark_and_the_leaderboard_shows_it(runner, run_spec, monkeypatch):
    import json

    import jsonschema

    import bench.core.runner as core
    from bench.spec.schemas import record_schema
    from leaderboard.build import build

    busy = busy_threads(torch.device("cpu"))
    clocks = iter([_clock([0.4, 0.5, 0.45], busy), _clock([0.4, 0.5, 0.45], busy)])  # the reference's run, then this one's
    monkeypatch.setattr(core, "measure", lambda *a, **k: efficiency.measure(*a, **k, read=next(clocks)))
    monkeypatch.setattr(efficiency, "_seconds", lambda *a: 0.01)  # only the clocks matter here (test_runner's runs time for real)
    rec = runner.run(run_spec("finetune"))
    assert rec.timing["repeats"] == REPEATS and rec.timing["attempts"] == 3 and rec.timing["kept"] == 2
    assert rec.timing["under_load"].startswith("CPU share 0.50 < 0.8")
    stored = json.loads((runner.out / "records" / f"{rec.run_id}.json").read_text())
    jsonschema.validate(stored, record_schema())
    assert stored["timing"]["repeats"] == REPEATS
    row = next(ln for ln in build([rec]).splitlines() if ln.startswith("| ") and "finetune" in ln)
    assert "⚠ measured under load (seed 0)" in row


def test_a_record_made_before_timing_was_kept_still_validates():
    import jsonschema

    from bench.spec.schemas import record_schema

    schema = record_schema()
    assert "timing" not in schema["required"]
    check = functools.partial(jsonschema.validate, schema=schema["properties"]["timing"])
    check(None)
    with pytest.raises(jsonschema.ValidationError):
        check({"repeats": 5})  # no attempts, no under_load: not a timing
