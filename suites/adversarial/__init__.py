"""The adversarial suite: TextFooler, BERT-Attack and TextBugger through TextAttack, offline,
resumable and fast (docs/design.md section 5).

``adversarial`` runs all three recipes, or those of ``--suite-param recipes=textfooler,...``.
N test examples (``--suite-param n``; 100, or the whole test split when it is smaller) are drawn with a fixed seed, stratified by
label, never the first N of a file (the published Robust Tickets code attacked one class
only; docs/design.md section 7); their ids go into the record. Metrics per recipe, with TextAttack's
conventions: Clean% = correct before the attack / N; Aua% = still correct after it / N; Suc% =
successful / (successful + failed), skipping examples already wrong; #Query = mean model
queries per attacked (non-skipped) example; Words% = the words a successful attack changed, as
a share of the attacked text's words, averaged over successful attacks (TextAttack's "average
perturbed word %"; its denominator is the attacked column, which on a pair task is the
hypothesis alone, where TextAttack counts the premise's words too).

Every finished example is appended to ``<out>/partial/<run_id>/<recipe>.jsonl`` at once, so an
interrupted attack resumes where it stopped and never attacks an example twice; each example
is seeded from (sample_seed, its id), so a resumed run gives the same result as an
uninterrupted one. The per-example rows become the run's predictions file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import tempfile
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np
from tqdm import tqdm

from bench.api import Candidate, Column, Context, Suite, SuiteResult
from bench.data.corpus import held_out_texts
from bench.data.examples import Example, stratified_sample
from bench.errors import BenchError
from bench.metrics import accuracy
from bench.registry import SUITES, did_you_mean
from bench.store.atomic import sha256_file, write_atomic
from suites.adversarial.recipes import RECIPE_NAMES, RECIPES, Sources, build
from suites.adversarial.resources import textattack_version

# Classifier-forward equivalents per attacked example and recipe, for sweep estimates: measured on
# SST-2 with MiniLM on 2 CPU cores (results/tickets: 100 sentences x 3 recipes in 470-730 s at
# about 200 forwards/s), the attack's 30-50 queries plus its own models (the sentence encoder,
# BERT-Attack's masked LM). Longer texts (IMDB) take many more queries.
ATTACK_COST = 400
DEFAULT_N = 100


@dataclass
class AttackParams:
    n: int = 0  # examples attacked per recipe; 0: 100, or the whole test split when smaller (1000 on a GPU)
    sample_seed: int = 0
    recipes: str = ""  # comma-separated subset of the suite's recipes ("" = all of them)
    query_budget: int = 0  # per example; 0 = unlimited, as the recipes
    word_embedding: str = ""  # a TextAttack paragramcf folder (else official cache, else fallback)
    sentence_encoder: str = ""  # a sentence-transformers model folder in place of USE
    mlm: str = ""  # a BertForMaskedLM folder for BERT-Attack (else bert-base-uncased, else fallback)
    batch_size: int = 64

    def __post_init__(self) -> None:
        if self.n < 0 or self.query_budget < 0 or self.batch_size < 1:
            raise BenchError("n must be at least 0 (0: the default), batch_size at least 1, query_budget at least 0")
        for r in self.chosen(RECIPES):
            if r not in RECIPES:
                raise BenchError(f"unknown recipe '{r}'{did_you_mean(r, list(RECIPES))}")
        for name in ("word_embedding", "sentence_encoder", "mlm"):
            path = getattr(self, name)
            if path and not Path(path).expanduser().exists():
                raise BenchError(f"--suite-param {name}={path}: no such file or directory")

    def chosen(self, default: tuple[str, ...] = RECIPES) -> list[str]:
        return [r.strip() for r in self.recipes.split(",") if r.strip()] if self.recipes else list(default)

    def size(self, test: int) -> int:
        """Examples attacked on a test split of ``test`` examples."""
        return self.n or min(DEFAULT_N, test)


def load_rows(path: Path, header: dict) -> list[dict]:
    """Finished examples of an interrupted attack made with the same recipe settings and
    resources (the file's first line); a torn last line (killed mid-write) is dropped."""
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    try:
        if not lines or json.loads(lines[0]) != header:
            return []  # another recipe setting or other resources: start over
    except json.JSONDecodeError:
        return []
    rows = []
    for line in lines[1:]:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return rows


# TextAttack's word splitting (textattack.shared.utils.words_from_text, CJK segmentation aside):
# runs of word characters, its homoglyphs and '-_*@, with those four stripped from the ends
_HOMOGLYPHS = "˗৭Ȣ𝟕бƼᏎƷᒿlO`ɑЬϲԁе𝚏ɡհіϳ𝒌ⅼｍոорԛⲅѕ𝚝սѵԝ×уᴢ"
_WORD = re.compile(f"[\\w{_HOMOGLYPHS}'\\-_\\*@]+")
_ENDS = "'-_*@"


def words(text: str) -> list[str]:
    """The words TextAttack counts in ``text`` (the denominator of its perturbed word %)."""
    out = []
    for token in text.split():
        out += [w.strip(_ENDS) for w in _WORD.findall(token.strip(_ENDS))]
    return [w for w in out if w]


def summarize(rows: list[dict]) -> dict[str, float]:
    """Clean%, Aua%, Suc%, #Query and Words% of one recipe's per-example rows (docs/design.md
    section 5; the module docstring)."""
    n = len(rows)
    status = [r["result"] for r in rows]
    succ, fail, skip = status.count("successful"), status.count("failed"), status.count("skipped")
    attacked = [r["queries"] for r in rows if r["result"] != "skipped"]
    changed = [r["words_changed"] / len(words(r["original"])) for r in rows
               if r["result"] == "successful" and words(r.get("original", ""))]
    return {
        "clean": (n - skip) / n if n else math.nan,
        "aua": fail / n if n else math.nan,
        "suc": succ / (succ + fail) if succ + fail else math.nan,
        "queries": float(np.mean(attacked)) if attacked else math.nan,
    } | ({"words": float(np.mean(changed))} if changed else {})  # no successful attack: none to count


@functools.cache
def _sha(path: str) -> str:
    return sha256_file(Path(path))


def _last_column(text_input) -> str:
    return text_input if isinstance(text_input, str) else text_input[-1]


def _input(ex: Example, pair: bool) -> OrderedDict:
    return OrderedDict([("premise", ex.text_a), ("hypothesis", ex.text_b)]) if pair else OrderedDict([("text", ex.text_a)])


def notes(details: dict) -> list[str]:
    """One line per recipe naming the resources its numbers were made with (for the leaderboard)."""
    return [f"{RECIPE_NAMES.get(recipe, recipe)} resources ({details.get('resources_tag', '')}): "
            + "; ".join(f"{r['role']}: {r['name']} ({r['kind']})" for r in d.get("resources", []))
            for recipe, d in details.get("recipes", {}).items() if d.get("resources")]


@SUITES.register("adversarial")
class Adversarial(Suite):
    name = "adversarial"
    description = "TextFooler, BERT-Attack, TextBugger (TextAttack 0.3.11, offline): Clean%, Aua%, Suc%, #Query"
    Params = AttackParams

    def examples(self, sizes: dict[str, int], params: AttackParams | None) -> float:
        """The clean pass over the test split, then ATTACK_COST forward equivalents per attacked
        example and recipe (queries: 50-160 on SST-2, up to ~3,000 on IMDB in Zheng et al. 2022,
        table 1): a rough figure for sweep estimates."""
        p = params or AttackParams()
        return sizes.get("test", 0) + p.size(sizes.get("test", DEFAULT_N)) * len(p.chosen()) * ATTACK_COST

    def fingerprint(self, data_dir: Path | None, params: AttackParams | None = None) -> dict:
        listed = data_dir / "wordsub" / "counterfitted_neighbors.json" if data_dir else None
        return {"textattack": textattack_version(),
                "neighbour_list": _sha(str(listed)) if listed is not None and listed.is_file() else None}

    def check(self, params: AttackParams | None, task, data_dir: Path | None) -> None:
        from suites.adversarial.mlm import check_available, task_texts

        p = params or AttackParams()
        textattack_version()
        if not task.test:
            raise BenchError(f"task '{task.name}' has no test split to attack")
        if p.n > len(task.test):
            raise BenchError(f"--suite-param n={p.n} is larger than the test split of '{task.name}' ({len(task.test)} examples)")
        if "bert_attack" in p.chosen():
            check_available(p.mlm, data_dir, task_texts(task.train), held_out_texts(task))

    def evaluate(self, candidate: Candidate, ctx: Context) -> SuiteResult:
        from bench.model.predict import predict_logits, prediction_rows
        from suites.adversarial.mlm import task_texts
        from suites.adversarial.resources import textattack
        from suites.adversarial.wrapper import make_wrapper

        p: AttackParams = ctx.suite_params or AttackParams()
        task = ctx.task
        self.check(p, task, ctx.data_dir)
        chosen, n = p.chosen(), p.size(len(task.test))
        sample = stratified_sample(task.test, n, p.sample_seed)
        logits = predict_logits(candidate.model, candidate.tokenizer, task.test, task.max_length, ctx.device, ctx.precision)
        preds: list[dict] = prediction_rows("test", task.test, logits, logits.argmax(1))  # the clean pass, re-scorable
        ta = textattack()
        wrapper = make_wrapper(candidate.model, candidate.tokenizer, task.max_length, ctx.device, ctx.precision, p.batch_size)
        src = Sources(Path(ctx.data_dir) if ctx.data_dir else None, p.word_embedding, p.sentence_encoder, p.mlm,
                      tuple(task_texts(task.train)), frozenset(held_out_texts(task)), ctx.progress)
        details: dict = {"sizes": {"test": len(task.test), "attacked": n}, "sample_ids": [e.uid for e in sample],
                         "textattack": version("textattack"), "recipes": {}, "id_metric": "accuracy"}
        fallbacks: set[str] = set()
        scratch = ctx.scratch or Path(tempfile.mkdtemp(prefix="bench-attack-"))  # the runner always gives one
        for recipe in chosen:
            built = build(recipe, wrapper, src, task.pair, p.query_budget or float("inf"))
            header = {"recipe": recipe, "settings": built.settings, "resources": [r.to_dict() for r in built.resources],
                      "sample_seed": p.sample_seed}
            rows = self._attack(ta, built.attack, recipe, sample, task.pair, scratch / f"{recipe}.jsonl", header, ctx.progress,
                                p.sample_seed)
            details["recipes"][recipe] = {"settings": built.settings, "resources": [r.to_dict() for r in built.resources]}
            fallbacks |= {r.role for r in built.resources if r.kind == "fallback"}
            preds += rows
        resources = json.dumps([details["recipes"][r]["resources"] for r in chosen] + [details["textattack"]], sort_keys=True)
        details["resources_tag"] = (f"fallback resources {hashlib.sha256(resources.encode()).hexdigest()[:8]}"
                                    if fallbacks else "official")
        details["model_calls"] = wrapper.calls
        details["notes"] = notes(details)
        return SuiteResult(metrics=self.score(preds, details), predictions=preds, details=details)

    def score(self, rows: list[dict], details: dict) -> dict[str, float] | None:
        """Clean accuracy on the whole test set, then Clean%, Aua%, Suc% and #Query per recipe."""
        test = [r for r in rows if r["set"] == "test"]
        metrics = {"id": accuracy(np.array([r["gold"] for r in test]), np.array([r["pred"] for r in test]))} if test else {}
        for recipe in details.get("recipes", {}):
            metrics.update({f"{recipe}/{k}": v for k, v in summarize([r for r in rows if r["set"] == recipe]).items()})
        return metrics

    def columns(self, details: dict, metrics: dict[str, float]) -> list[Column]:
        """Main: clean accuracy, then Aua% (the first recipe ranks) and Suc% per recipe. Details:
        each recipe's Clean% on the attacked sample, #Query and Words% (more words to change: a
        more robust model)."""
        cols = [Column("id", "ID acc", rows=("test",))]
        more = []
        for i, recipe in enumerate(details.get("recipes", {})):
            shown = RECIPE_NAMES.get(recipe, recipe)
            cols += [Column(f"{recipe}/aua", f"{shown} Aua%", rows=(recipe,), primary=i == 0),
                     Column(f"{recipe}/suc", f"{shown} Suc%", higher_is_better=False)]
            more += [Column(f"{recipe}/clean", f"{shown} Clean%", table="attacks"),
                     Column(f"{recipe}/queries", f"{shown} #Query", "number", None, "attacks"),
                     Column(f"{recipe}/words", f"{shown} Words%", table="attacks")]
        return [c for c in cols + more if c.key in metrics]

    def sets(self, task, params: AttackParams | None) -> dict[str, list[Example]]:
        p = params or AttackParams()
        sample = stratified_sample(task.test, p.size(len(task.test)), p.sample_seed)
        return {"test": task.test} | {recipe: sample for recipe in p.chosen()}

    @staticmethod
    def _attack(ta, attack, recipe: str, sample: list[Example], pair: bool, path: Path, header: dict,
                progress: bool, sample_seed: int) -> list[dict]:
        done = load_rows(path, header)
        if [r["uid"] for r in done] != [e.uid for e in sample[: len(done)]]:
            done = []  # not this sample's partial results: start over
        # rewrite what is kept (drops a torn last line) under a temporary name of its own, then append
        write_atomic(path, "".join(json.dumps(r) + "\n" for r in [header, *done]))
        counts = {"successful": 0, "failed": 0, "skipped": 0}
        for r in done:
            counts[r["result"]] += 1
        bar = tqdm(total=len(sample), initial=len(done), desc=recipe, disable=not progress, leave=False, dynamic_ncols=True)
        with open(path, "a", encoding="utf-8") as f:
            for ex in sample[len(done):]:
                ta.shared.utils.set_seed(zlib.crc32(f"{sample_seed}:{ex.uid}".encode()))
                t0 = time.time()
                res = attack.attack(_input(ex, pair), ex.label)
                kind = type(res).__name__.removesuffix("AttackResult").lower()
                row = {
                    "set": recipe, "uid": ex.uid, "gold": ex.label, "result": kind,
                    "correct": kind == "failed",  # still right under attack: what Aua% counts
                    "queries": res.perturbed_result.num_queries,
                    "pred": int(res.original_result.output), "adv_pred": int(res.perturbed_result.output),
                    "original": ex.text_b if pair else ex.text_a,
                    "perturbed": _last_column(res.perturbed_result.attacked_text.tokenizer_input),
                    "words_changed": len(res.perturbed_result.attacked_text.all_words_diff(res.original_result.attacked_text))
                    if kind == "successful" else 0,
                    "seconds": round(time.time() - t0, 3),
                }
                f.write(json.dumps(row) + "\n")
                f.flush()
                os.fsync(f.fileno())
                done.append(row)
                counts[kind] += 1
                bar.update(1)
                bar.set_postfix(succ=counts["successful"], fail=counts["failed"], skip=counts["skipped"])
        bar.close()
        return done
