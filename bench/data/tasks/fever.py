"""FEVER (claim verification) with FEVER-Symmetric v1 and v2 as OOD sets (Schuster et al. 2019).

Pairs are (evidence, claim); the bias model sees the claim only.
"""

from __future__ import annotations

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
from bench.registry import TASKS

LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
LABEL_MAP = {name: i for i, name in enumerate(LABELS)}
EVIDENCE, CLAIM, GOLD = ("evidence", "evidence_sentence", "sentence1"), ("claim", "sentence2"), ("gold_label", "label")
FEVER_HUB = HubSpec("pietrolesci/nli_fever", None, "main",
                    "fever/fever.train.jsonl and fever/fever.dev.jsonl (claim, evidence, gold_label)")


def _read_symm(path: Path) -> list[Example]:
    return to_examples(read_rows(path), path, EVIDENCE, CLAIM, GOLD, {"SUPPORTS": 0, "REFUTES": 1}, uid=("id",))


def load_symm(data_dir: Path | None, version: str) -> EvalSet:
    names = ["fever_symmetric/v1_generated.jsonl", "fever_symmetric_generated.jsonl"] if version == "v1" else [
        "fever_symmetric/v2_test.jsonl", "fever_symmetric_test.jsonl"]
    path = find_file(data_dir, names, f"FEVER-Symmetric {version}")

    def read() -> tuple[list[Example], DataSource]:
        ex = _read_symm(path)
        return ex, local_source([path], f"FEVER-Symmetric {version} ({len(ex)})")

    return EvalSet(name=f"symm_{version}", labels=("SUPPORTS", "REFUTES"), collapse=(0, 1, 2),
                   metric="accuracy", pool="fever_symm", loader=read)


SYMM_DEV_REPEAT = 10  # Liu et al. (2022) repeat the small Symm v2 dev set ten times


def symm_dev_loader(data_dir: Path | None):
    """FEVER-Symmetric v2 *dev* repeated 10 times: the OOD information for FEVER (v2 test and
    v1 stay unseen)."""

    def read() -> tuple[list[Example], DataSource]:
        path = find_file(data_dir, ["fever_symmetric/v2_dev.jsonl", "fever_symmetric_dev.jsonl"],
                         "FEVER-Symmetric v2 dev (OOD information)")
        ex = _read_symm(path)
        copies = [replace(e, uid=f"{e.uid}#{k}") for k in range(SYMM_DEV_REPEAT) for e in ex]
        return copies, local_source([path], f"FEVER-Symmetric v2 dev ({len(ex)}) x {SYMM_DEV_REPEAT}")

    return read


@TASKS.register("fever")
class Fever(Task):
    name = "fever"
    labels = LABELS
    description = "FEVER NLI-style train / dev (local jsonl or hub) -> FEVER-Symm v1, v2; GPU scale"
    # approximate (the NLI-style release of Schuster et al. 2019), for sweep estimates only
    sizes = {"train": 231_000, "dev": 12_000, "test": 16_600, "ood/symm_v1": 717, "ood/symm_v2": 712}

    def load(self, data_dir: Path | None) -> TaskData:
        def local():
            tr = find_file(data_dir, ["fever/fever.train.jsonl", "fever/train.jsonl", "nli.train.jsonl"], "FEVER train")
            te = find_file(data_dir, ["fever/fever.dev.jsonl", "fever/dev.jsonl", "nli.dev.jsonl"], "FEVER dev")
            return (to_examples(read_rows(tr), tr, EVIDENCE, CLAIM, GOLD, LABEL_MAP),
                    to_examples(read_rows(te), te, EVIDENCE, CLAIM, GOLD, LABEL_MAP),
                    local_source([tr, te], "FEVER train + dev (local)"))

        train_all, test, src = local_or_hub(local, FEVER_HUB, ("train", "dev"), ("premise", "hypothesis", "label"), LABEL_MAP)
        train, dev, _ = split_seeded(train_all, (len(train_all) // 20, 0), 13)
        return TaskData(
            name=self.name, labels=LABELS, pair=True, id_metric="accuracy", max_length=128, bias_features="claim",
            train=train, dev=dev, test=test, ood={"symm_v1": load_symm(data_dir, "v1"), "symm_v2": load_symm(data_dir, "v2")},
            sources=[src], ood_train=symm_dev_loader(data_dir),
        )
