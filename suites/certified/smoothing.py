"""A smoothed classifier's votes: perturbed copies of each example (``bench.data.perturb``) run
through the candidate.

On a pair task only the second text (NLI's hypothesis) is perturbed, as RanMASK's released code
does. ``votes`` runs every sample of a chunk of examples through the candidate's own forward pass
in length-sorted batches (``bench.model.predict``): an int8 candidate votes with its int8 kernels.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from bench.data.examples import Example
from bench.data.perturb import perturbed

CHUNK = 16  # examples whose samples share batches


def votes(model, tokenizer, examples: list[Example], perturb: Callable[[str, random.Random], str], counts: tuple[int, ...],
          seed: int, max_length: int, device, precision: str = "fp32", batch_size: int = 128) -> list[list[np.ndarray]]:
    """For each example, one vote count per class for each entry of ``counts`` (CERTIFY's
    selection and estimation draws, independent), each sample's seed fixed by ``seed`` and the
    example's id. A copy drawn more than once (short texts under masking) is run once and counted
    as often as drawn."""
    from bench.model.predict import predict_logits

    out = []
    for s in range(0, len(examples), CHUNK):
        chunk = examples[s:s + CHUNK]
        batch = []
        for ex in chunk:
            rng = random.Random(f"{seed}:{ex.uid}")
            batch += [perturbed(ex, perturb, rng) for n in counts for _ in range(n)]
        at_of: dict[tuple, int] = {}  # a copy drawn twice is run once: the model is deterministic
        where = [at_of.setdefault((x.text_a, x.text_b), len(at_of)) for x in batch]
        distinct = list({k: None for k in at_of})
        runs = [Example(f"d{j}", a, b, 0) for j, (a, b) in enumerate(distinct)]
        answers = predict_logits(model, tokenizer, runs, max_length, device, precision, batch_size).argmax(1)[where]
        classes, at = model.config.num_labels, 0
        for _ in chunk:
            got = []
            for n in counts:
                got.append(np.bincount(answers[at:at + n], minlength=classes))
                at += n
            out.append(got)
    return out
