"""Single-sentence classification tasks for the adversarial suite: SST-2, AG News, IMDB and an
embedded synthetic sentiment task.

Local files follow docs/data.md: SST-2 ``sst2/{train,dev,test}.tsv``
(header ``sentence  label``; ``test.tsv`` is GLUE dev, the usual attack set since GLUE test
labels are hidden) and AG News ``agnews/test.tsv`` (no header: description, class name). Only
the AG News *test* set is available offline, so ``agnews`` splits it with a fixed seed into
train / dev / test (documented in the record); with the official ``train.csv`` beside it the
real training set is used instead. IMDB comes from the hub (or ``imdb/{train,test}.tsv``).
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from bench.data.examples import (
    DataSource,
    Example,
    TaskData,
    find_file,
    local_source,
    read_rows,
    split_seeded,
    to_examples,
)
from bench.data.hub import HubSpec, local_or_hub
from bench.data.tasks import Task
from bench.data.tasks.synthetic import digest
from bench.errors import BenchError, MissingData
from bench.registry import TASKS

SST2_LABELS = ("negative", "positive")
AG_LABELS = ("World", "Sports", "Business", "Sci/Tech")
SPLIT_SEED = 13


def _single(rows, path, text, label, label_map, uid=None) -> list[Example]:
    return to_examples(rows, path, text, None, label, label_map, uid=uid)


@TASKS.register("sst2")
class SST2(Task):
    name = "sst2"
    labels = SST2_LABELS
    description = "SST-2 (local sst2/ of the data folder: train 60,614 / dev 6,735 / test = GLUE dev 872); cap with --max-examples"
    sizes = {"train": 60_614, "dev": 6_735, "test": 872}

    def load(self, data_dir: Path | None) -> TaskData:
        paths = [find_file(data_dir, [f"sst2/{s}.tsv", f"SST-2/{s}.tsv"], f"SST-2 {s}") for s in ("train", "dev", "test")]
        train, dev, test = (_single(read_rows(p), p, ("sentence",), ("label",), {"0": 0, "1": 1}) for p in paths)
        src = local_source(paths, f"SST-2 local: train {len(train)} / dev {len(dev)} / test {len(test)}")
        return TaskData(name=self.name, labels=SST2_LABELS, pair=False, id_metric="accuracy", max_length=64,
                        bias_features="none", train=train, dev=dev, test=test, ood={}, sources=[src], note=src.detail)


def read_agnews(path: Path) -> list[Example]:
    """AG News as distributed (csv: class index 1-4, title, description) or as in
    in the layout of docs/data.md (tsv without header: description, class name)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            if path.suffix == ".csv":
                rows = [{"text": f"{r[1]} {r[2]}".strip(), "label": AG_LABELS[int(r[0]) - 1]} for r in csv.reader(f) if r]
            else:
                rows = [dict(zip(("text", "label"), ln.rstrip("\r\n").split("\t"), strict=False)) for ln in f if ln.strip()]
    except (ValueError, IndexError) as e:
        raise BenchError(f"{path}: not an AG News file ({e})") from e
    return _single(rows, path, ("text",), ("label",), {name: i for i, name in enumerate(AG_LABELS)})


