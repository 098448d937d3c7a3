"""One-shot pruning after training, without retraining: what practitioners apply to a model they
already have (docs/methods.md). Each prunes the start model (the recipe's fine-tuned model, or a
checkpoint as it is) encoder block by encoder block from a calibration pass over a seeded sample
of the training split (``bench.plugin.PruneMethod``, ``bench.model.oneshot``).

- ``magnitude``: |W_ij|, compared within each matrix: the magnitude baseline of Sun et al. 2023
  (section 4, "layer-wise") and of Frantar and Alistarh 2023.
- ``wanda``: Sun et al. 2023, equation 1: S_ij = |W_ij| * ||X_j||_2, compared within each
  output row (section 3, "comparison group"); no weight update.
- ``sparsegpt``: Frantar and Alistarh 2023, algorithm 1: the mask chosen and the remaining
  weights of each row updated by the optimal-brain-surgeon rule from the calibration Hessian,
  in column blocks (``blocksize``, 128) and dampened by ``percdamp`` (1 %) of its mean diagonal,
  the released ``sparsegpt.py``'s defaults.

Both papers calibrate on 128 sequences (of 2,048 C4 tokens, for language models); here the
calibration set is 128 examples of the task's own training split (``calibration``), since an
encoder classifier has no pre-training text at hand; ``retrain_epochs=0``, as the papers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench.errors import BenchError
from bench.model.oneshot import Layer, parse_pattern, sparsegpt
from bench.plugin import PruneMethod, PruneParams
from bench.registry import METHODS

PAPER_CALIBRATION = 128  # Sun et al. 2023 section 4; Frantar and Alistarh 2023 section 4


@dataclass
class OneShotParams(PruneParams):
    retrain_epochs: float = 0.0  # one-shot: no retraining, as both papers
    calibration: int = PAPER_CALIBRATION


@dataclass
class SparseGPTParams(OneShotParams):
    blocksize: int = 128  # columns pruned and updated together (algorithm 1's B; released fasterprune default)
    percdamp: float = 0.01  # dampening of H, a fraction of its mean diagonal (released fasterprune default)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.blocksize < 1 or not 0 < self.percdamp < 1:
            raise BenchError(f"blocksize must be at least 1 and percdamp in (0, 1), got {self.blocksize}, {self.percdamp}")
        nm = parse_pattern(self.pattern)
        if nm and self.blocksize % nm[1]:
            raise BenchError(f"blocksize {self.blocksize} must be a multiple of the pattern's M ({nm[1]}): "
                             "an N:M group may not straddle two column blocks")


@METHODS.register("magnitude")
class Magnitude(PruneMethod):
    name = "magnitude"
    description = "one-shot magnitude pruning of a trained model, per matrix (the papers' baseline); no retraining"
    Params = OneShotParams
    group = "layer"

    def score(self, layer: Layer) -> torch.Tensor:
        return layer.weight.abs()


@METHODS.register("wanda")
class Wanda(PruneMethod):
    name = "wanda"
    description = "Wanda (Sun et al. 2023): |W| x input-feature norm, per output row, one shot; no retraining"
    Params = OneShotParams
    group = "row"

    def score(self, layer: Layer) -> torch.Tensor:
        return layer.weight.abs() * layer.input_norm.reshape(1, -1)


@METHODS.register("sparsegpt")
class SparseGPT(PruneMethod):
    name = "sparsegpt"
    description = "SparseGPT (Frantar and Alistarh 2023): one-shot pruning with the Hessian reconstruction update"
    Params = SparseGPTParams
    hessian = True

    def prune(self, layer: Layer, sparsity: float, p: SparseGPTParams) -> torch.Tensor:
        return sparsegpt(layer, sparsity, parse_pattern(p.pattern), blocksize=p.blocksize, percdamp=p.percdamp)
