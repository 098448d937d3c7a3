"""The format of a study's ``claims.toml``: each published claim it tests, with the paper's
number, the metric, the candidate and the reference (by leaderboard label and sparsity), the
direction the paper reports, the effect the design must detect, the metric's chance level and
the smallest effect of interest, and the registered design (seeds; examples where not the
pilot's); ``[defaults]`` for what the claims share (the partial-collapse thresholds among them);
and the families the claims were registered in (``leaderboard.claims`` measures them,
``leaderboard.plan`` says what their design can detect).

Example (``results/quickstart/claims.toml``)::

    [defaults]
    chance = 0.5                        # a balanced two-label set
    margin = 0.01                       # within 1 point of chance is at chance
    smallest_effect = 0.01              # 1 point
    seeds = 5                           # the registered design: seeds per side

    [[family]]
    name = "clark2019"
    registered = "with the study's first records"
    claims = ["poe-hans", "poe-non-entailment", "poe-id"]

    [[claim]]
    id = "poe-non-entailment"
    paper = "Clark et al. 2019, table 3"
    claim = "PoE raises HANS non-entailment accuracy over CE"
    published = "non-entailment 23.9 -> 47.3 (bert-base, MNLI)"
    metric = "ood/hans_synth/mean/non-entailment"
    set = "hans_synth"                  # the paired examples (default: the metric's own rows)
    gold = [1]                          # only these gold labels (non-entailment)
    candidate = { label = "finetune (poe)" }
    reference = { label = "finetune (ce)" }
    direction = "higher"                # or "lower", or "comparable"
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.errors import BenchError
from bench.metrics import COLLAPSE, CollapseRule
from leaderboard.stats import ALPHA

if TYPE_CHECKING:
    from leaderboard.candidate import Candidate

DIRECTIONS = ("higher", "lower", "comparable")
NUMBERS = ("chance", "margin", "smallest_effect")
THRESHOLDS = {"collapse_one_class": "one_class", "collapse_rare": "rare", "collapse_present": "present"}
DEFAULT_SEEDS = 5  # the registered design's seeds where a claims file names none
KEYS = {"id", "paper", "claim", "published", "metric", "candidate", "reference", "direction", "task", "set", "gold",
        "ratio", "effect", "seeds", "examples", *NUMBERS}

@dataclass(frozen=True)
class Select:
    label: str
    sparsity: float | None = None
    variant: str = ""

    def matches(self, c: Candidate) -> bool:
        return c.label == self.label and c.target == self.sparsity and c.variant == self.variant

    def __str__(self) -> str:
        return (self.label + ("" if self.sparsity is None else f" {self.sparsity:.0%}")
                + (f" [{self.variant}]" if self.variant else ""))


@dataclass(frozen=True)
class Family:
    """Claims registered together before their verdicts were known: the multiple-comparison
    correction is over exactly these, so its size never changes with later claims."""

    name: str
    registered: str
    claims: tuple[str, ...]


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    claim: str
    published: str
    metric: str
    candidate: Select
    reference: Select
    direction: str  # "higher", "lower" (candidate vs reference, as the paper reports) or "comparable"
    chance: float  # the metric of a model that carries no information (balanced two labels: 0.5)
    margin: float  # a side whose mean is within this of chance is at chance
    smallest_effect: float  # the smallest difference of interest, as a fraction
    task: str = ""
    set: str = ""
    gold: tuple[int, ...] = ()
    ratio: float = 1.0  # compare the candidate with ratio x reference ("keeps 95 % of its accuracy": 0.95)
    family: Family | None = None  # None: exploratory, uncorrected
    # the effect the design must detect, as a fraction in the paper's direction: the paper's own
    # difference on this metric where it reports one; None: it reports none here, and the
    # smallest effect of interest stands in (``comparable``: that is the margin)
    effect: float | None = None
    seeds: int = DEFAULT_SEEDS  # the registered design: seeds per side
    examples: int | None = None  # the registered design's paired examples; None: the pilot's
    collapse: CollapseRule = COLLAPSE

    @property
    def m(self) -> int:
        return len(self.family.claims) if self.family else 1

    @property
    def level(self) -> float:
        """The interval's level: 1 - 0.05 / m for a claim of a family of m (Bonferroni)."""
        return 1 - ALPHA / self.m

    @property
    def target(self) -> float:
        """What the design must detect: the paper's effect, or (``comparable``, or no published
        effect on this metric) the smallest effect of interest."""
        return self.smallest_effect if self.direction == "comparable" or self.effect is None else self.effect


