"""The certified suite: certified robustness to word substitutions by randomized smoothing, on a
fixed stratified sample of the test split (docs/suites.md).

``smoothing=safer`` smooths over random synonym substitutions and certifies an example against
an attacker who substitutes words within their counter-fitted neighbour sets (SAFER, Ye, Gong
and Liu, ACL 2020); ``smoothing=ranmask`` smooths over random masks and certifies a number of
substituted words, any substitutes (RanMASK, Zeng et al., Computational Linguistics 2023). Both
use the CERTIFY procedure of Cohen et al. (2019): ``select`` samples pick the top class,
``samples`` fresh ones bound its probability from below (Clopper-Pearson, ``alpha``), and the
smoothed classifier abstains when the bound is not above one half (``bounds``).

Each example's row keeps the top class, its votes in both draws, the bound, SAFER's Delta or
RanMASK's word count and kept words, the verdict and radius: ``score`` (what ``bench rescore``
runs) decides every example again from them. Metrics: the smoothed classifier's accuracy
(abstentions count as wrong), certified accuracy (SAFER: against the whole neighbour sets;
RanMASK: against 1, 2, ... substituted words), the abstain rate, and the clean test accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.api import Candidate, Column, Context, Suite, SuiteResult
from bench.data.examples import stratified_sample
from bench.data.perturb import NEIGHBOURS, kept
from bench.errors import BenchError
from bench.registry import SUITES
from bench.store.atomic import sha256_file
from suites.certified.bounds import lower_bound, ranmask_radius, safer_delta, unanimous_samples

SMOOTHINGS = ("safer", "ranmask")
RADII = (1, 2, 3, 4, 5)  # RanMASK's certified accuracy at these numbers of substituted words


@dataclass
class CertifiedParams:
    smoothing: str = "safer"  # safer | ranmask
    samples: int = 100  # n, the votes that bound the top class (SAFER's code: 2,000-100,000; RanMASK's: 5,000)
    select: int = 20  # n0, the votes that pick the top class (RanMASK's code: 100)
    alpha: float = 0.05  # the bound's level, as RanMASK's code and Cohen et al.
    mask_rate: float = 0.7  # RanMASK: the share of words masked (its default)
    neighbours: int = 100  # SAFER: the perturbation set's largest size K (its run.sh: 100)
    budget: int = 0  # SAFER: words the attacker may substitute; 0: every word, as SAFER's released code
    n: int = 200  # examples certified (a stratified sample of the test split; 0: all)
    sample_seed: int = 0

    def __post_init__(self) -> None:
        if self.smoothing not in SMOOTHINGS:
            raise BenchError(f"--suite-param smoothing={self.smoothing}: choose from {', '.join(SMOOTHINGS)}")
        if not 0 < self.alpha < 0.5:
            raise BenchError(f"--suite-param alpha={self.alpha}: must lie in (0, 0.5)")
        if not 0 < self.mask_rate < 1:
            raise BenchError(f"--suite-param mask_rate={self.mask_rate}: must lie in (0, 1)")
        if self.select < 1 or self.neighbours < 2 or self.budget < 0 or self.n < 0:
            raise BenchError("select must be at least 1, neighbours at least 2, budget and n at least 0")
        if self.samples < unanimous_samples(self.alpha):
            raise BenchError(f"--suite-param samples={self.samples}: below {unanimous_samples(self.alpha)}, even a "
                             f"unanimous vote cannot certify at alpha={self.alpha}")


@SUITES.register("certified")
class Certified(Suite):
    name = "certified"
    description = ("certified robustness by randomized smoothing: SAFER (synonym sets) or RanMASK (masks, a word radius); "
                   "smoothed and certified accuracy, abstentions")
    Params = CertifiedParams

    def fingerprint(self, data_dir: Path | None, params: CertifiedParams | None = None) -> dict:
        p = params or CertifiedParams()
        listed = data_dir / NEIGHBOURS if data_dir else None
        return {"neighbours": sha256_file(listed) if p.smoothing == "safer" and listed and listed.is_file() else None}

    def check(self, params: CertifiedParams | None, task, data_dir: Path | None) -> None:
        p = params or CertifiedParams()
        if not task.test:
            raise BenchError(f"task '{task.name}' has no test split to certify")
        if p.smoothing == "safer" and not (data_dir and (data_dir / NEIGHBOURS).is_file()):
            raise BenchError(f"smoothing=safer needs {NEIGHBOURS} in the data directory (bench data fetch; docs/data.md)")

    def examples(self, sizes: dict[str, int], params: CertifiedParams | None) -> float:
        """The clean test pass, then select + samples forward passes per certified example."""
        p = params or CertifiedParams()
        n = p.n or sizes.get("test", 0)
        return sizes.get("test", 0) + min(n, sizes.get("test", n)) * (p.select + p.samples)

    def sets(self, task, params: CertifiedParams | None) -> dict:
        """The clean test split and the certified sample, for ``bench rescore`` to check gold labels."""
        p = params or CertifiedParams()
        return {"test": task.test, p.smoothing: stratified_sample(task.test, p.n or len(task.test), p.sample_seed)}

    def evaluate(self, candidate: Candidate, ctx: Context) -> SuiteResult:
        from bench.data.perturb import masked, substitutions
        from bench.model.predict import predict_logits, prediction_rows
        from suites.certified.smoothing import votes

        p: CertifiedParams = ctx.suite_params or CertifiedParams()
        task = ctx.task
        self.check(p, task, ctx.data_dir)
        logits = predict_logits(candidate.model, candidate.tokenizer, task.test, task.max_length, ctx.device, ctx.precision)
        rows = prediction_rows("test", task.test, logits, logits.argmax(1))
        sample = self.sets(task, p)[p.smoothing]
        if p.smoothing == "safer":
            subs = substitutions(ctx.data_dir, p.neighbours)
            perturb = subs.sample
        else:
            mask = candidate.tokenizer.mask_token
            if mask is None:
                raise BenchError("smoothing=ranmask needs a tokenizer with a mask token")
            perturb = lambda text, rng: masked(text, p.mask_rate, mask, rng)  # noqa: E731
        counted = votes(candidate.model, candidate.tokenizer, sample, perturb, (p.select, p.samples), ctx.seed,
                        task.max_length, ctx.device, ctx.precision)
        for ex, (chosen, counts) in zip(sample, counted, strict=True):
            top = int(np.argmax(chosen))
            text = ex.text_b if ex.text_b is not None else ex.text_a  # the text perturbed (kept for the example browser)
            row = {"set": p.smoothing, "uid": ex.uid, "gold": ex.label, "group": ex.group, "pred": top, "text": text,
                   "select": chosen.tolist(), "votes": int(counts[top]), "samples": p.samples}
            if p.smoothing == "safer":
                row["delta"] = round(safer_delta(subs.overlaps(text), p.budget or None), 6)
            else:
                row["words"] = len(text.split())
            rows.append(row | decide(row, self._details(p)))
        details = self._details(p) | {"id_metric": task.id_metric, "sizes": {"test": len(task.test), p.smoothing: len(sample)},
                                      "labels": {p.smoothing: list(task.labels)}}
        return SuiteResult(metrics=self.score(rows, details), predictions=rows, details=details)

    @staticmethod
    def _details(p: CertifiedParams) -> dict:
        return {"smoothing": p.smoothing, "alpha": p.alpha, "mask_rate": p.mask_rate, "budget": p.budget,
                "neighbours": p.neighbours, "samples": p.samples, "select": p.select}

    def score(self, rows: list[dict], details: dict) -> dict[str, float] | None:
        test = [r for r in rows if r["set"] == "test"]
        done = [r | decide(r, details) for r in rows if r["set"] == details.get("smoothing")]
        if not done:
            return None
        name = details["smoothing"]
        out = {"id": float(np.mean([r["pred"] == r["gold"] for r in test])) if test else float("nan"),
               f"cert/{name}": float(np.mean([r["correct"] for r in done])),
               f"cert/{name}/smoothed": float(np.mean([r["pred"] == r["gold"] and not r["abstain"] for r in done])),
               f"cert/{name}/abstain": float(np.mean([r["abstain"] for r in done]))}
        if name == "ranmask":
            for r in RADII:
                out[f"cert/ranmask/r{r}"] = float(np.mean([d["pred"] == d["gold"] and d["radius"] >= r for d in done]))
        return out

    def columns(self, details: dict, metrics: dict[str, float]) -> list[Column]:
        name = details.get("smoothing", "safer")
        title = {"safer": "SAFER", "ranmask": "RanMASK"}[name]
        cols = [Column("id", "ID acc", rows=("test",)),
                Column(f"cert/{name}", f"{title} certified %" + (" (r ≥ 1)" if name == "ranmask" else ""), rows=(name,),
                       primary=True),
                Column(f"cert/{name}/smoothed", f"{title} smoothed acc", table="certified"),
                Column(f"cert/{name}/abstain", f"{title} abstain %", "percent", False, "certified")]
        cols += [Column(f"cert/ranmask/r{r}", f"certified at {r} words", table="certified") for r in RADII if name == "ranmask"]
        return [c for c in cols if c.key in metrics]


def decide(row: dict, details: dict) -> dict:
    """An example's verdict from its votes: the bound, whether the smoothed classifier abstains,
    and whether its answer is certified and right (SAFER: p_lower - Delta > 1/2; RanMASK: its
    radius, the most substituted words it is certified against, at least 1 to count)."""
    bound = lower_bound(row["votes"], row["samples"], details["alpha"])
    out = {"p_lower": round(bound, 6), "abstain": bound <= 0.5}
    if details["smoothing"] == "safer":
        certified = bound - row["delta"] > 0.5
    else:
        out["kept"] = kept(row["words"], details["mask_rate"])
        out["radius"] = ranmask_radius(bound, row["words"], out["kept"])
        certified = out["radius"] >= 1
    return out | {"certified": certified, "correct": certified and row["pred"] == row["gold"]}
