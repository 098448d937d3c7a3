"""Claims tables: every verdict follows from the records by the stated rule, and each committed
findings page holds the table its records give today."""

from pathlib import Path

import pytest

from bench.core.records import write_predictions
from leaderboard.claims import START, Claim, Select, load_claims, main, measure, splice, study_table
from tests.leaderboard.test_build import _rec

ROOT = Path(__file__).resolve().parents[2]
STUDIES = sorted(p.parent for p in (ROOT / "results").glob("*/claims.toml"))


def _claim(direction="higher", label="new (ce)") -> Claim:
    return Claim(paper="Someone 2020, table 1", claim="new beats old", published="60 -> 70", metric="ood/hans_synth",
                 candidate=Select(label), reference=Select("finetune (ce)"), direction=direction)


def _study(tmp_path, seeds, new_right, old_right=50):
    """Two candidates on 100 HANS-like examples per seed; ``new_right[i]`` of seed i are right."""
    out, recs = tmp_path / "out", []
    for seed in range(seeds):
        for label, right in (("finetune (ce)", old_right), ("new (ce)", new_right[seed])):
            r = _rec(label, seed, None, 0.9, right / 100, 1.0)
            rows = [{"set": "hans_synth", "uid": f"u{i}", "gold": i % 2, "pred": 0, "correct": i < right} for i in range(100)]
            r.predictions, r.predictions_sha256 = write_predictions(out, r.run_id, rows)
            r.where = out / "records"
            recs.append(r)
    return recs


@pytest.mark.parametrize(("new_right", "direction", "verdict"), [
    ([70, 72, 68, 71, 69], "higher", "reproduced"),
    ([70, 72, 68, 71, 69], "lower", "opposite"),
    ([50, 51, 49, 50, 50], "higher", "not at this scale"),
    ([90, 48, 92, 47, 89], "higher", "varies by seed"),  # big on three seeds, nothing on two
    ([70, 72, 68], "higher", "inconclusive (3 seeds)"),
])
def test_the_verdict_follows_the_rule(tmp_path, new_right, direction, verdict):
    recs = _study(tmp_path, len(new_right), new_right)
    (res,) = measure([_claim(direction)], recs)
    assert res.verdict == verdict
    assert res.pairs == 100 * len(new_right)


def test_a_missing_or_degenerate_side_is_not_tested(tmp_path):
    recs = _study(tmp_path, 5, [70] * 5)
    (res,) = measure([_claim(label="absent (ce)")], recs)
    assert res.verdict == "not tested: no records of absent (ce)"
    for r in recs:
        if r.label == "new (ce)":
            r.degenerate = "predicts one class for 99 % of the test set"
    (res,) = measure([_claim()], recs)
    assert res.verdict.startswith("not tested: new (ce) did not learn the task")


def test_a_gold_filter_pairs_only_those_examples(tmp_path):
    recs = _study(tmp_path, 5, [70] * 5)
    import dataclasses

    (res,) = measure([dataclasses.replace(_claim(), gold=(1,))], recs)
    assert res.pairs == 5 * 50


def test_a_malformed_claims_file_is_one_line(tmp_path, capsys):
    (tmp_path / "claims.toml").write_text('[[claim]]\npaper = "x"\n')
    assert main([str(tmp_path)]) == 2
    assert "claim 1 is malformed" in capsys.readouterr().err
    (tmp_path / "claims.toml").write_text('[[claim]]\npaper="p"\nclaim="c"\npublished="1"\nmetric="m"\n'
                                          'candidate={label="a"}\nreference={label="b"}\ndirection="up"\n')
    with pytest.raises(Exception, match="direction must be"):
        load_claims(tmp_path / "claims.toml")
    for bad, message in (('{label="a", sparsity="50%"}', "sparsity must be a fraction"),
                         ('{label="a", sparsity=50}', "sparsity must be a fraction")):
        (tmp_path / "claims.toml").write_text('[[claim]]\npaper="p"\nclaim="c"\npublished="1"\nmetric="m"\n'
                                              f'candidate={bad}\nreference={{label="b"}}\ndirection="higher"\n')
        assert main([str(tmp_path)]) == 2
        assert message in capsys.readouterr().err
    (tmp_path / "claims.toml").write_text('[[claim]]\npaper="p"\nclaim="c"\npublished="1"\nmetric="m"\ngold="1"\n'
                                          'candidate={label="a"}\nreference={label="b"}\ndirection="higher"\n')
    assert main([str(tmp_path)]) == 2
    assert "gold must be a list" in capsys.readouterr().err


def test_seeds_without_kept_predictions_do_not_count_toward_a_verdict(tmp_path):
    """Five seeds of metrics, but predictions only for seed 0: one seed pairs its examples, so the
    verdict is inconclusive (1 seed), not a 5-seed finding resting on one seed's examples."""
    recs = _study(tmp_path, 5, [90] * 5)
    for r in recs:
        if r.seed != 0:
            r.predictions = ""
    (res,) = measure([_claim()], recs)
    assert res.seeds == [0] and res.verdict == "inconclusive (1 seed)"


def test_the_table_goes_under_the_title_and_is_replaced_in_place():
    page = splice("# Title\n\nBody.\n", "T1")
    assert page.startswith("# Title\n\n" + START) and page.endswith("Body.\n")
    assert splice(page, "T2").count(START) == 1 and "T2" in splice(page, "T2") and "T1" not in splice(page, "T2")


@pytest.mark.parametrize("study", STUDIES, ids=[s.name for s in STUDIES])
def test_each_committed_claims_table_is_what_its_records_give(study):
    page = (study / "findings.md").read_text()
    assert splice(page, study_table(study)) == page, f"{study.name}: python -m leaderboard.claims {study.relative_to(ROOT)}"


def test_a_claim_on_a_metric_that_is_not_an_accuracy_over_examples_is_refused(tmp_path):
    import dataclasses

    from bench.errors import BenchError

    recs = _study(tmp_path, 5, [70] * 5)
    with pytest.raises(BenchError, match="not an accuracy over named examples"):
        measure([dataclasses.replace(_claim(), metric="f_bias/hans")], recs)


def test_only_seeds_both_sides_have_are_compared(tmp_path):
    recs = _study(tmp_path, 6, [70] * 6)
    recs = [r for r in recs if not (r.label == "finetune (ce)" and r.seed == 5)]
    (res,) = measure([_claim()], recs)
    assert res.seeds == [0, 1, 2, 3, 4] and res.pairs == 500 and len(res.seed_deltas) == 5