def load_claims(path: Path) -> list[Claim]:
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise BenchError(f"claims file {path} is unreadable: {e}") from None
    defaults = raw.get("defaults", {})
    allowed = (*NUMBERS, *THRESHOLDS, "seeds")
    if not isinstance(defaults, dict) or set(defaults) - set(allowed):
        raise BenchError(f"{path}: [defaults] may set only {', '.join(allowed)}")
    rule = {}
    for key, name in THRESHOLDS.items():
        v = defaults.get(key, getattr(COLLAPSE, name))
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1:
            raise BenchError(f"{path}: [defaults] {key} must be a fraction in (0, 1), got {v!r}")
        rule[name] = float(v)
    collapse = CollapseRule(**rule)
    families = _families(path, raw.get("family", []))
    out, seen = [], set()
    for i, c in enumerate(raw.get("claim", []), 1):
        def bad(what: str, i: int = i) -> BenchError:
            return BenchError(f"{path}: claim {i}: {what}")

        try:
            if unknown := sorted(set(c) - KEYS):
                raise bad(f"unknown field {unknown[0]!r} (a claim has {', '.join(sorted(KEYS))})")
            if c["direction"] not in DIRECTIONS:
                raise bad(f"direction must be one of {', '.join(DIRECTIONS)}, got {c['direction']!r}")
            for key in ("id", "paper", "claim", "published", "metric", "task", "set"):
                if not isinstance(c.get(key, ""), str):
                    raise bad(f"{key} must be a string, got {c[key]!r}")
            if not c["id"] or c["id"] in seen:
                raise bad(f"id must be a non-empty string no other claim has, got {c['id']!r}")
            seen.add(c["id"])
            ratio = c.get("ratio", 1.0)
            if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 1:
                raise bad(f"ratio must be a fraction in (0, 1], got {ratio!r}")
            gold = c.get("gold", [])
            if not isinstance(gold, list) or not all(isinstance(g, int) and not isinstance(g, bool) for g in gold):
                raise bad(f"gold must be a list of label indices, got {gold!r}")
            numbers = {k: c.get(k, defaults.get(k)) for k in NUMBERS}
            for k, v in numbers.items():
                if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 1:
                    raise bad(f"{k} must be a fraction in [0, 1) (here or in [defaults]), got {v!r}")
            effect = c.get("effect")
            if effect is not None and (isinstance(effect, bool) or not isinstance(effect, int | float) or not 0 < effect <= 1):
                raise bad(f"effect must be a fraction in (0, 1] (the paper's difference, its own way), got {effect!r}")
            design = {k: c.get(k, defaults.get(k)) for k in ("seeds", "examples")}
            design["seeds"] = DEFAULT_SEEDS if design["seeds"] is None else design["seeds"]
            for k, v in design.items():
                if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < (3 if k == "seeds" else 1)):
                    raise bad(f"{k} must be a whole number of at least {3 if k == 'seeds' else 1}, got {v!r}")
            out.append(Claim(id=c["id"], paper=c["paper"], claim=c["claim"], published=c["published"],
                             metric=c["metric"], candidate=_select(c["candidate"], bad),
                             reference=_select(c["reference"], bad), direction=c["direction"],
                             task=c.get("task", ""), set=c.get("set", ""), gold=tuple(gold), ratio=float(ratio),
                             family=families.get(c["id"]), effect=None if effect is None else float(effect),
                             collapse=collapse, **design, **{k: float(v) for k, v in numbers.items()}))
        except (KeyError, TypeError) as e:
            raise BenchError(f"{path}: claim {i} is malformed ({type(e).__name__}: {e})") from None
    if missing := sorted({cid for f in families.values() for cid in f.claims} - seen):
        raise BenchError(f"{path}: a family registers claims that do not exist: {', '.join(missing)}")
    return out


