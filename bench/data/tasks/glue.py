"""MNLI (OOD: HANS) and QQP (OOD: PAWS-QQP, PAWS-Wiki), from local files or the hub.

Local formats: the layout of docs/data.md and the official distributions
(GLUE TSVs, MultiNLI jsonl, HANS ``heuristics_evaluation_set.txt``, PAWS ``final/*.tsv``).
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

from bench.data.examples import (
    DataSource,
    EvalSet,
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
from bench.errors import BenchError
from bench.registry import TASKS

NLI_LABELS = ("entailment", "neutral", "contradiction")
NLI_MAP = {name: i for i, name in enumerate(NLI_LABELS)}
PREMISE, HYPOTHESIS, GOLD = ("premise", "sentence1"), ("hypothesis", "sentence2"), ("gold_label", "label")

# The split of MNLI dev-matched used when no MNLI training set is available (docs/design.md section 6).
MNLI_SPLIT_SEED = 13
MNLI_SPLIT_SIZES = (500, 1000)  # dev, test; the remaining 8,315 train

MNLI_HUB = HubSpec("nyu-mll/glue", "mnli", "main", "mnli/train.tsv (GLUE) or multinli_1.0_train.jsonl")
QQP_HUB = HubSpec("nyu-mll/glue", "qqp", "main", "qqp/train.tsv and qqp/dev.tsv (GLUE format)")
HANS_ID = "hans"


def load_hans(data_dir: Path | None) -> EvalSet:
    """HANS evaluation set, 3-way predictions collapsed to entailment / non-entailment; each
    pair's cluster is the template it was generated from (``read_hans``).

    Only the file's presence is checked here; it is read when the set is first evaluated."""
    path = find_file(
        data_dir,
        ["hans/hans_eval.jsonl", "hans/heuristics_evaluation_set.txt", "heuristics_evaluation_set.txt"],
        "HANS",
    )

    def read() -> tuple[list[Example], DataSource]:
        examples = read_hans(path, {"entailment": 0, "non-entailment": 1})
        return examples, local_source([path], f"HANS evaluation set ({len(examples)} pairs)")

    return EvalSet(name=HANS_ID, labels=("entailment", "non-entailment"), collapse=(0, 1, 1),
                   metric="accuracy", pool=HANS_ID, loader=read, clusters=HANS_CLUSTERS)


HANS_CLUSTERS = ("HANS's templates (McCoy et al. 2019, section 4): subcase/template where the file has the official "
                 "template column; else the subcase (the public jsonl copy's subcase_predicted, 30 subcases of 1,000 "
                 "pairs, which lost the template column: a subcase's templates count as one cluster)")


def read_hans(path: Path, label_map: dict[str, int]) -> list[Example]:
    """HANS pairs, grouped by heuristic, each clustered by its template where the file has the
    official ``template`` column, else by its subcase (the public jsonl copy's
    ``subcase_predicted``): the 1,000 pairs of a subcase come from a handful of templates and are
    answered alike (``bench.store.clusters``)."""
    rows = read_rows(path)
    examples = to_examples(rows, path, ("sentence1",), ("sentence2",), ("gold_label",), label_map,
                           group=("heuristic",))

    def cluster(row: dict) -> str:
        if row.get("template") and row.get("subcase"):
            return f"{row['subcase']}/{row['template']}"
        return str(row.get("subcase") or row.get("subcase_predicted") or "")

    return [replace(e, cluster=cluster(row)) for e, row in zip(examples, rows, strict=True)]


# HANS labels in MNLI's label space for the OOD-information setting: a non-entailed HANS
# hypothesis is not contradicted by its premise (the doctor near the actor danced / the actor
# danced), so non-entailment becomes neutral.
HANS_AS_MNLI = {"entailment": NLI_MAP["entailment"], "non-entailment": NLI_MAP["neutral"]}


def hans_train_loader(data_dir: Path | None):
    """HANS *training* set (never the evaluation set), labelled in MNLI's label space."""

    def read() -> tuple[list[Example], DataSource]:
        path = find_file(data_dir, ["hans/hans_train.jsonl", "hans/heuristics_train_set.txt",
                                    "heuristics_train_set.txt"], "HANS training set (OOD information)")
        examples = read_hans(path, HANS_AS_MNLI)
        return examples, local_source([path], f"HANS training set ({len(examples)} pairs)")

    return read


