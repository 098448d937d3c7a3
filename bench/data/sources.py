"""The real evaluation files: where each comes from, its licence and its checksum, and what
``bench data`` lists, fetches and verifies (docs/data.md; the fetching is ``bench.data.fetch``).

``sha256`` is the checksum of the copy the committed studies read (their records carry the same
checksums). ``origin`` is the file's official distribution, pinned: a plain file or a zip /
tar.gz archive with the checksum of what its address serves (published where ``cited`` says,
or computed from the repository commit the address names), the member to take and how to turn
it into the layout's bytes. Where the studies read a derived copy that no conversion of the
official file reproduces byte for byte (HANS's jsonl, MNLI's dev-matched TSV), the official
file itself is kept under ``official``, a name the loaders read as well, and the records made
from it carry its checksum instead.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from bench.errors import BenchError
from bench.store.atomic import sha256_file


def git_blob_id(data: bytes) -> str:
    """Git's blob id (SHA-1 of ``blob <size>\\0`` and the bytes): what a repository pins where
    no SHA-256 is published."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class Origin:
    """An official distribution of a file: what ``url`` serves, pinned by ``sha256`` (or by
    ``git_blob`` for a file of a git repository; neither: the file's own checksum after
    conversion pins it), ``member`` of a zip or tar.gz archive ("" = the file served), and
    ``convert``, a name in ``bench.data.fetch.CONVERTERS`` ("" = no conversion reproduces the
    studies' copy: the member is kept under the file's ``official`` name)."""

    url: str
    sha256: str = ""
    git_blob: str = ""
    size: int = 0  # bytes served, for ``bench data fetch --plan``
    member: str = ""
    convert: str = "copy"
    cited: str = ""  # where the checksum of what ``url`` serves is published


@dataclass(frozen=True)
class DataFile:
    path: str  # in the data folder
    what: str
    licence: str
    source: str  # the official home
    sha256: str = ""  # of the studies' copy; "" = not pinned (an official file no study read)
    origin: Origin | None = None
    official: str = ""  # where the origin's member goes when no conversion reproduces ``sha256``

    def matches(self, path: Path) -> bool:
        return not self.sha256 or sha256_file(path) == self.sha256


FEVER_SYMM = "https://raw.githubusercontent.com/TalSchuster/FeverSymmetric/fa25d17e73ea0694edc78133ec654b9f32f6db73/"
COUNTER_FITTING = "https://raw.githubusercontent.com/nmrksic/counter-fitting/8cf3cf4db1074f2f80ecf728e6af68347c3b3d02/"
HANS = "https://raw.githubusercontent.com/tommccoy1/hans/7299f6f657089ce06a0f98e7e81f8d0f5b7741ce/"
HARDNESS = "https://raw.githubusercontent.com/m43/focal-loss-against-heuristics/0381b4b2e7c83883db69a65683fe906892d00127/"
AG_NEWS = "https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/555590db4219b1243abb1918effd6a7425a2d75f/"
TFDS = "TensorFlow Datasets' url_checksums/{}.txt"
GLUE_MNLI = Origin("https://dl.fbaipublicfiles.com/glue/data/MNLI.zip",
                   "e7c1d896d26ed6caf700110645df426cc2d8ebf02a5ab743d5a5c68ac1c83633", size=312_783_507,
                   cited=TFDS.format("glue"))
GLUE_SST2 = Origin("https://dl.fbaipublicfiles.com/glue/data/SST-2.zip",
                   "d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa", size=7_439_277,
                   cited=TFDS.format("glue"))
PAWS_WIKI = Origin("https://storage.googleapis.com/paws/english/paws_wiki_labeled_final.tar.gz",
                   "5b132e9b0a070b4413736337da8513b2e798e1beae1cbcc7a544a7cab5322ebc", size=4_687_157,
                   cited=TFDS.format("paws_wiki"))
NLI = "MNLI's licence (OANC; CC BY-SA parts)"
PAWS = "free use with attribution to Google"


def _member(origin: Origin, member: str, convert: str = "copy") -> Origin:
    return replace(origin, member=member, convert=convert)


