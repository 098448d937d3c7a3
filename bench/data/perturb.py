"""Random perturbations of a text that a smoothed classifier votes over, and that a model is
trained on to be smoothed (randomized smoothing for text): here, in the data layer, so that the
certified suite and a training method share one definition.

- ``Substitutions``: SAFER's perturbation sets (Ye, Gong and Liu, ACL 2020): a word's set T_w is
  the word and its counter-fitted neighbours (``wordsub/counterfitted_neighbors.json``, at most
  ``size`` words), and its overlap q_w = min over its neighbours w' of |T_w & T_w'| / |T_w|. A
  sample replaces every word that has a set by a uniform draw from it.
- ``masked``: a RanMASK sample (Zeng et al., Computational Linguistics 2023): ``kept`` of the h
  words kept, uniformly without replacement, each other word one mask token.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from bench.data.examples import Example
from bench.errors import BenchError

NEIGHBOURS = Path("wordsub") / "counterfitted_neighbors.json"  # in the data directory (bench data fetch)


def kept(words: int, mask_rate: float, min_keep: int = 2) -> int:
    """How many of ``words`` a RanMASK sample keeps: ``words - round(words * mask_rate)`` (Python's
    rounding, as the released sampler), and never fewer than ``min_keep`` (or all, if fewer)."""
    return max(words - round(words * mask_rate), min(min_keep, words))


@dataclass(frozen=True)
class Substitutions:
    sets: dict[str, tuple[str, ...]]  # T_w, the word first
    overlap: dict[str, float]  # q_w

    @classmethod
    def from_neighbours(cls, neighbours: dict[str, list[str]], size: int) -> Substitutions:
        sets = {w: tuple(dict.fromkeys([w, *ns]))[:size] for w, ns in neighbours.items() if ns}
        overlap = {}
        for w, t in sets.items():
            mine = set(t)
            overlap[w] = min((len(mine & set(sets.get(v, (v,)))) / len(mine) for v in neighbours[w]), default=1.0)
        return cls(sets, overlap)

    def overlaps(self, text: str) -> list[float]:
        """q_w of every word of ``text`` that has a perturbation set."""
        return [self.overlap[w] for w in text.lower().split() if w in self.sets]

    def sample(self, text: str, rng: random.Random) -> str:
        return " ".join(rng.choice(self.sets[w.lower()]) if w.lower() in self.sets else w for w in text.split())


def masked(text: str, mask_rate: float, mask_token: str, rng: random.Random) -> str:
    words = text.split()
    keep = set(rng.sample(range(len(words)), kept(len(words), mask_rate)))
    return " ".join(w if i in keep else mask_token for i, w in enumerate(words))


def perturbed(ex: Example, perturb: Callable[[str, random.Random], str], rng: random.Random) -> Example:
    """A random copy of ``ex``: its second text perturbed on a pair task (NLI's hypothesis, as
    RanMASK's released code), else its text."""
    if ex.text_b is not None:
        return replace(ex, text_b=perturb(ex.text_b, rng))
    return replace(ex, text_a=perturb(ex.text_a, rng))


def substitutions(data_dir: Path | None, size: int) -> Substitutions:
    """SAFER's perturbation sets from the data directory's neighbour lists, or one line saying
    what to fetch."""
    listed = data_dir / NEIGHBOURS if data_dir else None
    if listed is None or not listed.is_file():
        raise BenchError(f"smoothing=safer needs {NEIGHBOURS} in the data directory (bench data fetch; docs/data.md)")
    return Substitutions.from_neighbours(json.loads(listed.read_text()), size)
