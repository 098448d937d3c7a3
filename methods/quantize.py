"""Post-training quantization of a trained model (the recipe's fine-tuned model or a checkpoint as
it is), no retraining: what Hong et al. 2024 ("Decoding Compressed Trust") compare with pruning,
applied to the encoder matrices that sparsity counts (docs/design.md section 3).

- ``scheme=int8_dynamic``: torch's dynamic int8 Linear (per-tensor weight scale, activations
  quantized on the fly). It runs int8 kernels on this CPU: the record's speed and size are
  measured on the quantized model itself.
- ``scheme=weight``: weight-only round-to-nearest at ``bits`` (8, 4 or 3, the three widths Hong et
  al. 2024 compare) with a scale and zero
  point per ``group_size`` weights of a row (GPTQ's released quantizer, ``bench.model.quant.rtn``), simulated in floating
  point: exact robustness numbers, the dense model's speed; its label says "simulated" and
  ``method_info.packed_mb`` gives the size the packed weights would take.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from bench.api import Candidate, Context
from bench.errors import BenchError
from bench.model.masking import prunable_linears
from bench.model.quant import INT8_DYNAMIC, quantize_weights
from bench.plugin import CompressMethod, StartParams
from bench.registry import METHODS

SCHEMES = (INT8_DYNAMIC, "weight")
BITS = (8, 4, 3)  # weight-only widths: Hong et al. 2024 find 4 keeps trust and 3 loses it


@dataclass
class QuantizeParams(StartParams):
    scheme: str = INT8_DYNAMIC
    bits: int = 8  # scheme=weight: 8, 4 or 3
    group_size: int = 128  # scheme=weight: consecutive input weights of a row sharing a scale and zero point

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.scheme not in SCHEMES:
            raise BenchError(f"scheme must be one of {', '.join(SCHEMES)}, got '{self.scheme}'")
        if self.bits not in BITS or self.group_size < 1:
            raise BenchError(f"bits must be one of {', '.join(map(str, BITS))} and group_size at least 1, "
                             f"got {self.bits} and {self.group_size}")


@METHODS.register("quantize")
class Quantize(CompressMethod):
    name = "quantize"
    description = "post-training quantization: int8 dynamic (real CPU speed) or weight-only int8/int4/int3 round-to-nearest (simulated)"
    Params = QuantizeParams
    labelled = ("loss", "scheme", "bits", "group_size", "start")

    def label(self, p: QuantizeParams) -> str:
        what = "int8 dynamic" if p.scheme == INT8_DYNAMIC else f"int{p.bits} weight-only g{p.group_size} (simulated)"
        return what + (f", {p.start_label()}" if p.start_label() else "")

    def epochs(self, p: QuantizeParams, sparsity: float | None) -> float:
        return 0.0

    def build(self, ctx: Context, p: QuantizeParams) -> Candidate:
        start = ctx.require(p.start_need())
        model = copy.deepcopy(start.model)
        info = {"start_model": start.lineage.get("key")}
        if p.scheme == INT8_DYNAMIC:
            if ctx.device.type != "cpu":
                raise BenchError("int8 dynamic quantization runs on the CPU only: use --device cpu")
            info["quantize"] = INT8_DYNAMIC  # the cache keeps the float weights; quantized on every load
        else:
            quantize_weights(model, p.bits, p.group_size)
            n = sum(lin.weight.numel() for lin in prunable_linears(model).values())
            info |= {"simulated": True, "packed_mb": round((n * p.bits / 8 + 2 * 2 * n / p.group_size) / 1e6, 3)}
        return Candidate(model=model, tokenizer=start.tokenizer, lineage={}, info=info)