FILES = [
    DataFile("hans/hans_eval.jsonl", "HANS evaluation set (McCoy et al. 2019); a derived copy, as distributed: "
             "heuristics_evaluation_set.txt (the same 30,000 pairs)", "MIT", "https://github.com/tommccoy1/hans",
             "21fa5c558c3645bb8173b65ccc126f05471891e5ecf4853c549f94c19020a56c",
             Origin(HANS + "heuristics_evaluation_set.txt", git_blob="e042af242b19708d9c0256c713e873415c0b58a1",
                    convert=""), official="hans/heuristics_evaluation_set.txt"),
    DataFile("hans/hans_train.jsonl", "HANS training set (SRNet's upper bound only); a derived copy, as "
             "distributed: heuristics_train_set.txt", "MIT", "https://github.com/tommccoy1/hans",
             "4696424a8c1cc04481b494fb299be2e0f1fc47a0ef18ddda9144812e0ef135e2",
             Origin(HANS + "heuristics_train_set.txt", git_blob="d7742467d217a174d2c342596b72d3120701f38a",
                    convert=""), official="hans/heuristics_train_set.txt"),
    DataFile("mnli/dev_matched.tsv", "MultiNLI dev-matched; a derived 5-column copy, as distributed: GLUE's "
             "MNLI/dev_matched.tsv (the same 9,815 pairs in the same order)", NLI,
             "https://gluebenchmark.com/tasks", "d4f852835e0a2b57dae7da09c23a1c2031bebe3ffea900642d91833677e18051",
             _member(GLUE_MNLI, "MNLI/dev_matched.tsv", convert=""), official="MNLI/dev_matched.tsv"),
    DataFile("MNLI/train.tsv", "MultiNLI train (392,702 pairs; the mnli_full task), as in GLUE's archive", NLI,
             "https://gluebenchmark.com/tasks", origin=_member(GLUE_MNLI, "MNLI/train.tsv")),
    DataFile("mnli/dev_matched_hardness.csv", "easy / hard flag per dev-matched example (Gururangan et al. 2018's "
             "hard subset, matched to GLUE's rows in the focal-loss-against-heuristics repository)", "MIT",
             "https://github.com/m43/focal-loss-against-heuristics",
             "3b3ae3c69df92ac6b2394be7035d0c8d3046a3feba164dabb7c620d947e6167a",
             Origin(HARDNESS + "data/mnli_validation_matched_hardness.csv", size=138_703)),
    DataFile("paws/wiki_dev.tsv", "PAWS-Wiki labelled final dev", PAWS,
             "https://github.com/google-research-datasets/paws",
             "70fd05a74d77576035f9a9eff65a850a67782d7d02ad7a185c37127f85f4c515",
             _member(PAWS_WIKI, "final/dev.tsv", "drop_header"), official="paws_wiki/final/dev.tsv"),
    DataFile("paws/wiki_test.tsv", "PAWS-Wiki labelled final test", PAWS,
             "https://github.com/google-research-datasets/paws",
             "a4dfaa993492e02982bf6f2cebe7e3903dcb18e591b336517bdb78ddfb2e852d",
             _member(PAWS_WIKI, "final/test.tsv", "drop_header"), official="paws_wiki/final/test.tsv"),
    DataFile("paws_wiki/final/train.tsv", "PAWS-Wiki labelled final train (OOD information of the QQP upper bound)",
             PAWS, "https://github.com/google-research-datasets/paws", origin=_member(PAWS_WIKI, "final/train.tsv")),
    DataFile("paws/qqp_dev_and_test.tsv", "PAWS-QQP dev and test (made by PAWS's qqp_generate_data.py from QQP; "
             "no archive holds it)", "PAWS and Quora terms", "https://github.com/google-research-datasets/paws",
             "f65890ccffd7a6432520c009dd3e5c03a96205c80a8f89b04bb58f44c1f35c8f"),
    DataFile("fever_symmetric/v1_generated.jsonl", "FEVER-Symmetric v0.1 test (Symm1)", "CC BY-SA 3.0",
             "https://github.com/TalSchuster/FeverSymmetric", "83a4aac042192ebc159b4478dc5316f9e25094e41ddc97c3b1cea825ad2943eb",
             Origin(FEVER_SYMM + "symmetric_v0.1/fever_symmetric_generated.jsonl", size=195_411)),
    DataFile("fever_symmetric/v1_full.jsonl", "FEVER-Symmetric v0.1 full set", "CC BY-SA 3.0",
             "https://github.com/TalSchuster/FeverSymmetric", "6edf8b5bdc3f2fe470b98e94297ed31200a241c98b0318f905bf324345cf6897",
             Origin(FEVER_SYMM + "symmetric_v0.1/fever_symmetric_full.jsonl", size=262_583)),
    DataFile("fever_symmetric/v2_dev.jsonl", "FEVER-Symmetric v0.2 dev (Symm2)", "CC BY-SA 3.0",
             "https://github.com/TalSchuster/FeverSymmetric", "1d43d016da9264de2139cd10edd459ffbeac84f1fd85d60b70ab6ef63d283f81",
             Origin(FEVER_SYMM + "symmetric_v0.2/fever_symmetric_dev.jsonl", size=466_743)),
    DataFile("fever_symmetric/v2_test.jsonl", "FEVER-Symmetric v0.2 test (Symm2)", "CC BY-SA 3.0",
             "https://github.com/TalSchuster/FeverSymmetric", "b2ff560615bd3337c858bc5b09256d04f39aaa034aaae2351bb2d6345c110f83",
             Origin(FEVER_SYMM + "symmetric_v0.2/fever_symmetric_test.jsonl", size=485_280)),
    DataFile("sst2/train.tsv", "GLUE SST-2 train, 90 % of it (the rest is dev.tsv; the rows of each, in order, "
             "are listed in bench/data/splits)", "public", "https://gluebenchmark.com/tasks",
             "920e317b2c52e12cd22db1da2c6708312bd7dc4f3712b9bbf1b50ee6c2c792ba",
             _member(GLUE_SST2, "SST-2/train.tsv", "sst2_train")),
    DataFile("sst2/dev.tsv", "GLUE SST-2 train, the other 10 % (model selection)", "public",
             "https://gluebenchmark.com/tasks", "92353770071a2a889f75d000a38a9e541ea8f0a5499e50f040b17917a5cbf66f",
             _member(GLUE_SST2, "SST-2/train.tsv", "sst2_dev")),
    DataFile("sst2/test.tsv", "GLUE SST-2 dev, the usual attack set (GLUE's test labels are hidden)", "public",
             "https://gluebenchmark.com/tasks", "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
             _member(GLUE_SST2, "SST-2/dev.tsv")),
    DataFile("agnews/test.tsv", "AG News test (Zhang et al. 2015's ag_news_csv/test.csv: description, class name)",
             "academic use", "http://groups.di.unipi.it/~gulli/AG_corpus_of_news_articles.html",
             "e4217edd939f618f24a42b0988c56ec3cddf656d8dc279b9afa443dd1ab6a1c1",
             Origin(AG_NEWS + "data/ag_news_csv/test.csv",
                    "521465c2428ed7f02f8d6db6ffdd4b5447c1c701962353eb2c40d548c3c85699", size=1_857_427,
                    convert="agnews_tsv")),
    DataFile("wordsub/counterfitted_neighbors.json", "nearest neighbours in the counter-fitted word vectors "
             "(Mrksic et al. 2016), for synonym swaps; a derived copy whose making is not recorded", "MIT",
             "https://github.com/nmrksic/counter-fitting",
             "103247143f39bd5dd66850f3a912393392641dbd98093c61e2b24a4cc8a96fb0"),
    *[DataFile(f"wordsub/counterfitting_{name}.txt", f"counter-fitting {name.replace('_', ' ')} list", "Apache-2.0",
               "https://github.com/nmrksic/counter-fitting", digest,
               Origin(COUNTER_FITTING + f"linguistic_constraints/{name}.txt", size=size))
      for name, digest, size in (
          ("ppdb_antonyms", "da985c7cd92237a9a906cde1dc8f13e928d159c62d0b8059dfa04e2b45e6485a", 9_730),
          ("ppdb_synonyms", "a294657ae78b443d2d3676bdbbe3c1c9f3f43f21a8ef2548bfbd00e20462b288", 959_787),
          ("vocabulary", "d29df1d9e1848dbecbef505d69e59f39163fbb23f9609ca54e0d345f0270d81a", 614_400),
          ("wordnet_antonyms", "3cfa6341d8de0f3bd06c84d0a283888fe307cbc6ebda6ec0b1bcbfe6b463c2c1", 206_668))],
    DataFile("wordsub/wordnet30_lexnames.txt", "WordNet 3.0's lexnames file, which NLTK's reader needs",
             "WordNet licence", "https://wordnet.princeton.edu/",
             "c871b6797d2109f563f7a162b64e8ebf18f6f42d00918572846034c7f393a214"),
]


def chosen(names: list[str], files: list[DataFile] | None = None) -> list[DataFile]:
    """The files named (a path or its folder, ``fever_symmetric``; an official name such as
    ``MNLI`` names the files it stands for), every file for none."""
    files = FILES if files is None else files
    if not names:
        return list(files)

    def named(f: DataFile, n: str) -> bool:
        return any(p == n or p.startswith(n.rstrip("/") + "/") for p in (f.path, f.official) if p)

    unknown = [n for n in names if not any(named(f, n) for f in files)]
    if unknown:
        from bench.registry import did_you_mean

        folders = sorted({f.path.split("/")[0] for f in files})
        raise BenchError(f"no data file or folder '{unknown[0]}'{did_you_mean(unknown[0], folders)}")
    return [f for f in files if any(named(f, n) for n in names)]


def status(f: DataFile, folder: Path) -> str:
    """'ok' (the listed bytes; or present where no checksum is listed), 'official' (the official
    file is here instead of the derived copy), 'differs' or 'missing'."""
    path = folder / f.path
    if path.is_file():
        return "ok" if f.matches(path) else "differs"
    return "official" if f.official and (folder / f.official).is_file() else "missing"
