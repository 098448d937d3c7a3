"""Where the parts of a BERT-family encoder live, for each architecture the harness supports.

BERT and RoBERTa name their layers ``<base>.encoder.layer.N`` with ``attention.self.{query,key,
value}``, ``attention.output.dense``, ``intermediate.dense`` and ``output.dense``; DistilBERT
names them ``distilbert.transformer.layer.N`` with ``attention.{q_lin,k_lin,v_lin,out_lin}`` and
``ffn.{lin1,lin2}``. Everything that walks layers, counts prunable matrices or removes heads
goes through this module, so that no other code assumes BERT's names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torch import nn

from bench.errors import BenchError

# The six prunable matrices of every layer (docs/design.md section 3), in each architecture's names.
PRUNABLE = re.compile(
    r"(encoder\.layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense|intermediate\.dense|output\.dense)"
    r"|transformer\.layer\.\d+\.(attention\.(q_lin|k_lin|v_lin|out_lin)|ffn\.(lin1|lin2)))$"
)
# The task head and pooler: reported separately, never counted in sparsity.
HEAD = re.compile(r"(classifier(\.dense|\.out_proj)?|pre_classifier|pooler\.dense)$")


def layers(model: nn.Module) -> nn.ModuleList:
    """The encoder's transformer layers, in order."""
    base = model.base_model
    if hasattr(base, "encoder") and hasattr(base.encoder, "layer"):
        return base.encoder.layer
    if hasattr(base, "transformer") and hasattr(base.transformer, "layer"):
        return base.transformer.layer
    raise BenchError(f"{type(model).__name__} is not a BERT, RoBERTa or DistilBERT encoder (no encoder layers found)")


def keep_layers(model: nn.Module, indices: list[int]) -> None:
    """Keep the layers at ``indices`` (0-based, in that order): the first k for a "truncated"
    student (Du et al. 2023), every other one for a distilled student's start."""
    kept = nn.ModuleList([layers(model)[i] for i in indices])
    base = model.base_model
    if hasattr(base, "encoder") and hasattr(base.encoder, "layer"):
        base.encoder.layer = kept
    else:
        base.transformer.layer = kept
    model.config.num_hidden_layers = len(indices)  # DistilBERT's config maps n_layers to this name


def truncate(model: nn.Module, keep: int) -> None:
    keep_layers(model, list(range(keep)))


@dataclass
class Attention:
    """One layer's self-attention as the head code needs it."""

    query: nn.Linear
    key: nn.Linear
    value: nn.Linear
    output: nn.Linear  # its input is the heads' concatenated context
    head_size: int
    module: nn.Module  # the module holding the projections
    owner: nn.Module  # the module that holds ``module`` under the name ``attr``
    attr: str


def attention(layer: nn.Module) -> Attention:
    if hasattr(layer.attention, "self"):  # BERT, RoBERTa
        s = layer.attention.self
        return Attention(s.query, s.key, s.value, layer.attention.output.dense, s.attention_head_size,
                         s, layer.attention, "self")
    a = layer.attention  # DistilBERT
    return Attention(a.q_lin, a.k_lin, a.v_lin, a.out_lin, a.dim // a.n_heads, a, layer, "attention")


def set_output(layer: nn.Module, linear: nn.Linear) -> None:
    if hasattr(layer.attention, "self"):
        layer.attention.output.dense = linear
    else:
        layer.attention.out_lin = linear


def set_heads(att: Attention, query: nn.Linear, key: nn.Linear, value: nn.Linear, n_heads: int) -> None:
    """Replace the projections of a self-attention that now has ``n_heads`` heads."""
    m = att.module
    if hasattr(m, "query"):
        m.query, m.key, m.value = query, key, value
        m.num_attention_heads = n_heads
        m.all_head_size = n_heads * att.head_size
    else:
        m.q_lin, m.k_lin, m.v_lin = query, key, value
        m.n_heads = n_heads
        m.dim = n_heads * att.head_size
        m.attention_head_size = att.head_size


def num_heads(model: nn.Module) -> int:
    c = model.config
    return getattr(c, "num_attention_heads", None) or c.n_heads
