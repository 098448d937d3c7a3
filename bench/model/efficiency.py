"""What a candidate costs: parameters, non-zero parameters, size on disk, and measured inference
speed against the dense backbone measured in the same process, on the same examples.

Speed is measured, never derived from a FLOP count: unstructured zeros still run through dense
kernels, so a 90 %-sparse model is about as fast as the dense one, while removed heads and
layers really shorten the forward pass. Throughput is taken at batch 32 and latency at batch 1,
on the task's test examples (its lengths, dynamic padding), on the run's device and precision,
as the median of several timed passes after a warm-up.

A busy machine changes a speed: a process competing for the cores slows the timed passes by
whatever share of them it takes (a single busy loop on a 2-core machine made a batch-32 pass
3x slower), and more so when it hits the candidate's passes than the dense model's. Each
timed attempt therefore reads this process's CPU time against the wall time it took
(``cpu_share``), and an attempt whose share is under ``CONTENDED_BELOW`` is made again, up to
``ATTEMPTS`` in all; the numbers kept are the least contended attempt's, and where that one is
still contended the record says "measured under load" (``timing.under_load``) and the
leaderboard flags the cells and never ranks on them.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.data.examples import Example, stratified_sample
from bench.model.predict import autocast, collate, encode
from bench.model.quant import quantized_linears, state_bytes, tensors
from bench.store.records import Column

EXAMPLES = 64  # test examples timed (stratified sample)
REPEATS = 5  # timed passes of each model at each batch size in one attempt
ATTEMPTS = 3  # timed attempts at most, while the machine stays contended
CONTENDED_BELOW = 0.8  # an attempt whose CPU share is under this was timed while other work held the cores
TIMED = ("eff/throughput_bs32", "eff/latency_bs1_ms", "eff/speedup_bs32", "eff/speedup_bs1")  # from the timed passes


@dataclass(frozen=True)
class Reading:
    """The clocks at one instant: wall seconds, this process's CPU seconds (all its threads), and
    the 1-minute load average (None where the OS keeps none), kept beside the share as context:
    it trails the load by about a minute, so it does not decide anything."""

    wall: float
    cpu: float
    load: float | None = None


def read() -> Reading:
    """The clocks now."""
    try:
        load: float | None = os.getloadavg()[0]
    except (OSError, AttributeError):  # no load average on this OS
        load = None
    return Reading(time.perf_counter(), time.process_time(), load)


def busy_threads(device: torch.device) -> int:
    """The threads a timed pass keeps busy on an idle machine: on CPU torch's intra-op threads,
    at most one per core this process may run on (its OpenMP threads spin between operators, so
    they stay on their cores); on an accelerator, the one thread that launches the kernels and
    spins waiting for them."""
    if device.type != "cpu":
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(torch.get_num_threads(), cores))


def cpu_share(start: Reading, end: Reading, busy: int) -> float:
    """The contention criterion's number: the CPU time this process got over the timed loop as a
    share of what its ``busy`` threads could have had, (cpu_end - cpu_start) / ((wall_end -
    wall_start) x busy). On an idle machine it is about 1 (0.99 on 2 cores, either batch size);
    every thread another process keeps on these cores takes its share of them and lowers it at
    once (0.61 with one competing busy loop on 2 cores, 0.49 with two), where the 1-minute load
    average is still catching up. Under ``CONTENDED_BELOW`` (0.8): contended."""
    wall = end.wall - start.wall
    return (end.cpu - start.cpu) / (wall * busy) if wall > 0 else 1.0


@dataclass(frozen=True)
class Attempt:
    """One timed attempt: ``REPEATS`` alternated passes of the candidate and the dense model at
    each batch size, (candidate seconds, dense seconds) each, and the clocks around them."""

    pairs32: list[tuple[float, float]]
    pairs1: list[tuple[float, float]]
    start: Reading
    end: Reading
    busy: int

    @property
    def share(self) -> float:
        return cpu_share(self.start, self.end, self.busy)

    @property
    def contended(self) -> bool:
        return self.share < CONTENDED_BELOW


@dataclass(frozen=True)
class Efficiency:
    """What ``measure`` found: the ``eff/*`` metrics, and how their speeds were timed (the
    record's ``timing``, docs/records.md)."""

    metrics: dict[str, float]
    timing: dict


def timing(attempts: list[Attempt], kept: Attempt) -> dict:
    """The record's ``timing``: the repeat and attempt counts, each attempt's CPU share and load
    average before and after, which attempt the numbers are, and ``under_load``: null, or why
    the kept attempt was still contended."""
    under = (f"CPU share {kept.share:.2f} < {CONTENDED_BELOW} in each of {len(attempts)} timed attempts"
             if kept.contended else None)
    return {"metrics": list(TIMED), "repeats": REPEATS, "attempts": len(attempts), "kept": attempts.index(kept) + 1,
            "busy_threads": kept.busy, "contended_below": CONTENDED_BELOW,
            "cpu_share": [round(a.share, 3) for a in attempts],
            "load_1min": [[None if r.load is None else round(r.load, 2) for r in (a.start, a.end)] for a in attempts],
            "under_load": under}


def _batches(tokenizer, examples: list[Example], max_length: int):
    enc = encode(tokenizer, examples, max_length)
    return ([collate(enc[s : s + 32], tokenizer.pad_token_id) for s in range(0, len(enc), 32)],
            [collate([e], tokenizer.pad_token_id) for e in enc[:16]], len(enc))


@torch.no_grad()
def _seconds(model, batches, device: torch.device, precision: str) -> float:
    model.eval().to(device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for b in batches:
        with autocast(device, precision):
            model(**{k: v.to(device) for k, v in b.items()})
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


COLUMNS = [  # how the leaderboard shows what measure() returns
    Column("eff/speedup_bs32", "speed-up bs32", "ratio", order=1),
    Column("eff/params_m", "params (M)", "number", None, "efficiency"),
    Column("eff/disk_mb", "disk (MB)", "number", False, "efficiency"),
    Column("eff/throughput_bs32", "ex/s bs32", "number", True, "efficiency"),
    Column("eff/latency_bs1_ms", "ms bs1", "number", False, "efficiency"),
    Column("eff/speedup_bs1", "speed-up bs1", "ratio", True, "efficiency"),
]


def measure(model, tokenizer, dense, examples: list[Example], max_length: int, device: torch.device,
            precision: str, artifact: Path | None, read: Callable[[], Reading] = read) -> Efficiency:
    """``eff/*`` metrics of a candidate. The candidate and the dense backbone are timed in
    alternation, and speed-ups are medians of the paired ratios, so that a brief competitor
    slows both alike. An attempt timed under sustained competition (``cpu_share`` under
    ``CONTENDED_BELOW``) is made again, up to ``ATTEMPTS``, and the least contended one is kept,
    not the median: competition only ever slows a pass, so the attempt that had the cores most
    to itself is the closest to the machine's own speed. ``read``: the clocks (a test passes its
    own)."""
    sample = stratified_sample(examples, EXAMPLES, seed=0)
    b32, b1, n = _batches(tokenizer, sample, max_length)
    for m in (model, dense):
        _seconds(m, b32[:1], device, precision)  # warm-up
    busy, attempts = busy_threads(device), []
    for _ in range(ATTEMPTS):
        start, pairs32, pairs1 = read(), [], []
        for _ in range(REPEATS):
            pairs32.append((_seconds(model, b32, device, precision), _seconds(dense, b32, device, precision)))
            pairs1.append((_seconds(model, b1, device, precision), _seconds(dense, b1, device, precision)))
        attempts.append(Attempt(pairs32, pairs1, start, read(), busy))
        if not attempts[-1].contended:
            break
    kept = max(attempts, key=lambda a: a.share)  # the first of equals
    pairs32, pairs1 = kept.pairs32, kept.pairs1
    params = tensors(model)
    out = {
        "eff/params_m": sum(p.numel() for p in params) / 1e6,
        "eff/nonzero_m": sum(int((p != 0).sum()) for p in params) / 1e6,
        "eff/throughput_bs32": n / statistics.median(c for c, _ in pairs32),
        "eff/latency_bs1_ms": 1000 * statistics.median(c for c, _ in pairs1) / len(b1),
        "eff/speedup_bs32": statistics.median(d / c for c, d in pairs32),
        "eff/speedup_bs1": statistics.median(d / c for c, d in pairs1),
    }
    weights = artifact / "model.safetensors" if artifact else None
    if quantized_linears(model):  # what its packed int8 weights take, not the float copy the cache keeps
        out["eff/disk_mb"] = state_bytes(model) / 1e6
    elif weights is not None and weights.is_file():
        out["eff/disk_mb"] = weights.stat().st_size / 1e6
    return Efficiency(out, timing(attempts, kept))
