"""Fine-tuning with label-smoothed cross-entropy (Szegedy et al. 2016), smoothing 0.1."""
import torch.nn.functional as F

from bench.plugin import LossMethod
from bench.registry import METHODS


@METHODS.register("smoothed")
class Smoothed(LossMethod):
    description = "fine-tuning with label-smoothed cross-entropy (0.1)"

    def loss(self, logits, y):
        return F.cross_entropy(logits.float(), y, label_smoothing=0.1)
