"""The sentence templates of the synthetic NLI task (``synthetic``): its vocabulary, the
training mixture with its planted lexical-overlap shortcut (``TRAIN_MIX``) and the HANS-like
OOD cells (``OOD_CELLS``), whose nouns and constructions training never uses. Changing any of
them changes the generated data: raise ``synthetic.GENERATOR_VERSION``."""

from __future__ import annotations

import random
from collections.abc import Callable

P_ENTAIL_GIVEN_OVERLAP = 0.80

PEOPLE = ("doctor lawyer artist student senator athlete judge banker author tourist manager secretary "
          "scientist president actor professor farmer pilot chef nurse soldier dancer singer writer").split()
OOD_PEOPLE = "baker coach editor guard pianist surgeon poet sailor clerk mayor tailor golfer".split()
PLACES = "park library museum office station hotel school hospital theater market airport restaurant".split()
ADJS = "tall young old famous quiet busy clever angry happy tired".split()
ADVS = ["yesterday", "twice", "on monday", "for money", "in secret", "last year", "again", "at night"]
INTRANS = "slept ran danced laughed waited left smiled arrived".split()
# (base, past, synonym past, antonym past)
VERBS = [
    ("help", "helped", "assisted", "hindered"), ("admire", "admired", "respected", "despised"),
    ("praise", "praised", "complimented", "criticized"), ("love", "loved", "adored", "hated"),
    ("trust", "trusted", "believed", "distrusted"), ("support", "supported", "backed", "opposed"),
    ("welcome", "welcomed", "greeted", "rejected"), ("hire", "hired", "employed", "fired"),
    ("remember", "remembered", "recalled", "forgot"), ("invite", "invited", "asked", "excluded"),
    ("defend", "defended", "protected", "attacked"), ("encourage", "encouraged", "motivated", "discouraged"),
    ("like", "liked", "enjoyed", "disliked"),
]
E, N, C = 0, 1, 2
Gen = Callable[[random.Random], tuple[str, str]]


def _people(r: random.Random, k: int) -> list[str]:
    return r.sample(PEOPLE, k)


def _np(name: str, r: random.Random, adj_p: float = 0.0) -> str:
    return f"the {r.choice(ADJS)} {name}" if r.random() < adj_p else f"the {name}"


def _clause(r: random.Random) -> tuple[str, str, tuple]:
    a, b = _people(r, 2)
    return a, b, r.choice(VERBS)


# --- entailment -------------------------------------------------------------------------------
def e_drop(r):  # full overlap: modifiers dropped
    a, b, v = _clause(r)
    return f"{_np(a, r, .5)} {v[1]} the {b} in the {r.choice(PLACES)}", f"the {a} {v[1]} the {b}"


def e_syn(r):  # partial overlap: synonym verb
    a, b, v = _clause(r)
    return f"{_np(a, r, .3)} {v[1]} the {b}", f"the {a} {v[2]} the {b}"


def e_passive(r):
    a, b, v = _clause(r)
    return f"{_np(a, r, .3)} {v[1]} the {b}", f"the {b} was {v[1]} by the {a}"


def e_relative(r):  # full overlap, the main clause survives
    a, b, c = _people(r, 3)
    v, v2 = r.sample(VERBS, 2)
    return f"the {a} who {v2[1]} the {c} {v[1]} the {b}", f"the {a} {v[1]} the {b}"


def e_conj(r):  # full overlap, non-contiguous
    a, b, c = _people(r, 3)
    v = r.choice(VERBS)
    return f"the {a} {v[1]} the {b} and the {c}", f"the {a} {v[1]} the {c}"


def e_constituent(r):  # full overlap: an entailing embedding
    a, b, c = _people(r, 3)
    v = r.choice(VERBS)
    head = r.choice(["certainly", "clearly", "after", "because", "since"])
    if head in ("certainly", "clearly"):
        return f"{head} the {a} {v[1]} the {b}", f"the {a} {v[1]} the {b}"
    return f"{head} the {a} {v[1]} the {b} , the {c} {r.choice(INTRANS)}", f"the {a} {v[1]} the {b}"


def e_negprem(r):  # negation in the premise, entailed hypothesis
    a, b, v = _clause(r)
    return f"the {a} did not {v[0]} the {b}", f"the {b} was not {v[1]} by the {a}"


# --- neutral ------------------------------------------------------------------------------------
def n_adverb(r):
    a, b, v = _clause(r)
    return f"{_np(a, r, .3)} {v[1]} the {b}", f"the {a} {v[1]} the {b} {r.choice(ADVS)}"


def n_other(r):
    a, b, d = _people(r, 3)
    v = r.choice(VERBS)
    return f"{_np(a, r, .3)} {v[1]} the {b}", f"the {a} {v[1]} the {d}"


def n_negother(r):
    a, b, d = _people(r, 3)
    v = r.choice(VERBS)
    return f"the {a} did not {v[0]} the {b}", f"the {d} did not {v[0]} the {b}"


def n_swap(r):  # counter-example, lexical overlap
    a, b, v = _clause(r)
    return f"{_np(a, r, .3)} {v[1]} the {b}", f"the {b} {v[1]} the {a}"


def n_subsequence(r):  # counter-example, subsequence
    a, b, c = _people(r, 3)
    v, v2 = r.sample(VERBS, 2)
    if r.random() < 0.5:
        return f"the {a} near the {c} {v[1]} the {b}", f"the {c} {v[1]} the {b}"
    return f"the {a} who {v2[1]} the {c} {v[1]} the {b}", f"the {c} {v[1]} the {b}"


