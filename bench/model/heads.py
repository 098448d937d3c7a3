"""Attention heads: gates on their outputs, and their physical removal.

Michel et al. (2019) put a gate xi_{l,h} on every head's output; the importance of a head is
E|dL/dxi_{l,h}|. transformers >= 5 has neither ``head_mask`` nor ``prune_heads``, so the harness
does both itself: a forward pre-hook multiplies each head's slice of the attention context
(the input of the attention output projection) by its gate, and ``remove_heads`` deletes the
pruned heads' rows of Q, K, V and columns of the output projection, so the model is really
smaller. The kept heads are written into the config (``bench_kept_heads``); ``load_pruned``
rebuilds that shape before loading the weights.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from bench.errors import BenchError
from bench.model.arch import attention, layers, num_heads, set_heads, set_output


def head_shape(model: nn.Module) -> tuple[int, int]:
    """(layers, heads per layer) of the unpruned architecture."""
    return len(layers(model)), num_heads(model)


class HeadGates:
    """One gate per head, all 1, with gradients: ``importance`` accumulates |dL/dxi| per batch.
    Works on the unpruned model (heads are removed only at the end)."""

    def __init__(self, model: nn.Module) -> None:
        n_layers, n_heads = head_shape(model)
        self.gates = torch.ones(n_layers, n_heads, requires_grad=True)
        self.keep = torch.ones(n_layers, n_heads)  # 0: a head already chosen for removal (gated off)
        self.importance = torch.zeros(n_layers, n_heads)
        self.batches = 0
        self.handles = []
        for i, layer in enumerate(layers(model)):
            att = attention(layer)
            size = att.head_size

            def hook(module, args, i=i, size=size):
                gate = (self.gates[i] * self.keep[i]).to(args[0].device, args[0].dtype).repeat_interleave(size)
                return (args[0] * gate, *args[1:])

            self.handles.append(att.output.register_forward_pre_hook(hook))

    def accumulate(self) -> None:
        """Add |dL/dxi| of the last backward pass (Michel et al. 2019, eq. 2)."""
        if self.gates.grad is not None:
            self.importance += self.gates.grad.detach().abs()
            self.gates.grad = None
            self.batches += 1

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def heads_to_prune(importance: torch.Tensor, fraction: float, allow_empty_layers: bool,
                   already: dict[int, list[int]] | None = None) -> dict[int, list[int]]:
    """The lowest-importance heads, ``fraction`` of all heads (rounded), never one twice."""
    if not 0.0 <= fraction < 1.0:
        raise BenchError(f"head fraction must be in [0, 1), got {fraction}")
    already = already or {}
    n_layers, n_heads = importance.shape
    k = int(round(fraction * n_layers * n_heads))
    scores = importance.clone().float()
    for layer, heads in already.items():
        scores[layer, heads] = float("inf")
    order = torch.argsort(scores.flatten())
    chosen: dict[int, list[int]] = {layer: list(h) for layer, h in already.items()}
    for idx in order[: k - sum(len(h) for h in already.values())].tolist():
        chosen.setdefault(idx // n_heads, []).append(idx % n_heads)
    empty = [layer for layer, heads in chosen.items() if len(set(heads)) == n_heads]
    if empty and not allow_empty_layers:
        raise BenchError(f"pruning {fraction:.0%} of the heads would remove every head of layer(s) {empty}; "
                         "pass --param allow_empty_layers=true to allow it")
    return {layer: sorted(set(h)) for layer, h in sorted(chosen.items())}


class _NoHeads(nn.Module):
    """A self-attention with no heads left: its context is empty (the output projection then
    adds only its bias)."""

    def forward(self, hidden_states, *args, **kwargs):
        return (hidden_states.new_zeros(*hidden_states.shape[:-1], 0), None)


def _keep_rows(lin: nn.Linear, index: torch.Tensor, dim: int) -> nn.Linear:
    w = lin.weight.detach().index_select(dim, index).clone()
    out = nn.Linear(w.shape[1], w.shape[0], bias=lin.bias is not None).to(w.device, w.dtype)
    out.weight.data.copy_(w)
    if lin.bias is not None:
        out.bias.data.copy_(lin.bias.detach() if dim == 1 else lin.bias.detach().index_select(0, index))
    return out


def remove_heads(model: nn.Module, prune: dict[int, list[int]]) -> None:
    """Delete the given heads' rows of Q, K, V and columns of the attention output projection."""
    _, n_heads = head_shape(model)
    kept = {int(k): v for k, v in (getattr(model.config, "bench_kept_heads", None) or {}).items()}
    for layer_idx, heads in prune.items():
        layer = layers(model)[layer_idx]
        if isinstance(getattr(layer.attention, "self", None), _NoHeads):
            continue
        att = attention(layer)
        current = kept.get(layer_idx, list(range(n_heads)))
        remaining = [h for h in current if h not in heads]
        positions = [current.index(h) for h in remaining]
        index = torch.tensor([p * att.head_size + j for p in positions for j in range(att.head_size)], dtype=torch.long)
        if remaining:
            set_output(layer, _keep_rows(att.output, index, dim=1))
            set_heads(att, *(_keep_rows(lin, index, dim=0) for lin in (att.query, att.key, att.value)), len(remaining))
        elif att.attr == "self":  # BERT, RoBERTa: the output projection adds only its bias
            set_output(layer, _keep_rows(att.output, index, dim=1))
            layer.attention.self = _NoHeads()
        else:
            raise BenchError(f"layer {layer_idx} would lose every head; DistilBERT layers keep at least one")
        kept[layer_idx] = remaining
    model.config.bench_kept_heads = {str(k): v for k, v in sorted(kept.items())}


def load_pruned(path: Path, model_cls):
    """A head-pruned model saved by the harness: the config's shape, then the weights."""
    from safetensors.torch import load_file
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path, local_files_only=True)
    kept = {int(k): v for k, v in config.bench_kept_heads.items()}
    config.bench_kept_heads = None
    model = model_cls.from_config(config)
    n_heads = getattr(config, "num_attention_heads", None) or config.n_heads
    remove_heads(model, {layer: [h for h in range(n_heads) if h not in heads] for layer, heads in kept.items()})
    state = load_file(str(Path(path) / "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or [m for m in missing if "position_ids" not in m]:
        raise BenchError(f"{path}: weights do not fit the pruned shape (missing {missing[:3]}, unexpected {unexpected[:3]})")
    return model.eval()
