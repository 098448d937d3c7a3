"""Random perturbations of a text that a smoothed classifier votes over, and that a model is
trained on to be smoothed (randomized smoothing for text): here, in the data layer, so that the
certified suite and a training method share one definition.

- ``Substitutions``: SAFER's perturbation sets (Ye, Gong and Liu, ACL 2020), built as its released
  ``data_process.get_perturbation_set``: the counter-fitted neighbours
  (``wordsub/counterfitted_neighbors.json``, the attacker's synonyms S_w) link words into a graph;
  a word in a connected component of at most ``size`` words has the whole component as its set
  T_w, so its overlap q_w is 1; in a larger component T_w is the ``size`` words nearest to it (here
  by graph distance, breadth first in the lists' order: the counter-fitted vectors SAFER ranks by
  are not shipped), and q_w = min over w' in S_w of |T_w & T_w'| / |T_w| (its
  ``calculate_tv_table``). A sample replaces every word that has a set by a uniform draw from it.
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
    sets: dict[str, tuple[str, ...]]  # T_w: its component, or the size words nearest to it
    overlap: dict[str, float]  # q_w

    @classmethod
    def from_neighbours(cls, neighbours: dict[str, list[str]], size: int) -> Substitutions:
        graph: dict[str, dict[str, None]] = {}  # undirected, neighbours in the lists' order
        for w, ns in neighbours.items():
            for v in ns:
                if v != w:
                    graph.setdefault(w, {})[v] = None
                    graph.setdefault(v, {})[w] = None
        component: dict[str, tuple[str, ...]] = {}
        for w in graph:
            if w not in component:
                members = tuple(_breadth_first(graph, w, len(graph)))
                component.update(dict.fromkeys(members, members))
        sets = {w: c if len(c) <= size else tuple(_breadth_first(graph, w, size)) for w, c in component.items()}
        overlap = {}
        for w, t in sets.items():
            if len(component[w]) <= size:
                overlap[w] = 1.0  # every word of the component draws from the same set
            else:
                mine = set(t)
                overlap[w] = min((len(mine & set(sets[v])) / len(mine) for v in neighbours.get(w, ()) if v in sets),
                                 default=1.0)
        return cls(sets, overlap)

    def overlaps(self, text: str) -> list[float]:
        """q_w of every word of ``text`` that has a perturbation set."""
        return [self.overlap[w] for w in text.lower().split() if w in self.sets]

    def sample(self, text: str, rng: random.Random) -> str:
        return " ".join(rng.choice(self.sets[w.lower()]) if w.lower() in self.sets else w for w in text.split())


def _breadth_first(graph: dict[str, dict[str, None]], start: str, limit: int) -> list[str]:
    """Up to ``limit`` words of ``start``'s component, nearest first (``start`` itself first)."""
    order, seen = [start], {start}
    for w in order:
        for v in graph[w]:
            if v not in seen:
                if len(order) == limit:
                    return order
                seen.add(v)
                order.append(v)
    return order


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
