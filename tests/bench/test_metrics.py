import math

import numpy as np
import pytest

from bench.metrics import accuracy, bias_degree, cells, collapse, f_bias, weighted_f1


def test_hans_collapse_maps_neutral_and_contradiction_to_non_entailment():
    pred3 = np.array([0, 1, 2, 0, 2])
    assert collapse(pred3, (0, 1, 1)).tolist() == [0, 1, 1, 0, 1]


def test_hans_cells_are_accuracy_per_heuristic_and_gold_label():
    y = np.array([0, 0, 1, 1, 0, 1])
    p = np.array([0, 1, 1, 0, 0, 0])
    g = ["lex", "lex", "lex", "lex", "sub", "sub"]
    c = cells(y, p, g, ("entailment", "non-entailment"))
    assert c == {"lex/entailment": 0.5, "lex/non-entailment": 0.5, "sub/entailment": 1.0, "sub/non-entailment": 0.0}


def test_weighted_f1_matches_hand_computation():
    # class 0: support 3, tp 2, fp 1, fn 1 -> P 2/3, R 2/3, F1 2/3
    # class 1: support 2, tp 1, fp 1, fn 1 -> P 1/2, R 1/2, F1 1/2
    y = np.array([0, 0, 0, 1, 1])
    p = np.array([0, 0, 1, 1, 0])
    assert weighted_f1(y, p) == pytest.approx((3 * 2 / 3 + 2 * 0.5) / 5)
    assert accuracy(y, p) == pytest.approx(0.6)


def test_f_bias_is_ratio_of_relative_drops():
    # full: 80 dev, 60 ood -> D 0.25; compressed: 75 dev, 60 ood -> D 0.2
    assert bias_degree(0.8, 0.6) == pytest.approx(0.25)
    assert f_bias(0.75, 0.6, 0.8, 0.6) == pytest.approx(0.8)
    assert f_bias(0.8, 0.6, 0.8, 0.6) == pytest.approx(1.0)
    assert math.isnan(f_bias(0.7, 0.6, 0.8, 0.8))  # no drop in the full model: undefined


def test_a_candidate_that_did_not_learn_is_degenerate():
    from bench.metrics import degenerate

    y = [0, 1] * 50  # balanced
    assert "predicts class 1 on 96.0%" in degenerate(y, [1] * 96 + [0] * 4)
    assert degenerate(y, y[:90] + [1] * 10) is None  # 95 % right
    assert "within 1%" in degenerate(y, [0, 0] * 25 + [1, 1] * 25)  # 50 % right on a balanced set
    assert degenerate(y, y) is None
    skewed = [0] * 97 + [1] * 3  # gold itself 97 % one class: a model that answers it mostly is not flagged for that
    assert degenerate(skewed, [0] * 97 + [1] * 3) is None
    assert "majority class" in degenerate(skewed, [0] * 100)


def test_one_class_on_a_balanced_set_is_flagged_in_the_sets_own_labels_and_attacks_are_left_out():
    """A model answering non-entailment on all of HANS (MNLI's neutral and contradiction collapsed
    into it) is flagged there; a FEVER-Symmetric model answering "not enough info" (a third label
    on a two-label set) everywhere is too. Attack rows, whose outcome is the attack's, are not
    read: here every one answers class 0, which would flag the set."""
    from bench.metrics import one_class, one_class_sets

    y = np.array([0, 1] * 50)
    assert "answers class 0 on 96.0%" in one_class(y, np.array([0] * 96 + [1] * 4))
    assert one_class(y, y) is None
    assert one_class(np.array([0] * 97 + [1] * 3), np.zeros(100, int)) is None  # gold itself that skewed
    hans = [{"set": "hans", "uid": i, "gold": i % 2, "pred": 1, "correct": i % 2 == 1} for i in range(100)]
    fever = [{"set": "symm_v1", "uid": i, "gold": i % 2, "pred": 2, "correct": False} for i in range(100)]
    attack = [{"set": "textfooler", "uid": i, "gold": i % 2, "pred": 0, "correct": i % 2 == 0, "result": "failed"}
              for i in range(100)]
    test = [{"set": "test", "uid": i, "gold": i % 3, "pred": i % 3, "correct": True} for i in range(99)]
    flagged = one_class_sets(hans + fever + attack + test)
    assert set(flagged) == {"hans", "symm_v1"} and "class 2" in flagged["symm_v1"]
