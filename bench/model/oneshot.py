"""One-shot pruning without retraining: the calibration pass and the pruning rules it feeds.

The pass is the one Wanda's and SparseGPT's released drivers share (``prune_wanda`` in Sun et al.
2023's code, ``opt_sequential`` in Frantar and Alistarh 2023's):
encoder block by encoder block, the calibration examples run through the model as pruned so
far, each prunable matrix of the block gathers statistics of its input (the L2 norm of every
input feature; the Hessian ``H = 2/n X X^T`` when asked), then every matrix of the block is
pruned and the next block sees the pruned one's outputs. Padding tokens never count.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from bench.errors import BenchError
from bench.model.masking import prunable_linears
from bench.model.predict import collate, encode, to_device

BLOCK = re.compile(r"^(.*\.layer\.\d+)\.")


@dataclass
class Layer:
    """What a pruning rule sees of one prunable matrix: its name, its weight (out x in) as the
    blocks before it were pruned, and its input over the calibration tokens."""

    name: str
    weight: torch.Tensor
    input_norm: torch.Tensor  # (in,): ||X_j||_2 over the tokens, / sqrt(n examples) (Wanda's sqrt(scaler_row))
    hessian: torch.Tensor | None = None  # (in, in): 2/n sum x x^T (SparseGPT's H), when asked for


def parse_pattern(pattern: str) -> tuple[int, int] | None:
    """``unstructured`` -> None; ``N:M`` (keep N of every M consecutive weights of a row) -> (N, M)."""
    if pattern == "unstructured":
        return None
    n, colon, m = pattern.partition(":")
    if not (colon and n.isdigit() and m.isdigit() and 0 < int(n) < int(m)):
        raise BenchError(f"pattern must be 'unstructured' or N:M with 0 < N < M (2:4, 4:8), got '{pattern}'")
    return int(n), int(m)


def keep_mask(score: torch.Tensor, sparsity: float, group: str, nm: tuple[int, int] | None) -> torch.Tensor:
    """Which weights to keep: the highest scores, ``round(sparsity * size)`` pruned in each
    comparison group: the whole matrix (``layer``, the magnitude baseline of both papers) or
    each output row (``row``, Wanda's per-output group, section 3); with N:M, the N highest of
    every M consecutive weights of a row (Wanda's and SparseGPT's semi-structured sparsity)."""
    if nm is not None:
        n, m = nm
        if score.shape[1] % m:
            raise BenchError(f"an N:M pattern needs a multiple of {m} input features, this matrix has {score.shape[1]}")
        groups = score.reshape(score.shape[0], -1, m)
        keep = torch.zeros_like(groups, dtype=torch.bool)
        keep.scatter_(2, groups.topk(n, dim=2).indices, True)
        return keep.reshape(score.shape)
    rows = score.reshape(1, -1) if group == "layer" else score
    k = int(round(sparsity * rows.shape[1]))
    keep = torch.ones_like(rows, dtype=torch.bool)
    if k:
        keep.scatter_(1, rows.topk(k, dim=1, largest=False).indices, False)
    return keep.reshape(score.shape)


@torch.no_grad()
def sparsegpt(layer: Layer, sparsity: float, nm: tuple[int, int] | None, blocksize: int = 128,
              percdamp: float = 0.01) -> torch.Tensor:
    """SparseGPT's pruned and reconstructed weight (Frantar and Alistarh 2023, algorithm 1): the
    columns in blocks of ``blocksize``; in each block the mask is chosen by w^2 / [H^-1]_jj^2
    (unstructured: ``sparsity`` of the block; N:M: M - N of every M columns of a row), and each
    pruned weight's error is spread over the columns not yet processed through the Cholesky
    factor of H^-1 (the optimal-brain-surgeon update), H dampened by ``percdamp`` of its mean
    diagonal."""
    if layer.hessian is None:
        raise BenchError("SparseGPT needs the calibration Hessian of every layer")
    W = layer.weight.detach().clone().float()
    H = layer.hessian.clone().float()
    cols = W.shape[1]
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    H += percdamp * torch.mean(torch.diag(H)) * torch.eye(cols, device=H.device)
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        W1, Hinv1 = W[:, i1:i2].clone(), Hinv[i1:i2, i1:i2]
        Q1, Err1 = torch.zeros_like(W1), torch.zeros_like(W1)
        if nm is None:  # as the released code: the k-th smallest and all below it (k + 1 of the block)
            tmp = W1**2 / torch.diag(Hinv1).reshape(1, -1) ** 2
            k = int(tmp.numel() * sparsity)
            mask1 = tmp <= torch.sort(tmp.flatten())[0][k] if sparsity > 0 else torch.zeros_like(tmp, dtype=torch.bool)
        else:
            mask1 = torch.zeros_like(W1, dtype=torch.bool)
        for i in range(i2 - i1):
            if nm is not None and i % nm[1] == 0:
                tmp = W1[:, i:i + nm[1]] ** 2 / torch.diag(Hinv1)[i:i + nm[1]].reshape(1, -1) ** 2
                mask1.scatter_(1, i + torch.topk(tmp, nm[1] - nm[0], dim=1, largest=False)[1], True)
            w, d = W1[:, i], Hinv1[i, i]
            q = w.clone()
            q[mask1[:, i]] = 0
            Q1[:, i] = q
            err = (w - q) / d
            W1[:, i:] -= err.unsqueeze(1) @ Hinv1[i, i:].unsqueeze(0)
            Err1[:, i] = err
        W[:, i1:i2] = Q1
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
    return W.to(layer.weight.dtype)


class _Stats:
    """One matrix's input over the calibration tokens: the sum of squares of each feature, and
    the sum of x x^T when the Hessian is asked for."""

    def __init__(self, features: int, hessian: bool, device: torch.device) -> None:
        self.sq = torch.zeros(features, device=device)
        self.h = torch.zeros(features, features, device=device) if hessian else None

    def hook(self, real: list[torch.Tensor]):
        def gather(_module, inputs, _output):
            x = inputs[0][real[0]].float()  # (tokens, in): padding left out
            self.sq += (x**2).sum(0)
            if self.h is not None:
                self.h += x.T @ x
        return gather


def _blocks(model: nn.Module) -> list[dict[str, nn.Linear]]:
    """The prunable matrices grouped by encoder block, in the order the input reaches them."""
    out: dict[str, dict[str, nn.Linear]] = {}
    for name, lin in prunable_linears(model).items():
        found = BLOCK.match(name)
        out.setdefault(found.group(1) if found else name, {})[name] = lin
    return list(out.values())


@torch.no_grad()
def prune_sequentially(model: nn.Module, tokenizer, examples: list, max_length: int, device: torch.device,
                       rule: Callable[[Layer], torch.Tensor], hessian: bool, batch_size: int = 16) -> dict[str, torch.Tensor]:
    """Prune every prunable matrix with ``rule`` (a Layer -> its new weight, zeros pruned), block
    by block over the calibration ``examples``; returns each matrix's mask of kept weights."""
    model.eval().to(device)
    enc = encode(tokenizer, examples, max_length)
    batches = [collate(enc[s:s + batch_size], tokenizer.pad_token_id) for s in range(0, len(enc), batch_size)]
    masks = {}
    real: list[torch.Tensor] = [torch.ones(0)]  # the batch's attention mask, read by every hook
    for block in _blocks(model):
        stats = {n: _Stats(lin.in_features, hessian, device) for n, lin in block.items()}
        handles = [lin.register_forward_hook(stats[n].hook(real)) for n, lin in block.items()]
        try:
            for batch in batches:
                batch = to_device(batch, device)
                real[0] = batch["attention_mask"].bool()
                model(**batch)
        finally:
            for h in handles:
                h.remove()
        n = len(examples)
        for name, lin in block.items():
            st = stats[name]
            layer = Layer(name, lin.weight.detach(), torch.sqrt(st.sq / n), 2 * st.h / n if st.h is not None else None)
            new = rule(layer)
            if new.shape != lin.weight.shape or not torch.isfinite(new).all():
                raise BenchError(f"the pruning rule gave {name} a weight of shape {tuple(new.shape)} or non-finite values")
            lin.weight.copy_(new)
            masks[name] = (new != 0).cpu()
    return masks


def calibration_sample(examples: list, size: int, seed: int) -> list:
    """A seeded sample of ``size`` training examples (all of them when there are fewer)."""
    if size < 1:
        raise BenchError(f"calibration must be at least 1 example, got {size}")
    return examples if len(examples) <= size else random.Random(seed).sample(examples, size)

