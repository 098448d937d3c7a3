"""What a candidate costs: parameters, non-zero parameters, size on disk, and measured inference
speed against the dense backbone measured in the same process, on the same examples.

Speed is measured, never derived from a FLOP count: unstructured zeros still run through dense
kernels, so a 90 %-sparse model is about as fast as the dense one, while removed heads and
layers really shorten the forward pass. Throughput is taken at batch 32 and latency at batch 1,
on the task's test examples (its lengths, dynamic padding), on the run's device and precision,
as the median of several timed passes after a warm-up.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from bench.data.examples import Example, stratified_sample
from bench.model.predict import autocast, collate, encode
from bench.model.quant import quantized_linears, state_bytes, tensors
from bench.store.records import Column

EXAMPLES = 64  # test examples timed (stratified sample)
REPEATS = 5


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
            precision: str, artifact: Path | None) -> dict[str, float]:
    """``eff/*`` metrics of a candidate. The candidate and the dense backbone are timed in
    alternation, and speed-ups are medians of the paired ratios, so that a busy machine slows
    both alike."""
    sample = stratified_sample(examples, EXAMPLES, seed=0)
    b32, b1, n = _batches(tokenizer, sample, max_length)
    for m in (model, dense):
        _seconds(m, b32[:1], device, precision)  # warm-up
    pairs32, pairs1 = [], []
    for _ in range(REPEATS):
        pairs32.append((_seconds(model, b32, device, precision), _seconds(dense, b32, device, precision)))
        pairs1.append((_seconds(model, b1, device, precision), _seconds(dense, b1, device, precision)))
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
    return out