def read_mnli_file(path: Path) -> list[Example]:
    return to_examples(read_rows(path), path, PREMISE, HYPOTHESIS, GOLD, NLI_MAP, skip_labels=("-",))


def read_csv_rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def with_hardness(examples: list[Example], path: Path) -> list[Example]:
    """Each dev-matched example's group set to 'hard' or 'easy' from the hardness csv (idx = row)."""
    rows = read_csv_rows(path)
    try:
        flags = {int(r["idx"]): r["hardness"].strip() == "1" for r in rows}
    except (KeyError, ValueError) as e:
        raise BenchError(f"{path}: expected columns idx, pairID, hardness ({e})") from e
    out = []
    for ex in examples:
        i = int(ex.uid.rsplit("-", 1)[1])
        if i not in flags:
            raise BenchError(f"{path}: no hardness flag for row {i}")
        out.append(replace(ex, group="hard" if flags[i] else "easy"))
    return out


@TASKS.register("mnli")
class MNLIDevSplit(Task):
    """MNLI dev-matched split into train / dev / test (runs on CPU); OOD: HANS."""

    name = "mnli"
    labels = NLI_LABELS
    description = "MNLI dev-matched split 8,315 / 500 / 1,000 (seed 13) -> HANS; local files only"
    sizes = {"train": 8_315, "dev": 500, "test": 1_000, "ood/hans": 30_000}

    def load(self, data_dir: Path | None) -> TaskData:
        path = find_file(data_dir, ["mnli/dev_matched.tsv", "MNLI/dev_matched.tsv", "multinli_1.0_dev_matched.jsonl"], "MNLI dev-matched")
        examples, files = read_mnli_file(path), [path]
        hardness = next((h for h in (path.parent / "dev_matched_hardness.csv", data_dir / "mnli" / "dev_matched_hardness.csv")
                         if h.is_file()), None)  # beside GLUE's MNLI/dev_matched.tsv, or in mnli/ (bench data fetch)
        if hardness:  # hypothesis-only hard / easy flags (Gururangan et al. 2018), same order
            examples = with_hardness(examples, hardness)
            files.append(hardness)
        train, dev, test = split_seeded(examples, MNLI_SPLIT_SIZES, MNLI_SPLIT_SEED)
        hans = load_hans(data_dir)
        src = local_source(files, f"MNLI dev-matched, seeded split (seed {MNLI_SPLIT_SEED}): "
                                  f"train {len(train)} / dev {len(dev)} / test {len(test)}")
        return TaskData(
            name=self.name, labels=NLI_LABELS, pair=True, id_metric="accuracy", max_length=128,
            bias_features="overlap", train=train, dev=dev, test=test, ood={HANS_ID: hans}, sources=[src],
            note=src.detail, ood_train=hans_train_loader(data_dir),
        )


