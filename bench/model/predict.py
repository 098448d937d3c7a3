"""Batched inference with dynamic padding (examples sorted by length, each batch padded to its
own longest), under optional bf16 autocast."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from bench.data.examples import Example
from bench.model.accel import to_device


def encode(tokenizer, examples: list[Example], max_length: int) -> list[dict[str, list[int]]]:
    a = [ex.text_a for ex in examples]
    b = [ex.text_b for ex in examples] if examples and examples[0].text_b is not None else None
    enc = tokenizer(a, b, truncation=True, max_length=max_length)
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    return [{k: enc[k][i] for k in keys} for i in range(len(examples))]


def collate(items: list[dict[str, list[int]]], pad_id: int, pad_to: int | None = None) -> dict[str, torch.Tensor]:
    width = pad_to or max(len(it["input_ids"]) for it in items)
    out = {}
    for k in items[0]:
        fill = pad_id if k == "input_ids" else 0
        out[k] = torch.tensor([it[k] + [fill] * (width - len(it[k])) for it in items])
    return out


def autocast(device: torch.device, precision: str):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


@torch.no_grad()
def predict_logits(
    model: nn.Module,
    tokenizer,
    examples: list[Example],
    max_length: int,
    device: torch.device,
    precision: str = "fp32",
    batch_size: int = 64,
    fixed_padding: bool = False,
) -> np.ndarray:
    """Logits in the order of ``examples``. ``fixed_padding`` pads every batch to max_length
    (what TextAttack's wrapper does), kept only to measure what dynamic padding saves."""
    was_training = model.training
    model.eval()
    model.to(device)
    enc = encode(tokenizer, examples, max_length)
    order = sorted(range(len(enc)), key=lambda i: len(enc[i]["input_ids"]))
    out = np.zeros((len(examples), model.config.num_labels), dtype=np.float32)
    for s in range(0, len(order), batch_size):
        idx = order[s : s + batch_size]
        batch = collate([enc[i] for i in idx], tokenizer.pad_token_id, max_length if fixed_padding else None)
        with autocast(device, precision):
            logits = model(**to_device(batch, device)).logits
        out[idx] = logits.float().cpu().numpy()
    model.train(was_training)
    return out


def prediction_rows(name: str, examples: list[Example], logits: np.ndarray, pred: np.ndarray) -> list[dict]:
    """The per-example rows of one evaluated set, as every record keeps them (anyone can re-score
    a record from these and the data): set, example id, gold and predicted label (in the set's
    label space), whether it is right (what a paired test compares), its group, and the class
    probabilities at 4 decimals."""
    z = logits - logits.max(1, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    return [
        {"set": name, "uid": e.uid, "gold": e.label, "pred": int(q), "correct": int(q) == e.label, "group": e.group,
         "probs": [round(float(v), 4) for v in pr]}
        for e, pr, q in zip(examples, probs, pred, strict=True)
    ]
