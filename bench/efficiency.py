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

from bench.data import Example, stratified_sample
from bench.predict import autocast, collate, encode

EXAMPLES = 64  # test examples timed (stratified sample)
REPEATS = 3


@torch.no_grad()
def _timings(model, tokenizer, examples: list[Example], max_length: int, device: torch.device, precision: str) -> dict:
    model.eval().to(device)
    enc = encode(tokenizer, examples, max_length)
    batches32 = [collate(enc[s : s + 32], tokenizer.pad_token_id) for s in range(0, len(enc), 32)]
    singles = [collate([e], tokenizer.pad_token_id) for e in enc[:16]]

    def run(batches) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for b in batches:
            with autocast(device, precision):
                model(**{k: v.to(device) for k, v in b.items()})
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    run(batches32[:1])  # warm-up
    t32 = statistics.median(run(batches32) for _ in range(REPEATS))
    t1 = statistics.median(run(singles) for _ in range(REPEATS))
    return {"throughput_bs32": len(enc) / t32, "latency_bs1_ms": 1000 * t1 / len(singles)}


def measure(model, tokenizer, dense, examples: list[Example], max_length: int, device: torch.device,
            precision: str, artifact: Path | None) -> dict[str, float]:
    """``eff/*`` metrics of a candidate, with the dense backbone timed alongside."""
    sample = stratified_sample(examples, EXAMPLES, seed=0)
    params = [p for p in model.parameters()]
    mine = _timings(model, tokenizer, sample, max_length, device, precision)
    ref = _timings(dense, tokenizer, sample, max_length, device, precision)
    out = {
        "eff/params_m": sum(p.numel() for p in params) / 1e6,
        "eff/nonzero_m": sum(int((p != 0).sum()) for p in params) / 1e6,
        "eff/throughput_bs32": mine["throughput_bs32"],
        "eff/latency_bs1_ms": mine["latency_bs1_ms"],
        "eff/speedup_bs32": mine["throughput_bs32"] / ref["throughput_bs32"],
        "eff/speedup_bs1": ref["latency_bs1_ms"] / mine["latency_bs1_ms"],
    }
    weights = artifact / "model.safetensors" if artifact else None
    if weights is not None and weights.is_file():
        out["eff/disk_mb"] = weights.stat().st_size / 1e6
    return out
