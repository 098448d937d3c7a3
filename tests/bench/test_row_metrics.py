"""Metrics from the kept predictions, no retraining (issue 71, item 5): calibration error,
loyalty to the dense model, the attacks' perturbed words; made by a run, re-scored, migrated."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main
from bench.core.rescore import rescore
from bench.metrics import FLOOR, calibration, confidence, ece, flips, js_distance, loyalty
from bench.store.records import load_record

ROOT = Path(__file__).resolve().parents[2]


def test_ece_is_guo_et_al_equation_3_over_ten_equal_bins():
    # two in (0.9, 1.0]: accuracy 0.5 at confidence 0.95; two in (0.5, 0.6] (0.6 is the bin's top)
    assert ece([0.95, 0.95, 0.6, 0.6], [True, False, True, True]) == pytest.approx(0.5 * 0.45 + 0.5 * 0.4)
    assert ece([0.6, 0.55], [True, False]) == pytest.approx(0.075)  # one bin, (0.5, 0.6]: 0.6 is not the next bin's
    assert ece([0.8] * 5, [True, True, True, True, False]) == pytest.approx(0.0)  # calibrated
    assert ece([0.6, 0.61], [True, True], bins=1) == pytest.approx(1 - 0.605)
    assert np.isnan(ece([], []))


def test_a_collapsed_answer_is_as_confident_as_its_classes_together():
    probs = [[0.2, 0.5, 0.3], [0.7, 0.2, 0.1]]
    assert confidence(probs, [1, 0], [0, 1, 1]).tolist() == pytest.approx([0.8, 0.7])  # HANS: N + C
    assert confidence(probs, [1, 0]).tolist() == pytest.approx([0.5, 0.7])
    rows = [{"set": "hans", "uid": str(i), "gold": 1, "pred": 1, "probs": p} for i, p in enumerate([[0.1, 0.45, 0.45]] * 4)]
    assert calibration(rows, {"hans": [0, 1, 1]}) == {"ece/hans": pytest.approx(0.1)}
    assert calibration(rows) == {"ece/hans": pytest.approx(0.55)}  # the answer's own class: under-confident


def test_probability_loyalty_is_one_minus_scipys_jensen_shannon_distance():
    """Xu et al. 2021, section 3: probability loyalty 1 - sqrt(JS divergence); their released
    README points to scipy.spatial.distance.jensenshannon for it (natural log)."""
    from scipy.spatial.distance import jensenshannon

    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(3), 50), rng.dirichlet(np.ones(3), 50)
    p[0] = [1.0, 0.0, 0.0]  # a zero probability
    assert js_distance(p, q) == pytest.approx([jensenshannon(a, b) for a, b in zip(p, q, strict=True)], abs=1e-12)
    row = lambda uid, pred, probs, **kw: {"set": "test", "uid": uid, "gold": 0, "pred": pred, "probs": probs, **kw}  # noqa: E731
    dense = [row("a", 0, [0.9, 0.1]), row("b", 1, [0.3, 0.7]), row("c", 1, [0.4, 0.6])]
    assert loyalty(dense, dense) == {"loyalty/test": 1.0, "loyalty_prob/test": pytest.approx(1.0)}
    compressed = [row("a", 0, [0.9, 0.1]), row("b", 0, [0.7, 0.3]), row("z", 0, [0.5, 0.5]),  # z: not in dense
                  {"set": "textfooler", "uid": "a", "gold": 0, "pred": 0, "result": "failed"}]  # attacks: not clean
    got = loyalty(compressed, dense)
    assert got["loyalty/test"] == 0.5 and set(got) == {"loyalty/test", "loyalty_prob/test"}
    assert got["loyalty_prob/test"] == pytest.approx(1 - jensenshannon([0.3, 0.7], [0.7, 0.3]) / 2)


def test_words_are_split_as_textattack_splits_them():
    """The denominator of Words% is TextAttack's word count (``words_from_text``), here without
    importing TextAttack (the leaderboard re-scores without torch): equal on the committed
    studies' attacked texts, original and perturbed, homoglyphs and split words included."""
    from suites.adversarial import summarize, words
    from suites.adversarial.resources import textattack

    split = textattack().shared.utils.words_from_text
    texts = ["it 's a 'charming' and often-affecting journey .", "jonny's bеst ɑlways -- sty lishness @home *wow*",
             "'quoted' \"double\" (paren) end."]
    from bench.store.records import load_predictions, read_records

    records, _ = read_records(ROOT / "results" / "tickets" / "records")
    rows = load_predictions(records[0].where, records[0])
    texts += [t for r in rows if "original" in r for t in (r["original"], r["perturbed"])]
    assert len(texts) > 100 and [words(t) for t in texts] == [split(t) for t in texts]
    attacked = [{"result": "successful", "words_changed": 2, "original": "a b c d", "queries": 5},
                {"result": "successful", "words_changed": 1, "original": "a b", "queries": 5},
                {"result": "failed", "words_changed": 0, "original": "a b", "queries": 5}]
    assert summarize(attacked)["words"] == pytest.approx((0.5 + 0.5) / 2)  # over successful attacks only
    assert "words" not in summarize(attacked[2:])  # no successful attack: no Words%, not a NaN that breaks the contract