def n_constituent(r):  # counter-example, constituent
    a, b, c = _people(r, 3)
    v = r.choice(VERBS)
    head = r.choice(["if", "unless", "perhaps", "maybe", "whether or not"])
    if head in ("perhaps", "maybe"):
        return f"{head} the {a} {v[1]} the {b}", f"the {a} {v[1]} the {b}"
    return f"{head} the {a} {v[1]} the {b} , the {c} {r.choice(INTRANS)}", f"the {a} {v[1]} the {b}"


# --- contradiction ------------------------------------------------------------------------------
def c_antonym(r):
    a, b, v = _clause(r)
    return f"{_np(a, r, .3)} {v[1]} the {b}", f"the {a} {v[3]} the {b}"


def c_negation(r):
    a, b, v = _clause(r)
    return f"{_np(a, r, .3)} {v[1]} the {b}", f"the {a} did not {v[0]} the {b}"


def c_negprem(r):
    a, b, v = _clause(r)
    return f"the {a} did not {v[0]} the {b}", f"the {a} {v[1]} the {b}"


def c_antonym_passive(r):
    a, b, v = _clause(r)
    return f"{_np(a, r, .3)} {v[1]} the {b}", f"the {b} was {v[3]} by the {a}"


# --- held-out constructions, OOD only ---------------------------------------------------------
def _ood_people(r: random.Random, k: int) -> list[str]:
    return r.sample(OOD_PEOPLE, k)


def ood_lex_e(r):  # "both ... and": the conjunction of training, another form
    a, b, c = _ood_people(r, 3)
    v = r.choice(VERBS)
    return f"the {a} {v[1]} both the {b} and the {c}", f"the {a} {v[1]} the {c}"


def ood_lex_n(r):  # swap around a passive-free relative object
    a, b, c = _ood_people(r, 3)
    v, v2 = r.sample(VERBS, 2)
    return f"the {a} {v[1]} the {b} that the {c} {v2[1]}", f"the {b} {v[1]} the {a}"


def ood_sub_e(r):
    a, b = _ood_people(r, 2)
    v = r.choice(VERBS)
    return f"the {a} {v[1]} the {b} {r.choice(['at noon', 'before lunch', 'after dinner'])}", f"the {a} {v[1]} the {b}"


def ood_sub_n(r):  # PP-modified subject with prepositions training never uses
    a, b, c = _ood_people(r, 3)
    v = r.choice(VERBS)
    return f"the {a} {r.choice(['behind', 'beside', 'with'])} the {c} {v[1]} the {b}", f"the {c} {v[1]} the {b}"


def ood_con_e(r):
    a, b, c = _ood_people(r, 3)
    v = r.choice(VERBS)
    head = r.choice(["obviously", "definitely", "now that"])
    if head == "now that":
        return f"now that the {a} {v[1]} the {b} , the {c} {r.choice(INTRANS)}", f"the {a} {v[1]} the {b}"
    return f"{head} the {a} {v[1]} the {b}", f"the {a} {v[1]} the {b}"


def ood_con_n(r):
    a, b, c = _ood_people(r, 3)
    v = r.choice(VERBS)
    head = r.choice(["probably", "supposedly", "the {c} doubts that", "in case"])
    if head == "in case":
        return f"in case the {a} {v[1]} the {b} , the {c} {r.choice(INTRANS)}", f"the {a} {v[1]} the {b}"
    return f"{head.format(c=c)} the {a} {v[1]} the {b}", f"the {a} {v[1]} the {b}"


# Mixture weights. Full-overlap types: entailed {e_drop, e_relative, e_conj, e_constituent} =
# 0.26 vs counter-examples {n_swap, n_subsequence, n_constituent} = 0.065 -> P(E | overlap) = 0.8.
_FULL_E = 0.26
_FULL_N = _FULL_E * (1 - P_ENTAIL_GIVEN_OVERLAP) / P_ENTAIL_GIVEN_OVERLAP
TRAIN_MIX: list[tuple[Gen, int, float]] = [
    (e_drop, E, _FULL_E / 4), (e_relative, E, _FULL_E / 4), (e_conj, E, _FULL_E / 4), (e_constituent, E, _FULL_E / 4),
    (e_syn, E, 0.03), (e_passive, E, 0.025), (e_negprem, E, 1 / 3 - _FULL_E - 0.055),
    (n_swap, N, _FULL_N / 3), (n_subsequence, N, _FULL_N / 3), (n_constituent, N, _FULL_N / 3),
    (n_adverb, N, 0.11), (n_other, N, 0.10), (n_negother, N, 1 / 3 - _FULL_N - 0.21),
    (c_antonym, C, 0.10), (c_negation, C, 0.09), (c_negprem, C, 0.08), (c_antonym_passive, C, 1 / 3 - 0.27),
]

# HANS-like cells: (heuristic, gold) -> generator; every hypothesis is covered by its premise,
# with held-out nouns and constructions.
OOD_CELLS: dict[tuple[str, int], Gen] = {
    ("lexical_overlap", 0): ood_lex_e, ("lexical_overlap", 1): ood_lex_n,
    ("subsequence", 0): ood_sub_e, ("subsequence", 1): ood_sub_n,
    ("constituent", 0): ood_con_e, ("constituent", 1): ood_con_n,
}