@TASKS.register("agnews")
class AGNews(Task):
    name = "agnews"
    labels = AG_LABELS
    description = "AG News 4 classes; offline only its test set, split (seed 13) into train 5,600 / dev 500 / test 1,500"

    sizes = {"train": 114_000, "dev": 6_000, "test": 7_600}  # with the official train.csv

    def load(self, data_dir: Path | None) -> TaskData:
        test_path = find_file(data_dir, ["agnews/test.tsv", "ag_news_csv/test.csv", "agnews/test.csv"], "AG News test")
        try:
            train_path = find_file(data_dir, ["ag_news_csv/train.csv", "agnews/train.csv"], "AG News train")
        except MissingData:
            train_path = None
        if train_path is None:
            train, dev, test = split_seeded(read_agnews(test_path), (500, 1500), SPLIT_SEED)
            src = local_source([test_path], f"AG News test set split with seed {SPLIT_SEED}: "
                                            f"train {len(train)} / dev {len(dev)} / test {len(test)}")
        else:
            full = read_agnews(train_path)
            train, dev, _ = split_seeded(full, (len(full) // 20, 0), SPLIT_SEED)
            test = read_agnews(test_path)
            src = local_source([train_path, test_path], "AG News train (5% held out as dev) + test")
        return TaskData(name=self.name, labels=AG_LABELS, pair=False, id_metric="accuracy", max_length=128,
                        bias_features="none", train=train, dev=dev, test=test, ood={}, sources=[src], note=src.detail)


IMDB_HUB = HubSpec("stanfordnlp/imdb", "plain_text", "main", "imdb/train.tsv and imdb/test.tsv (sentence, label)")


@TASKS.register("imdb")
class IMDB(Task):
    name = "imdb"
    labels = SST2_LABELS
    description = "IMDB reviews (hub stanfordnlp/imdb, or local imdb/{train,test}.tsv); GPU scale"
    sizes = {"train": 23_750, "dev": 1_250, "test": 25_000}

    def load(self, data_dir: Path | None) -> TaskData:
        def local():
            paths = [find_file(data_dir, [f"imdb/{s}.tsv"], f"IMDB {s}") for s in ("train", "test")]
            tr, te = (_single(read_rows(p), p, ("sentence", "text"), ("label",), {"0": 0, "1": 1}) for p in paths)
            return tr, te, local_source(paths, "IMDB (local)")

        train_all, test, src = local_or_hub(local, IMDB_HUB, ("train", "test"), ("text", "text", "label"),
                                          {"neg": 0, "pos": 1})
        train, dev, _ = split_seeded(train_all, (len(train_all) // 20, 0), SPLIT_SEED)
        return TaskData(name=self.name, labels=SST2_LABELS, pair=False, id_metric="accuracy", max_length=256,
                        bias_features="none", train=train, dev=dev, test=test, ood={}, sources=[src])


# --- embedded synthetic sentiment ---------------------------------------------------------------
# Short reviews whose sentiment words all have counter-fitted synonyms, so word-substitution
# attacks have something to work with; negation flips a clause, and mixed reviews are decided
# by their last clause ("but ..."), so a bag of words is not enough.
POS = "good great wonderful excellent superb brilliant delightful charming enjoyable fantastic".split()
NEG = "bad terrible awful boring dreadful horrible dull poor weak disappointing".split()
THINGS = "movie film story acting music script ending cast plot direction".split()
INTENS = ["", "", "really ", "truly ", "very ", "quite "]
SYNTH_SIZES = {"train": 2000, "dev": 300, "test": 500}
SYNTH_VERSION = 1


def _clause(r: random.Random, positive: bool) -> str:
    thing = r.choice(THINGS)
    if r.random() < 0.25:  # negated opposite word
        return f"the {thing} was not {r.choice(NEG if positive else POS)}"
    return f"the {thing} was {r.choice(INTENS)}{r.choice(POS if positive else NEG)}"


def _review(r: random.Random) -> tuple[str, int]:
    label = r.randrange(2)
    if r.random() < 0.3:  # mixed: the clause after "but" decides
        return f"{_clause(r, not label)} but {_clause(r, bool(label))}", label
    return " and ".join(_clause(r, bool(label)) for _ in range(r.choice([1, 2]))), label


def generate_sentiment(seed: int = 0) -> dict[str, list[Example]]:
    r = random.Random(seed)
    out = {}
    for split, n in SYNTH_SIZES.items():
        out[split] = [Example(f"sent-{split}-{i}", *_pair(r)) for i in range(n)]
    return out


def _pair(r: random.Random) -> tuple[str, None, int]:
    text, label = _review(r)
    return text, None, label


@TASKS.register("sent_synth")
class SyntheticSentiment(Task):
    name = "sent_synth"
    labels = SST2_LABELS
    description = "embedded synthetic sentiment (2,000 / 300 / 500 short reviews; negation and 'but' clauses)"

    def load(self, data_dir: Path | None) -> TaskData:
        d = generate_sentiment(0)
        detail = f"synthetic sentiment generator v{SYNTH_VERSION}, seed 0"
        src = DataSource("synthetic", detail, {"sent_synth/all": digest(d["train"] + d["dev"] + d["test"])})
        return TaskData(name=self.name, labels=SST2_LABELS, pair=False, id_metric="accuracy", max_length=48,
                        bias_features="none", train=d["train"], dev=d["dev"], test=d["test"], ood={},
                        sources=[src], note=detail)