def test_flips_are_answers_that_changed_correctness_and_kl_is_from_the_dense_model():
    """Dutta et al. 2024, abstract: flips are answers that change "from correct to incorrect and
    vice versa" against the baseline (a change between two wrong classes is none); KL is the
    divergence of the compressed model's distribution from the baseline's, here KL(dense ||
    candidate) in nats over the classes, probabilities as kept (4 decimals) floored at FLOOR."""
    row = lambda uid, gold, pred, probs: {"set": "test", "uid": uid, "gold": gold, "pred": pred, "probs": probs}  # noqa: E731
    dense = [row("a", 0, 0, [0.8, 0.1, 0.1]), row("b", 1, 0, [0.6, 0.3, 0.1]), row("c", 2, 0, [0.5, 0.2, 0.3]),
             row("d", 0, 0, [1.0, 0.0, 0.0]), row("e", 2, 2, [0.1, 0.1, 0.8])]
    cand = [row("a", 0, 1, [0.2, 0.7, 0.1]),  # right -> wrong
            row("b", 1, 1, [0.2, 0.7, 0.1]),  # wrong -> right
            row("c", 2, 1, [0.3, 0.6, 0.1]),  # wrong -> another wrong: no flip
            row("d", 0, 0, [0.9999, 0.0, 0.0001]),
            row("e", 2, 0, [0.5, 0.1, 0.4])]  # right -> wrong
    got = flips(cand, dense)
    assert got["flips/test"] == pytest.approx(3 / 5)
    assert got["flips_cw/test"] == pytest.approx(2 / 5) and got["flips_wc/test"] == pytest.approx(1 / 5)
    assert 1 - loyalty(cand, dense)["loyalty/test"] == pytest.approx(4 / 5)  # answers that changed: more than the flips

    def kl(p, q):
        p, q = np.maximum(p, FLOOR), np.maximum(q, FLOOR)
        p, q = p / p.sum(), q / q.sum()
        return float(np.sum(p * np.log(p / q)))

    from scipy.stats import entropy
    want = np.mean([kl(np.array(d["probs"]), np.array(c["probs"])) for d, c in zip(dense, cand, strict=True)])
    assert got["kl/test"] == pytest.approx(want)
    assert entropy([0.8, 0.1, 0.1], [0.2, 0.7, 0.1]) == pytest.approx(kl(np.array([0.8, 0.1, 0.1]), np.array([0.2, 0.7, 0.1])))
    assert np.isfinite(got["kl/test"])  # d: a kept 0 where the dense model has mass
    assert flips(dense, dense)["kl/test"] == pytest.approx(0.0) and flips(dense, dense)["flips/test"] == 0.0


