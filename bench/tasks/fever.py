"""FEVER (claim verification) with FEVER-Symmetric v1 and v2 as OOD sets (Schuster et al. 2019).

Pairs are (evidence, claim); the bias model sees the claim only.
"""

from __future__ import annotations

from pathlib import Path

from bench.data import (
    EvalSet,
    TaskData,
    find_file,
    local_source,
    read_rows,
    split_seeded,
    to_examples,
)
from bench.hub import HubSpec, local_or_hub
from bench.registry import TASKS
from bench.tasks import Task

LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
LABEL_MAP = {name: i for i, name in enumerate(LABELS)}
EVIDENCE, CLAIM, GOLD = ("evidence", "evidence_sentence", "sentence1"), ("claim", "sentence2"), ("gold_label", "label")
FEVER_HUB = HubSpec("pietrolesci/nli_fever", None, "main", "fever/fever.train.jsonl and fever/fever.dev.jsonl (claim, evidence, gold_label)")


def load_symm(data_dir: Path | None, version: str) -> EvalSet:
    names = ["fever_symmetric/v1_generated.jsonl", "fever_symmetric_generated.jsonl"] if version == "v1" else [
        "fever_symmetric/v2_test.jsonl", "fever_symmetric_test.jsonl"]
    path = find_file(data_dir, names, f"FEVER-Symmetric {version}")
    ex = to_examples(read_rows(path), path, EVIDENCE, CLAIM, GOLD, {"SUPPORTS": 0, "REFUTES": 1}, uid=("id",))
    return EvalSet(
        name=f"symm_{version}", examples=ex, labels=("SUPPORTS", "REFUTES"), collapse=(0, 1, 2),
        metric="accuracy", pool="fever_symm", source=local_source([path], f"FEVER-Symmetric {version} ({len(ex)})"),
    )


@TASKS.register("fever")
class Fever(Task):
    name = "fever"
    description = "FEVER NLI-style train / dev (local jsonl or hub) -> FEVER-Symm v1, v2; GPU scale"

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
            sources=[src],
        )
