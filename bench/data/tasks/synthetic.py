"""Embedded synthetic NLI task with a planted lexical-overlap shortcut and a HANS-like OOD set.

Why it looks like this (docs/design.md section 6): the shortcut must be imperfect so that a debiasing
loss leaves the main model signal to learn from. In training, a hypothesis whose words all
occur in the premise is entailed ``P_ENTAIL_GIVEN_OVERLAP`` (80 %) of the time; the rest are the
three HANS counter-example types (lexical-overlap swap, subsequence, constituent), each present
in training but rare. Contradiction is marked by antonyms *and* negation, and negation also
occurs in premises of other labels, so no single cue is perfect. The OOD set is built like
HANS (McCoy et al. 2019): three heuristics x {entailment, non-entailment}, every hypothesis fully
covered by its premise, so the shortcut is right on exactly half of it. As HANS differs from
MNLI in vocabulary and constructions, the OOD set uses nouns never seen in training and, for
each heuristic, constructions that training does not contain (``OOD_CELLS``): a model that
learned the rule generalises, one that learned "overlap -> entailment" does not.

Everything is generated from the seed; the record stores a checksum of the generated text.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from bench.data.examples import DataSource, EvalSet, Example, TaskData
from bench.data.tasks import Task
from bench.data.tasks.glue import NLI_LABELS
from bench.data.tasks.nli_templates import OOD_CELLS, TRAIN_MIX, E, Gen, N
from bench.registry import TASKS

GENERATOR_VERSION = 2
SIZES = {"train": 3000, "dev": 500, "test": 1000}
OOD_PER_CELL = 300
def _draw(r: random.Random, mix: list[tuple[Gen, int, float]], n: int, prefix: str) -> list[Example]:
    gens, labels, weights = zip(*mix, strict=True)
    out = []
    for i in range(n):
        k = r.choices(range(len(gens)), weights=weights)[0]
        p, h = gens[k](r)
        out.append(Example(f"{prefix}-{i}", p, h, labels[k], gens[k].__name__))
    return out


def generate(seed: int = 0) -> tuple[list[Example], list[Example], list[Example], list[Example]]:
    """(train, dev, test, ood); ID splits are i.i.d. from TRAIN_MIX, OOD from OOD_CELLS."""
    r = random.Random(seed)
    train, dev, test = (_draw(r, TRAIN_MIX, SIZES[s], f"synth-{s}") for s in ("train", "dev", "test"))
    ood = []
    for (heuristic, gold), gen in OOD_CELLS.items():
        for i in range(OOD_PER_CELL):
            p, h = gen(r)
            ood.append(Example(f"synth-hans-{heuristic}-{gold}-{i}", p, h, gold, heuristic))
    return train, dev, test, ood


def generate_ood_train(seed: int = 1, per_cell: int = 100) -> list[Example]:
    """HANS-like *training* pairs for the OOD-information setting: the OOD cells' constructions
    drawn from another seed (as HANS train is to HANS evaluation), minus any pair that also
    occurs in the OOD test set. Labels are in the task's space: non-entailment -> neutral."""
    test_pairs = {(e.text_a, e.text_b) for e in generate(0)[3]}
    r = random.Random(seed)
    out = []
    for (heuristic, gold), gen in OOD_CELLS.items():
        for i in range(per_cell):
            p, h = gen(r)
            if (p, h) not in test_pairs:
                out.append(Example(f"synth-hans-train-{heuristic}-{gold}-{i}", p, h, E if gold == 0 else N, heuristic))
    return out


def digest(examples: list[Example]) -> str:
    h = hashlib.sha256()
    for ex in examples:
        h.update(f"{ex.uid}\t{ex.text_a}\t{ex.text_b}\t{ex.label}\t{ex.group}\n".encode())
    return h.hexdigest()


DETAIL = f"synthetic generator v{GENERATOR_VERSION}, seed 0"


def _ood_test() -> tuple[list[Example], DataSource]:
    ood = generate(seed=0)[3]
    return ood, DataSource("synthetic", DETAIL, {"nli_synth/hans_synth": digest(ood)})


def _ood_train() -> tuple[list[Example], DataSource]:
    ex = generate_ood_train()
    return ex, DataSource("synthetic", f"{DETAIL}; HANS-like training pairs, seed 1", {"nli_synth/hans_synth_train": digest(ex)})


@TASKS.register("nli_synth")
class SyntheticNLI(Task):
    name = "nli_synth"
    labels = NLI_LABELS
    description = "embedded synthetic NLI (3,000/500/1,000) with an 80% overlap shortcut -> HANS-like OOD (1,800)"

    def load(self, data_dir: Path | None) -> TaskData:
        train, dev, test, _ = generate(seed=0)
        id_src = DataSource("synthetic", DETAIL, {"nli_synth/id": digest(train + dev + test)})
        hans = EvalSet(name="hans_synth", labels=("entailment", "non-entailment"), collapse=(0, 1, 1),
                       metric="accuracy", pool="hans", loader=_ood_test)
        return TaskData(
            name=self.name, labels=NLI_LABELS, pair=True, id_metric="accuracy", max_length=64,
            bias_features="overlap", train=train, dev=dev, test=test, ood={"hans_synth": hans},
            sources=[id_src], note=DETAIL, ood_train=_ood_train,
        )