def test_a_run_records_calibration_and_loyalty_and_a_tampered_one_is_a_mismatch(runner, run_spec, capsys, monkeypatch):
    """A pruned candidate's evaluation runs its baseline's first (the plan's dependency, and
    the runner's), records ECE per set and loyalty to that baseline's rows, and re-scores
    exactly, reading each record's rows once and the baseline's once more; an edited loyalty
    is a mismatch."""
    import bench.core.rescore as rescoring

    rec = runner.run(run_spec("imp", sparsity=0.5, params={"epochs": 1, "batch_size": 8}))
    assert {"ece/test", "ece/hans_synth", "loyalty/test", "loyalty_prob/test", "loyalty/hans_synth",
            "flips/test", "flips_cw/test", "flips_wc/test", "kl/test"} <= set(rec.metrics)
    assert rec.details["collapse"] == {"hans_synth": [0, 1, 1]}
    assert any(c["key"] == "loyalty/test" and c["table"] == "calibration and loyalty" for c in rec.columns)
    dense = load_record(runner.out / "records" / f"{rec.reference}.json")
    assert "loyalty/test" not in dense.metrics and "ece/test" in dense.metrics  # its own baseline: no loyalty
    read, load = [], rescoring.load_predictions
    monkeypatch.setattr(rescoring, "load_predictions", lambda d, r: read.append(r.run_id) or load(d, r))
    assert all(r.status == "exact" for r in rescore(runner.out))
    assert sorted(read) == sorted([rec.run_id, dense.run_id, dense.run_id])  # its own rows, the baseline's and its loyalty's
    path = runner.out / "records" / f"{rec.run_id}.json"
    data = json.loads(path.read_text())
    data["metrics"]["loyalty/test"] -= 0.01
    path.write_text(json.dumps(data))
    assert main(["rescore", str(runner.out)]) == 2
    assert "loyalty/test: recorded" in capsys.readouterr().out


def test_an_attack_evaluation_depends_on_its_baselines(run_spec):
    from bench.spec.plan import plan

    jobs = plan([run_spec("imp", suite="adversarial", sparsity=0.5)])
    evaluations = [j for j in jobs.values() if j.kind == "evaluate"]
    assert sorted(j.spec.method for j in evaluations) == ["finetune", "imp"]  # the dense model's attack first
    imp = next(j for j in evaluations if j.spec.method == "imp")
    assert next(j.id for j in evaluations if j.spec.method == "finetune") in imp.deps


def test_schema_2_records_get_the_metrics_of_their_rows_and_rescore(tmp_path, capsys):
    """``bench migrate`` from schema 2: ECE (HANS's answers summed over neutral and
    contradiction), loyalty to the baseline's record and Words% added from the kept rows,
    nothing replaced, and the folder re-scores."""
    from bench.core.upgrade import COLLAPSE_V2
    from bench.data.tasks.glue import load_hans
    from bench.data.tasks.synthetic import SyntheticNLI

    shutil.copytree(ROOT / "results" / "quickstart", tmp_path / "q")
    for p in (tmp_path / "q" / "records").glob("*.json"):  # as the committed study was before schema 3
        d = json.loads(p.read_text())
        added = d["provenance"]["migrated"].pop("added_from_predictions")
        for k in added:
            d["metrics"].pop(k)
        d["details"].pop("collapse", None)
        d["columns"] = [c for c in d["columns"] if c["key"] not in added]
        d["schema_version"] = 2
        p.write_text(json.dumps(d))
    before = {p.name: json.loads(p.read_text()) for p in (tmp_path / "q" / "records").glob("*.json")}
    assert main(["rescore", str(tmp_path / "q")]) == 2
    assert "schema 2; rewrite its folder with: python -m bench migrate" in capsys.readouterr().out
    assert main(["migrate", str(tmp_path / "q")]) == 0
    assert "20 records rewritten, 0 already current" in capsys.readouterr().out
    for name, d in before.items():
        after = json.loads((tmp_path / "q" / "records" / name).read_text())
        assert {k: after["metrics"][k] for k in d["metrics"]} == d["metrics"]  # nothing replaced
        assert after["metrics"] == json.loads((ROOT / "results" / "quickstart" / "records" / name).read_text())["metrics"]
    assert main(["rescore", str(tmp_path / "q")]) == 0
    # the rule for schema-2 sets is what the built-in definitions say
    (tmp_path / "data" / "hans").mkdir(parents=True)
    (tmp_path / "data" / "hans" / "hans_eval.jsonl").write_text("")  # found, not read: the set reads it when evaluated
    assert list(load_hans(tmp_path / "data").collapse) == COLLAPSE_V2["hans"]
    assert list(SyntheticNLI().load(None).ood["hans_synth"].collapse) == COLLAPSE_V2["hans_synth"]
