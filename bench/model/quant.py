"""Post-training quantization: what a practitioner ships, in two kinds.

- INT8 dynamic (``torch.ao.quantization.quantize_dynamic``): the encoder's prunable Linear
  layers' weights stored in int8 with a per-tensor scale, activations quantized on the fly; it runs int8 kernels on
  this CPU, so its speed and size are real and measured.
- Weight-only round-to-nearest (RTN) at ``bits`` with a scale and zero point per group of
  ``group_size`` consecutive input weights of a row (the asymmetric min-max quantizer of GPTQ's
  released code, zero kept inside the range): simulated, the weights replaced by their dequantized values in floating
  point, so its robustness numbers are exact and its speed is the dense model's (said so).

A dynamically quantized model cannot be saved as safetensors; the cache keeps the floating-point
weights it was made from and ``restore`` quantizes them again on load (deterministic).
"""

from __future__ import annotations

import io

import torch
from torch import nn

from bench.errors import BenchError

INT8_DYNAMIC = "int8_dynamic"


@torch.no_grad()
def rtn(weight: torch.Tensor, bits: int, group_size: int) -> torch.Tensor:
    """``weight`` (out x in) rounded to ``2**bits`` levels per group, dequantized."""
    out, cols = weight.shape
    if cols % group_size:
        raise BenchError(f"group_size {group_size} does not divide a matrix's {cols} input features")
    w = weight.float().reshape(out, cols // group_size, group_size)
    lo, hi = w.amin(2, keepdim=True).clamp(max=0), w.amax(2, keepdim=True).clamp(min=0)  # zero stays exact
    levels = 2**bits - 1
    scale = ((hi - lo) / levels).clamp(min=1e-12)
    zero = torch.round(-lo / scale)
    q = torch.clamp(torch.round(w / scale) + zero, 0, levels)
    return ((q - zero) * scale).reshape(out, cols).to(weight.dtype)


def quantize_weights(model: nn.Module, bits: int, group_size: int) -> None:
    """The encoder's prunable Linear layers' weights rounded to ``bits`` (``rtn``), in place."""
    from bench.model.masking import prunable_linears

    for lin in prunable_linears(model).values():
        lin.weight.data = rtn(lin.weight.data, bits, group_size)


def int8_dynamic(model: nn.Module) -> nn.Module:
    """The encoder's prunable Linear layers (the matrices sparsity counts) as torch's dynamic
    int8 Linear, CPU only. ``torch.ao.quantization`` is deprecated in favour of the separate
    torchao package, and still the quantizer that ships with torch (the record names its version)."""
    import warnings

    from torch.ao.quantization import default_dynamic_qconfig, quantize_dynamic

    from bench.model.masking import prunable_linears

    spec = {name: default_dynamic_qconfig for name in prunable_linears(model)}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(deprecated|quantize_per_tensor).*")
        return quantize_dynamic(model.cpu().eval(), spec, dtype=torch.qint8)


def restore(model: nn.Module, info: dict) -> nn.Module:
    """The candidate as evaluated: quantized again where its method said so (``info["quantize"]``)."""
    if info.get("quantize") == INT8_DYNAMIC:
        return int8_dynamic(model)
    return model


def quantized_linears(model: nn.Module) -> int:
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    return sum(isinstance(m, DynamicLinear) for m in model.modules())


def tensors(model: nn.Module) -> list[torch.Tensor]:
    """Every weight and bias, a quantized layer's as its dequantized values (they are not
    parameters of the module, and a count of parameters alone would leave them out)."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    out = list(model.parameters())
    for m in model.modules():
        if isinstance(m, DynamicLinear):
            out += [m.weight().dequantize()] + ([m.bias()] if m.bias() is not None else [])
    return out


def state_bytes(model: nn.Module) -> int:
    """The size of the model's weights as torch serialises them (packed int8 for quantized layers)."""
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.tell()
