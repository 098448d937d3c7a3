"""The eval suite: a user's own evaluation files judged on any task, no code (docs/suites.md).

``--suite-param eval_file=a.tsv[,b.json]`` (required) names the files, read by
``bench.data.evalfile`` (JSON lines, JSON as AdvGLUE's ``dev.json``, GLUE's TSVs, CSV), on any
task: single-sentence (sst2, agnews, sent_synth) as pair ones (mnli, nli_synth, qqp). It is the
ood suite without the task's own OOD sets, one mechanism: each file is judged and scored exactly
as an ``eval_file`` of the ood suite is (``ood/<file>``, per group x label cells, HANS's collapse
for a file labelled entailment / non-entailment, F_bias per file), beside the ID test split
(``id``), so that every row carries its ID reference. F_bias needs a reference, and the runner
finds it as for the ood suite (``bench.spec.requires.reference_of``): for a candidate that trains
nothing, such as a checkpoint judged as it is, none is trained, and without ``--reference`` its
F_bias is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.data.evalfile import eval_sets
from bench.errors import BenchError
from bench.registry import SUITES
from suites.ood import OOD


@dataclass
class EvalParams:
    eval_file: tuple[Path, ...] = ()  # required: the files to judge, a column each (JSONL, JSON, TSV or CSV)


@SUITES.register("eval")
class Eval(OOD):
    name = "eval"
    description = ("your own evaluation files (eval_file=a.tsv,b.json: JSONL, CSV, GLUE TSV, AdvGLUE JSON) on any task, "
                   "a column each beside the ID test metric, and F_bias")
    Params = EvalParams

    def judged(self, task, p: EvalParams | None) -> list:
        if not p or not p.eval_file:
            raise BenchError("suite 'eval' needs --suite-param eval_file=PATH[,PATH...] (JSONL, JSON, TSV or CSV; "
                             "docs/suites.md)")
        return eval_sets(p.eval_file, task)

    def examples(self, sizes: dict[str, int], params) -> float:
        return float(sizes.get("test", 0))  # the task's own OOD sets are not judged; the files are small
