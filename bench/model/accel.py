"""What a run does differently on a GPU, in one place: TF32 matmuls, fused AdamW, pinned-memory
transfers, length-bucketed training batches, and the optional ``torch.compile``.

Everything here keys on ``device.type == "cuda"`` (or the run's ``compile`` flag), so a CPU run
takes exactly the path it always took: the same batches in the same order, the same optimizer
arithmetic, the same records. The device is part of a candidate's lineage, so a CUDA candidate
never shares a cache entry with a CPU one.
"""

from __future__ import annotations

import torch
from torch import nn

BUCKET_BATCHES = 50  # batches per length bucket: enough to sort by, few enough to stay shuffled


def setup(device: torch.device) -> None:
    """TF32 tensor-core matmuls on Ampere and later (Hopper included): about 8x the fp32 matmul
    rate for a 10-bit mantissa in the products, what Hugging Face's Trainer does with ``tf32=True``."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def adamw(groups: list[dict], lr: float, device: torch.device) -> torch.optim.AdamW:
    """AdamW, fused into one kernel per parameter group on CUDA (``fused=True``); on CPU the
    default implementation, whose arithmetic every committed CPU result used."""
    return torch.optim.AdamW(groups, lr=lr, fused=True if device.type == "cuda" else None)


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """A batch on ``device``; on CUDA through pinned (page-locked) host memory, so the copy is
    asynchronous and overlaps the previous step's kernels."""
    if device.type != "cuda":
        return {k: v.to(device) for k, v in batch.items()}
    return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}


def batch_order(lengths: list[int], batch_size: int, gen: torch.Generator, bucket: bool) -> list[torch.Tensor]:
    """One epoch's batches of example indices. Unbucketed: a seeded permutation cut into
    consecutive batches. Bucketed (CUDA): the permutation is cut into chunks of
    ``BUCKET_BATCHES`` batches, each chunk sorted by length and cut into batches, and the
    batches shuffled, so that a batch pads to nearly its own length (less padding is less
    wasted compute) while every example is still seen once per epoch in a seeded random order."""
    perm = torch.randperm(len(lengths), generator=gen)
    if not bucket:
        return [perm[s : s + batch_size] for s in range(0, len(perm), batch_size)]
    chunk = batch_size * BUCKET_BATCHES
    out = []
    for c in range(0, len(perm), chunk):
        part = perm[c : c + chunk]
        part = part[torch.argsort(torch.tensor([lengths[i] for i in part.tolist()]), stable=True)]
        out += [part[s : s + batch_size] for s in range(0, len(part), batch_size)]
    return [out[i] for i in torch.randperm(len(out), generator=gen).tolist()]


def compiled(model: nn.Module, enabled: bool) -> nn.Module:
    """The model's forward compiled by ``torch.compile`` (``dynamic=True``: dynamic padding
    gives every batch its own length, which would otherwise recompile), or the model itself.
    Parameters are shared, so training the compiled module trains ``model``."""
    return torch.compile(model, dynamic=True) if enabled else model
