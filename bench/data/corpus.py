"""Unlabelled English text available offline, for what the harness builds itself from text (a
masked-LM head for BERT-Attack, distilled students)."""

from __future__ import annotations

import random
from pathlib import Path

MAX_SENTENCES = 40_000


def corpus(data_dir: Path | None, fallback: list[str], exclude: set[str] = frozenset()) -> tuple[list[str], str]:
    """SST-2 train, AG News and MNLI sentences of the data directory when it has them, else
    ``fallback`` (a task's own training text); deduplicated, shuffled with seed 0, capped.
    ``exclude`` (the task's dev and test texts) is removed: what is built from the corpus never
    saw the inputs it will be judged on."""
    texts: list[str] = []
    used = []
    if data_dir is not None:
        for rel, cols, header in (("sst2/train.tsv", (0,), True), ("agnews/test.tsv", (0,), False),
                                  ("mnli/dev_matched.tsv", (1, 2), True)):
            p = data_dir / rel
            if p.is_file():
                lines = p.read_text(encoding="utf-8").splitlines()[1 if header else 0:]
                # stripped as the task loaders strip, or a held-out text with a stray space slips past ``exclude``
                texts += [c.strip() for ln in lines for i, c in enumerate(ln.split("\t")) if i in cols and len(c.split()) >= 4]
                used.append(rel)
    if not texts:
        texts, used = [t for t in fallback if len(t.split()) >= 2], ["the task's training text"]
    texts = sorted(set(texts) - set(exclude))
    random.Random(0).shuffle(texts)
    return texts[:MAX_SENTENCES], " + ".join(used) + (", minus the task's dev and test text" if exclude else "")


def held_out_texts(task) -> set[str]:
    """The dev and test inputs of a task (never part of a corpus built for it)."""
    return {t for e in task.dev + task.test for t in (e.text_a, e.text_b) if t}
