"""The real evaluation files: where each comes from, its licence and its checksum, and
``bench data`` to list, fetch and verify them (docs/data.md).

``sha256`` is the checksum of the copy the committed studies read (their records carry the same
checksums). ``url`` is set only where the official home serves exactly those bytes, pinned to a
commit; the other files are fetched by hand from ``source`` (their official distributions come
in other formats, which the loaders also read). A file from a git repository whose copy here is
the official one under its official name may be checked by its git blob id (``git_blob``,
SHA-1 of the blob) where its SHA-256 is not published.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.store.atomic import _tag, sha256_file

FEVER_SYMM = "https://raw.githubusercontent.com/TalSchuster/FeverSymmetric/fa25d17e73ea0694edc78133ec654b9f32f6db73/"
COUNTER_FITTING = "https://raw.githubusercontent.com/nmrksic/counter-fitting/8cf3cf4db1074f2f80ecf728e6af68347c3b3d02/"
HANS = "https://raw.githubusercontent.com/tommccoy1/hans/7299f6f657089ce06a0f98e7e81f8d0f5b7741ce/"


@dataclass(frozen=True)
class DataFile:
    path: str  # in the data folder
    what: str
    licence: str
    source: str  # the official home
    sha256: str = ""
    url: str = ""  # where exactly these bytes are served; "" = by hand from ``source``
    git_blob: str = ""  # the git blob id, where no SHA-256 is known
    instead_of: str = ""  # another file of the list that this one may replace

    def matches(self, path: Path) -> bool:
        if self.sha256:
            return sha256_file(path) == self.sha256
        data = path.read_bytes()
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == self.git_blob


FILES = [
    DataFile("hans/hans_eval.jsonl", "HANS evaluation set (McCoy et al. 2019), JSON lines", "MIT",
             "https://github.com/tommccoy1/hans", "21fa5c558c3645bb8173b65ccc126f05471891e5ecf4853c549f94c19020a56c"),
    DataFile("hans/heuristics_evaluation_set.txt", "HANS evaluation set as distributed (the same 30,000 pairs, "
             "read alike; an alternative to hans_eval.jsonl)", "MIT", "https://github.com/tommccoy1/hans",
             url=HANS + "heuristics_evaluation_set.txt", git_blob="e042af242b19708d9c0256c713e873415c0b58a1",
             instead_of="hans/hans_eval.jsonl"),
    DataFile("hans/hans_train.jsonl", "HANS training set (SRNet's upper bound only)", "MIT",
             "https://github.com/tommccoy1/hans", "4696424a8c1cc04481b494fb299be2e0f1fc47a0ef18ddda9144812e0ef135e2"),
    DataFile("mnli/dev_matched.tsv", "MultiNLI dev-matched (GLUE's TSV)", "MNLI's licence (OANC; CC BY-SA parts)",
             "https://cims.nyu.edu/~sbowman/multinli/", "d4f852835e0a2b57dae7da09c23a1c2031bebe3ffea900642d91833677e18051"),
    DataFile("mnli/dev_matched_hardness.csv", "easy / hard flag per dev-matched example (Gururangan et al. 2018)", "MIT",
             "https://aclanthology.org/N18-2017/", "3b3ae3c69df92ac6b2394be7035d0c8d3046a3feba164dabb7c620d947e6167a"),
    DataFile("paws/wiki_dev.tsv", "PAWS-Wiki labelled final dev", "free use with attribution to Google",
             "https://github.com/google-research-datasets/paws", "70fd05a74d77576035f9a9eff65a850a67782d7d02ad7a185c37127f85f4c515"),
    DataFile("paws/wiki_test.tsv", "PAWS-Wiki labelled final test", "free use with attribution to Google",
             "https://github.com/google-research-datasets/paws", "a4dfaa993492e02982bf6f2cebe7e3903dcb18e591b336517bdb78ddfb2e852d"),
    DataFile("paws/qqp_dev_and_test.tsv", "PAWS-QQP dev and test (made with the PAWS scripts from QQP)",
             "PAWS and Quora terms", "https://github.com/google-research-datasets/paws",
             "f65890ccffd7a6432520c009dd3e5c03a96205c80a8f89b04bb58f44c1f35c8f"),
    DataFile("fever_symmetric/v1_generated.jsonl", "FEVER-Symmetric v0.1 test (Symm1)", "CC BY-SA 3.0",
             "https://github.com/TalSchuster/FeverSymmetric", "83a4aac042192ebc159b4478dc5316f9e25094e41ddc97c3b1cea825ad2943eb",
             FEVER_SYMM + "symmetric_v0.1/fever_symmetric_generated.jsonl"),
    DataFile("fever_symmetric/v1_full.jsonl", "FEVER-Symmetric v0.1 full set", "CC BY-SA 3.0",
             "https://github.com/TalSchuster/FeverSymmetric", "6edf8b5bdc3f2fe470b98e94297ed31200a241c98b0318f905bf324345cf6897",
             FEVER_SYMM + "symmetric_v0.1/fever_symmetric_full.jsonl"),
    DataFile("fever_symmetric/v2_dev.jsonl", "FEVER-Symmetric v0.2 dev (Symm2)", "CC BY-SA 3.0",
             "https://github.com/TalSchuster/FeverSymmetric", "1d43d016da9264de2139cd10edd459ffbeac84f1fd85d60b70ab6ef63d283f81",
             FEVER_SYMM + "symmetric_v0.2/fever_symmetric_dev.jsonl"),
    DataFile("fever_symmetric/v2_test.jsonl", "FEVER-Symmetric v0.2 test (Symm2)", "CC BY-SA 3.0",
             "https://github.com/TalSchuster/FeverSymmetric", "b2ff560615bd3337c858bc5b09256d04f39aaa034aaae2351bb2d6345c110f83",
             FEVER_SYMM + "symmetric_v0.2/fever_symmetric_test.jsonl"),
    DataFile("sst2/train.tsv", "GLUE SST-2 train, 90 % of it (the rest is dev.tsv)", "public",
             "https://gluebenchmark.com/tasks", "920e317b2c52e12cd22db1da2c6708312bd7dc4f3712b9bbf1b50ee6c2c792ba"),
    DataFile("sst2/dev.tsv", "GLUE SST-2 train, the other 10 % (model selection)", "public",
             "https://gluebenchmark.com/tasks", "92353770071a2a889f75d000a38a9e541ea8f0a5499e50f040b17917a5cbf66f"),
    DataFile("sst2/test.tsv", "GLUE SST-2 dev, the usual attack set", "public",
             "https://gluebenchmark.com/tasks", "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0"),
    DataFile("agnews/test.tsv", "AG News test (description, class name)", "academic use",
             "http://groups.di.unipi.it/~gulli/AG_corpus_of_news_articles.html",
             "e4217edd939f618f24a42b0988c56ec3cddf656d8dc279b9afa443dd1ab6a1c1"),
    DataFile("wordsub/counterfitted_neighbors.json", "nearest neighbours in the counter-fitted word vectors "
             "(Mrksic et al. 2016), for synonym swaps", "MIT", "https://github.com/nmrksic/counter-fitting",
             "103247143f39bd5dd66850f3a912393392641dbd98093c61e2b24a4cc8a96fb0"),
    *[DataFile(f"wordsub/counterfitting_{name}.txt", f"counter-fitting {name.replace('_', ' ')} list", "Apache-2.0",
               "https://github.com/nmrksic/counter-fitting", digest, COUNTER_FITTING + f"linguistic_constraints/{name}.txt")
      for name, digest in (("ppdb_antonyms", "da985c7cd92237a9a906cde1dc8f13e928d159c62d0b8059dfa04e2b45e6485a"),
                           ("ppdb_synonyms", "a294657ae78b443d2d3676bdbbe3c1c9f3f43f21a8ef2548bfbd00e20462b288"),
                           ("vocabulary", "d29df1d9e1848dbecbef505d69e59f39163fbb23f9609ca54e0d345f0270d81a"),
                           ("wordnet_antonyms", "3cfa6341d8de0f3bd06c84d0a283888fe307cbc6ebda6ec0b1bcbfe6b463c2c1"))],
    DataFile("wordsub/wordnet30_lexnames.txt", "WordNet 3.0's lexnames file, which NLTK's reader needs",
             "WordNet licence", "https://wordnet.princeton.edu/",
             "c871b6797d2109f563f7a162b64e8ebf18f6f42d00918572846034c7f393a214"),
]


def chosen(names: list[str], files: list[DataFile] | None = None) -> list[DataFile]:
    """The files named (a path or its folder, ``fever_symmetric``), every file for none."""
    files = FILES if files is None else files
    if not names:
        return list(files)
    out = [f for f in files if any(f.path == n or f.path.startswith(n.rstrip("/") + "/") for n in names)]
    unknown = [n for n in names if not any(f.path == n or f.path.startswith(n.rstrip("/") + "/") for f in files)]
    if unknown:
        from bench.registry import did_you_mean

        folders = sorted({f.path.split("/")[0] for f in files})
        raise BenchError(f"no data file or folder '{unknown[0]}'{did_you_mean(unknown[0], folders)}")
    return out


def status(f: DataFile, folder: Path) -> str:
    """'ok', 'missing', 'differs' (not the bytes listed) or 'unneeded' (what it may replace is here)."""
    path = folder / f.path
    if not path.is_file():
        return "unneeded" if f.instead_of and (folder / f.instead_of).is_file() else "missing"
    return "ok" if f.matches(path) else "differs"


def fetch(files: list[DataFile], folder: Path, mirror: str = "", log=print) -> list[str]:
    """Download each file that has a URL (from ``mirror``, the data folder's layout under one
    address, when given), check it, and put it in ``folder``; returns one line per problem. A
    file is written under a temporary name and renamed only once its checksum matches, so a
    broken download leaves nothing behind. A file without a URL is named with where to get it
    (not a problem: no download can give it). When a host cannot be reached (offline), its other
    files are not tried: one line says what to run on a connected machine."""
    problems, unreachable = [], {}
    for f in files:
        target = folder / f.path
        if status(f, folder) in ("ok", "unneeded"):
            log(f"{f.path}: already here")
            continue
        url = mirror.rstrip("/") + "/" + f.path if mirror else f.url
        if not url:
            log(f"{f.path}: get it by hand from {f.source} (its official distribution is another file)")
            continue
        host = urllib.parse.urlsplit(url).netloc
        if host in unreachable:
            unreachable[host][1].append(f.path)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f"{_tag(target.name)}download.tmp"
        try:
            with urllib.request.urlopen(url, timeout=60) as response, open(tmp, "wb") as out:  # noqa: S310 (https or a mirror)
                while block := response.read(1 << 20):
                    out.write(block)
            if not f.matches(tmp):
                problems.append(f"{f.path}: what {url} served does not match its checksum; refused")
                continue
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
            log(f"{f.path}: fetched and verified")
        except urllib.error.HTTPError as e:
            problems.append(f"{f.path}: {url} answered {e.code} {e.reason}")
        except (urllib.error.URLError, OSError) as e:
            unreachable[host] = (getattr(e, "reason", None) or getattr(e, "strerror", None) or e, [f.path])
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    for host, (reason, paths) in unreachable.items():
        problems.append(f"cannot reach {host} ({reason}): {len(paths)} files not fetched; on a connected machine run "
                        f"'bench data fetch {' '.join(paths)} --dir DIR' and copy DIR here")
    return problems