@TASKS.register("mnli_full")
class MNLIFull(Task):
    """Full MNLI training set (local or hub); 5% of train held out as dev; test = dev-matched."""

    name = "mnli_full"
    labels = NLI_LABELS
    description = "MNLI train (5% held out as dev) / dev-matched as test -> HANS; GPU scale"
    sizes = {"train": 373_067, "dev": 19_635, "test": 9_815, "ood/hans": 30_000}  # MNLI 392,702 train

    def load(self, data_dir: Path | None) -> TaskData:
        def local():
            tr = find_file(data_dir, ["mnli/train.tsv", "MNLI/train.tsv", "multinli_1.0_train.jsonl"], "MNLI train")
            te = find_file(data_dir, ["mnli/dev_matched.tsv", "MNLI/dev_matched.tsv", "multinli_1.0_dev_matched.jsonl"], "MNLI dev-matched")
            return read_mnli_file(tr), read_mnli_file(te), local_source([tr, te], "MNLI train + dev-matched (local)")

        train_all, test, src = local_or_hub(local, MNLI_HUB, ("train", "validation_matched"), ("premise", "hypothesis", "label"), NLI_MAP)
        train, dev, _ = split_seeded(train_all, (len(train_all) // 20, 0), MNLI_SPLIT_SEED)
        return TaskData(
            name=self.name, labels=NLI_LABELS, pair=True, id_metric="accuracy", max_length=128,
            bias_features="overlap", train=train, dev=dev, test=test, ood={HANS_ID: load_hans(data_dir)},
            sources=[src], ood_train=hans_train_loader(data_dir),
        )


def _strip_bytes_literal(text: str) -> str:
    """PAWS-QQP copies wrap text as b'...' or b\"...\"."""
    text = text.strip()
    if len(text) >= 3 and text[0] == "b" and text[1] in "'\"" and text[-1] == text[1]:
        return text[2:-1]
    return text


PAWS_FILES = {
    "qqp": ["paws/qqp_dev_and_test.tsv", "paws_qqp/dev_and_test.tsv"],
    "wiki": ["paws/wiki_test.tsv", "paws_wiki/final/test.tsv", "final/test.tsv"],
    "train_qqp": ["paws/qqp_train.tsv", "paws_qqp/train.tsv"],
    "train_wiki": ["paws/wiki_train.tsv", "paws_wiki/final/train.tsv"],
}


def read_paws(path: Path) -> list[Example]:
    with open(path, encoding="utf-8") as f:
        has_header = f.readline().startswith("id\t")
    rows = read_rows(path, None if has_header else ["id", "sentence1", "sentence2", "label"])
    return to_examples(rows, path, ("sentence1",), ("sentence2",), ("label",), {"0": 0, "1": 1},
                       clean=_strip_bytes_literal, uid=("id",))


def load_paws(data_dir: Path | None, which: str) -> EvalSet:
    path = find_file(data_dir, PAWS_FILES[which], f"PAWS-{which}")

    def read() -> tuple[list[Example], DataSource]:
        examples = read_paws(path)
        return examples, local_source([path], f"PAWS-{which} ({len(examples)} pairs)")

    return EvalSet(name=f"paws_{which}", labels=("not_duplicate", "duplicate"), collapse=(0, 1),
                   metric="f1_weighted", pool="paws", loader=read)


def paws_train_loader(data_dir: Path | None):
    """PAWS-QQP's and PAWS-Wiki's training sets together: the OOD information for QQP (SRNet
    section 4.5 mixes in "PAWS train", both of them)."""

    def read() -> tuple[list[Example], DataSource]:
        paths = [find_file(data_dir, PAWS_FILES[k], f"PAWS-{k.removeprefix('train_')} training set (OOD information; "
                           "not in the layout of docs/data.md)") for k in ("train_qqp", "train_wiki")]
        examples = [e for path in paths for e in read_paws(path)]
        return examples, local_source(paths, f"PAWS-QQP + PAWS-Wiki training sets ({len(examples)} pairs)")

    return read


@TASKS.register("qqp")
class QQP(Task):
    """QQP train (5% held out as dev) / GLUE dev as test; OOD: PAWS-QQP and PAWS-Wiki."""

    name = "qqp"
    labels = ("not_duplicate", "duplicate")
    description = "QQP (local GLUE TSVs or hub) -> PAWS-QQP, PAWS-Wiki; GPU scale"
    sizes = {"train": 345_654, "dev": 18_192, "test": 40_430, "ood/paws_qqp": 677, "ood/paws_wiki": 8_000}

    def load(self, data_dir: Path | None) -> TaskData:
        cols = dict(text_a=("question1",), text_b=("question2",), label=("is_duplicate", "label"), label_map={"0": 0, "1": 1})

        def local():
            tr = find_file(data_dir, ["qqp/train.tsv", "QQP/train.tsv"], "QQP train")
            te = find_file(data_dir, ["qqp/dev.tsv", "QQP/dev.tsv"], "QQP dev")
            return (to_examples(read_rows(tr), tr, **cols), to_examples(read_rows(te), te, **cols),
                    local_source([tr, te], "QQP GLUE train + dev (local)"))

        train_all, test, src = local_or_hub(local, QQP_HUB, ("train", "validation"), ("question1", "question2", "label"),
                                          {"not_duplicate": 0, "duplicate": 1})
        train, dev, _ = split_seeded(train_all, (len(train_all) // 20, 0), MNLI_SPLIT_SEED)
        ood = {"paws_qqp": load_paws(data_dir, "qqp"), "paws_wiki": load_paws(data_dir, "wiki")}
        return TaskData(
            name=self.name, labels=("not_duplicate", "duplicate"), pair=True, id_metric="f1_weighted",
            max_length=128, bias_features="overlap", train=train, dev=dev, test=test, ood=ood, sources=[src],
            ood_train=paws_train_loader(data_dir),
        )