def _families(path: Path, raw: list) -> dict[str, Family]:
    """Claim id -> its family; a claim is in one family at most."""
    out: dict[str, Family] = {}
    for j, f in enumerate(raw, 1):
        try:
            fam = Family(str(f["name"]), str(f["registered"]), tuple(f["claims"]))
        except (KeyError, TypeError) as e:
            raise BenchError(f"{path}: family {j} is malformed ({type(e).__name__}: {e})") from None
        if not fam.claims or not all(isinstance(cid, str) for cid in fam.claims):
            raise BenchError(f"{path}: family {fam.name}: claims must be a non-empty list of claim ids")
        for cid in fam.claims:
            if cid in out:
                raise BenchError(f"{path}: claim {cid} is in two families ({out[cid].name} and {fam.name})")
            out[cid] = fam
    return out


def _select(d: dict, bad) -> Select:
    """A side of a claim: a leaderboard label, a target sparsity as a fraction, a variant string."""
    sel = Select(**d)
    if not isinstance(sel.label, str) or not isinstance(sel.variant, str):
        raise bad(f"label and variant must be strings, got {d!r}")
    if sel.sparsity is not None and (isinstance(sel.sparsity, bool) or not isinstance(sel.sparsity, int | float)
                                     or not 0 <= sel.sparsity < 1):
        raise bad(f"sparsity must be a fraction in [0, 1), got {sel.sparsity!r}")
    return sel


PLAN = "plan.json"  # beside claims.toml: the registered designs (``bench plan --register``)
MAX_SEEDS, MAX_EXAMPLES = 100, 1_000_000  # the largest design a plan searches for one that reaches its target


@dataclass(frozen=True)
class Registered:
    """A claim's registered design and what it can detect, as ``bench plan --register`` wrote
    it into ``plan.json`` beside the claims file (``leaderboard.plan``): seeds, paired examples
    and their clusters, the interval's level, what the design must detect (``Claim.target``),
    its minimum detectable effect at 80 % power from the declared pilot (None, and why, where
    the pilot cannot say), whether the claim's own records existed when it was planned (post
    hoc), and the seeds and examples that would reach the target."""

    seeds: int
    examples: int
    clusters: int
    level: float
    target: float
    mde: float | None
    why: str = ""
    post_hoc: bool = False
    seeds_needed: int | None = None
    examples_needed: int | None = None
    pilot: dict | None = None  # the pilot's variance components (leaderboard.power.Components)
    available: int | None = None  # the examples the set holds (an attack: the test split it samples from)


def read_plan(path: Path) -> dict[str, Registered]:
    """Claim id -> its registered design, from ``plan.json`` ({} where there is none). The file
    is checked field by field: a malformed one is a one-line error."""
    if not path.is_file():
        return {}
    try:
        import json

        raw = json.loads(path.read_text())
        out = {}
        for cid, d in raw["claims"].items():
            reg = Registered(**d)
            numbers = [reg.level, reg.target, *(x for x in (reg.mde,) if x is not None)]
            counts = [reg.seeds, reg.examples, reg.clusters, *(x for x in (reg.seeds_needed, reg.examples_needed,
                                                                          reg.available) if x is not None)]
            if not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
                       for x in numbers) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in counts):
                raise TypeError(f"claim {cid}: a number that is not a finite non-negative number")
            if not isinstance(reg.post_hoc, bool) or not isinstance(reg.why, str) or \
                    not (reg.pilot is None or isinstance(reg.pilot, dict)):
                raise TypeError(f"claim {cid}: post_hoc, why or pilot of the wrong type")
            out[str(cid)] = reg
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise BenchError(f"{path}: not a plan written by bench plan ({type(e).__name__}: {e})") from None


def needed(p: Registered) -> str:
    """The design that would reach the target, in words (saying where it needs more examples
    than the set holds)."""
    beyond = (f", beyond the {p.available:,} the set holds" if p.examples_needed and p.available
              and p.examples_needed > p.available else "")
    if p.seeds_needed and p.examples_needed:
        return f"{p.seeds_needed} seeds and {p.examples_needed:,} examples{beyond}"
    if p.seeds_needed:
        return f"{p.seeds_needed} seeds ({p.examples:,} examples)"
    if p.examples_needed:
        return f"{p.examples_needed:,} examples ({p.seeds} seeds{beyond})"
    return f"none: no design of up to {MAX_SEEDS} seeds and {MAX_EXAMPLES:,} examples reaches it"
