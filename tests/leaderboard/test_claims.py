"""Claims tables: every verdict follows from the records by the rule of docs/claims.md (a test for
each row), families fix the correction, and each committed findings page holds the table its
records give today."""

import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from bench.cli import main as bench
from bench.errors import BenchError
from bench.store.records import write_predictions
from leaderboard.candidate import BOUNDS
from leaderboard.claims import measure
from leaderboard.claims_file import Claim, Family, Select, load_claims
from leaderboard.claims_table import START, render, splice, study_table
from leaderboard.evidence import checked_records
from leaderboard.sections import sections
from tests.leaderboard.test_build import _rec

ROOT = Path(__file__).resolve().parents[2]
STUDIES = sorted(p.parent for p in (ROOT / "results").glob("*/claims.toml"))


def _claim(direction="higher", label="new (ce)", **kw) -> Claim:
    fields = dict(id="1", paper="Someone 2020, table 1", claim="new beats old", published="60 -> 70",
                  metric="ood/hans_synth", candidate=Select(label), reference=Select("finetune (ce)"),
                  direction=direction, chance=0.5, margin=0.01, smallest_effect=0.01)
    return Claim(**fields | kw)


def _study(tmp_path, new_right, old_right=600, n=1000, stuck=()):
    """Two candidates on ``n`` balanced HANS-like examples per seed: ``new_right[i]`` of seed i
    are right (the first ones), ``old_right`` of the reference's. A label in ``stuck`` answers
    class 0 on every example instead (right exactly where the gold label is 0)."""
    out, recs = tmp_path / "out", []
    for seed, right in enumerate(new_right):
        for label, k in (("finetune (ce)", old_right), ("new (ce)", right)):
            ok = [i % 2 == 0 for i in range(n)] if label in stuck else [i < k for i in range(n)]
            r = _rec(label, seed, None, 0.9, sum(ok) / n, 1.0)
            rows = [{"set": "hans_synth", "uid": f"u{i}", "gold": i % 2, "pred": i % 2 if ok[i] else 1 - i % 2,
                     "correct": ok[i]} for i in range(n)]
            r.predictions, r.predictions_sha256 = write_predictions(out, r.run_id, rows)
            r.where = out / "records"
            recs.append(r)
    return recs


@pytest.mark.parametrize(("new_right", "claim", "verdict", "paper_way"), [
    ([700, 720, 680, 710, 690], {}, "reproduced", 5),
    ([700, 720, 680, 710, 690], {"direction": "lower"}, "opposite", 0),
    ([500, 520, 480, 510, 490], {"direction": "lower", "chance": 0.3}, "reproduced", 5),
    ([610, 610, 610, 610, 610], {"smallest_effect": 0.02}, "too small to matter", 5),  # real, but 1 point < 2
    ([800, 500, 820, 490, 810], {}, "varies by seed", 3),
    ([602, 601, 603, 601, 602], {}, "not reached", 5),  # every seed up, by one to three examples
    ([601, 600, 599, 600, 600], {"direction": "comparable", "smallest_effect": 0.02}, "reproduced", 5),
    ([800, 790, 810, 800, 805], {"direction": "comparable", "smallest_effect": 0.02}, "opposite", 0),
    ([610, 560, 650, 580, 640], {"direction": "comparable", "smallest_effect": 0.02}, "not reached", 1),
    ([700, 720, 680], {}, "reproduced", 3),  # three seeds: a verdict, marked preliminary
    ([700, 720], {}, "inconclusive (2 seeds)", 2),
])
def test_each_row_of_the_verdict_rule(tmp_path, new_right, claim, verdict, paper_way):
    (res,) = measure([_claim(**claim)], _study(tmp_path, new_right))
    assert res.verdict == verdict
    assert res.paper_way == paper_way and res.pairing.n == 1000 * len(new_right)


def test_below_3_seeds_the_table_gives_per_seed_differences_and_no_interval(tmp_path):
    (res,) = measure([_claim()], _study(tmp_path, [700, 720]))
    row = next(line for line in render([res]).splitlines() if line.startswith("| 1 |"))
    assert "+10.0, +12.0 pts (per seed, no interval below 3 seeds)" in row and "interval," not in row


def test_a_side_at_chance_or_answering_one_class_makes_a_claim_not_testable(tmp_path):
    """A 10-point gain over a reference at chance (50 %), or over one answering one class on the
    balanced set, is no evidence for the paper's claim at this scale, whatever its interval."""
    (res,) = measure([_claim()], _study(tmp_path / "a", [600] * 5, old_right=500))
    assert res.verdict == "not testable at this scale" and "finetune (ce): at chance (50.0 %)" in res.untestable
    (res,) = measure([_claim(chance=0.0)], _study(tmp_path / "b", [700, 720, 680, 710, 690], stuck=("finetune (ce)",)))
    assert res.verdict == "not testable at this scale"
    assert "finetune (ce): on hans_synth: seed 0 partial collapse (class 1: 0.0 %); seed 1" in res.untestable
    recs = _study(tmp_path / "c", [700] * 5)
    recs[1].degenerate = "predicts class 0 on 99.0% of 1000 examples"  # the ID test set: did not learn its task
    (res,) = measure([_claim()], recs)
    assert res.verdict == "not testable at this scale" and "did not learn its task (seed 0)" in res.untestable


def test_a_claim_wholly_against_the_paper_reads_opposite_and_counts_its_seeds(tmp_path):
    (res,) = measure([_claim()], _study(tmp_path, [560, 570, 550, 565, 555]))
    assert res.test.high < 0 and res.verdict == "opposite" and res.paper_way == 0


def test_a_missing_side_is_not_tested(tmp_path):
    (res,) = measure([_claim(label="absent (ce)")], _study(tmp_path, [700] * 5))
    assert res.verdict == "not tested: no records of absent (ce)"


def test_the_family_sets_the_level_and_a_later_claim_changes_no_verdict(tmp_path):
    """A family of m claims is judged at 1 - 0.05/m (Bonferroni): a 5-seed effect that passes
    alone fails in a family of 30. Adding a claim (exploratory, or in its own new family) leaves
    every other claim's interval and verdict as they were."""
    recs = _study(tmp_path, [660, 700, 630, 690, 620])
    alone = measure([_claim()], recs)[0]
    family = Family("paper", "before the records", tuple(str(i) for i in range(30)))
    crowded = measure([_claim(family=family)], recs)[0]
    assert alone.verdict == "reproduced" and crowded.verdict == "not reached" and crowded.test.low < 0 < alone.test.low
    assert crowded.test.level == pytest.approx(1 - 0.05 / 30)

    toml = (tmp_path / "claims.toml")
    head = ('[defaults]\nchance = 0.5\nmargin = 0.01\nsmallest_effect = 0.01\n\n[[family]]\nname = "paper"\n'
            'registered = "before the records"\nclaims = ["a", "b"]\n')
    claim = ('\n[[claim]]\nid = "{id}"\npaper = "p"\nclaim = "c {id}"\npublished = "1"\nmetric = "ood/hans_synth"\n'
             'candidate = {{ label = "new (ce)" }}\nreference = {{ label = "finetune (ce)" }}\ndirection = "{d}"\n')
    toml.write_text(head + claim.format(id="a", d="higher") + claim.format(id="b", d="lower"))
    before = [(r.claim.id, r.verdict, r.test) for r in measure(load_claims(toml), recs)]
    toml.write_text(toml.read_text() + claim.format(id="c", d="higher")
                    + '\n[[family]]\nname = "later"\nregistered = "after"\nclaims = ["d"]\n' + claim.format(id="d", d="higher"))
    after = [(r.claim.id, r.verdict, r.test) for r in measure(load_claims(toml), recs)]
    assert after[:2] == before and [a[0] for a in after] == ["a", "b", "c", "d"]
    assert measure(load_claims(toml), recs)[2].claim.family is None  # c: exploratory


def test_a_ratio_claim_compares_the_candidate_with_a_share_of_the_reference(tmp_path):
    """'Keeps 95 % of the full model's accuracy': candidate - 0.95 x reference, seed by seed."""
    recs = _study(tmp_path, [590, 595, 585, 590, 600])
    (res,) = measure([_claim(ratio=0.95, smallest_effect=0.0)], recs)
    assert res.seed_deltas == pytest.approx([0.59 - 0.57, 0.595 - 0.57, 0.585 - 0.57, 0.59 - 0.57, 0.60 - 0.57])
    assert res.verdict == "reproduced"
    (res,) = measure([_claim()], recs)
    assert res.verdict != "reproduced" and res.paper_way == 0  # not above the reference itself


def test_a_gold_filter_pairs_only_those_examples(tmp_path):
    recs = _study(tmp_path, [700] * 5)
    (res,) = measure([dataclasses.replace(_claim(), gold=(1,))], recs)
    assert res.pairing.n == 5 * 500


def test_a_malformed_claims_file_is_one_line(tmp_path, capsys):
    base = '[[claim]]\nid="1"\npaper="p"\nclaim="c"\npublished="1"\nmetric="m"\nchance=0.5\nmargin=0.01\nsmallest_effect=0.01\n'
    (tmp_path / "claims.toml").write_text('[[claim]]\npaper = "x"\n')
    assert bench(["claims", str(tmp_path)]) == 2
    assert "claim 1 is malformed" in capsys.readouterr().err
    for body, message in (
        ('candidate={label="a"}\nreference={label="b"}\ndirection="up"\n', "direction must be one of"),
        ('candidate={label="a", sparsity="50%"}\nreference={label="b"}\ndirection="higher"\n', "sparsity must be a fraction"),
        ('candidate={label="a", sparsity=50}\nreference={label="b"}\ndirection="higher"\n', "sparsity must be a fraction"),
        ('gold="1"\ncandidate={label="a"}\nreference={label="b"}\ndirection="higher"\n', "gold must be a list"),
        ('ratio=1.5\ncandidate={label="a"}\nreference={label="b"}\ndirection="higher"\n', "ratio must be a fraction"),
    ):
        (tmp_path / "claims.toml").write_text(base + body)
        assert bench(["claims", str(tmp_path)]) == 2
        assert message in capsys.readouterr().err
    ok = base + 'candidate={label="a"}\nreference={label="b"}\ndirection="higher"\n'
    for text, message in (
        (ok.replace("chance=0.5\n", ""), "chance must be a fraction"),
        (ok + '\n' + ok, "id must be a non-empty string no other claim has"),
        ('[[family]]\nname="f"\nregistered="r"\nclaims=["1", "9"]\n' + ok, "do not exist: 9"),
        ('[[family]]\nname="f"\nregistered="r"\nclaims=["1"]\n[[family]]\nname="g"\nregistered="r"\nclaims=["1"]\n' + ok,
         "claim 1 is in two families"),
        ('[defaults]\nchanse = 0.5\n' + ok, "[defaults] may set only"),
    ):
        (tmp_path / "claims.toml").write_text(text)
        with pytest.raises(BenchError, match=message.replace("[", r"\[")):
            load_claims(tmp_path / "claims.toml")


def test_seeds_without_kept_predictions_do_not_count_toward_a_verdict(tmp_path):
    """Five seeds of metrics, but predictions only for seed 0: one seed pairs its examples, so the
    verdict is inconclusive (1 seed), not a 5-seed finding resting on one seed's examples."""
    recs = _study(tmp_path, [900] * 5)
    for r in recs:
        if r.seed != 0:
            r.predictions = ""
    (res,) = measure([_claim()], recs)
    assert res.seeds == [0] and res.verdict == "inconclusive (1 seed)"


def test_only_seeds_both_sides_have_are_compared(tmp_path):
    recs = _study(tmp_path, [700] * 6)
    recs = [r for r in recs if not (r.label == "finetune (ce)" and r.seed == 5)]
    (res,) = measure([_claim()], recs)
    assert res.seeds == [0, 1, 2, 3, 4] and res.pairing.n == 5000 and len(res.seed_deltas) == 5


def test_a_claim_on_a_metric_that_is_not_an_accuracy_over_examples_is_refused(tmp_path):
    recs = _study(tmp_path, [700] * 5)
    with pytest.raises(BenchError, match="not an accuracy over named examples"):
        measure([dataclasses.replace(_claim(), metric="f_bias/hans")], recs)


def test_the_table_goes_under_the_title_and_is_replaced_in_place():
    page = splice("# Title\n\nBody.\n", "T1")
    assert page.startswith("# Title\n\n" + START) and page.endswith("Body.\n")
    assert splice(page, "T2").count(START) == 1 and "T2" in splice(page, "T2") and "T1" not in splice(page, "T2")


@pytest.mark.parametrize("study", STUDIES, ids=[s.name for s in STUDIES])
def test_each_committed_claims_table_is_what_its_records_give(study):
    page = (study / "findings.md").read_text()
    assert splice(page, study_table(study)) == page, f"{study.name}: bench claims {study.relative_to(ROOT)}"


PUBLISHED = sorted((ROOT / "results").rglob("LEADERBOARD.md"))
INTERVAL = re.compile(r"± [\d.]+ \[(-?[\d.]+), (-?[\d.]+)\]")


def _tables(markdown: str):
    """Each table of a leaderboard page: its header cells, rows of cells, and the column it is
    ranked by (the section legend's "Rank: by ...", for the main table)."""
    for part in markdown.split("\n## ")[1:]:
        ranked = re.search(r"^Rank: by (.+?), in groups\.", part, re.M)
        for block in part.split("\n\n"):
            lines = [ln for ln in block.splitlines() if ln.startswith("| ")]
            if len(lines) > 1:
                head = [c.strip() for c in lines[0].strip("|").split("|")]
                rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[1:]]
                main = head[0] == "rank" and ranked is not None
                yield head, [r for r in rows if len(r) == len(head)], ranked.group(1) if main else None


@pytest.mark.parametrize("markdown", PUBLISHED, ids=lambda p: p.parent.name)
def test_committed_intervals_stay_in_bounds_and_no_ranked_cell_has_collapsed(markdown):
    """Read off each committed leaderboard as a reader sees it: every interval of a percentage
    that is a share of examples (accuracies, cells, attack rates) lies in [0, 100], and every
    interval of a non-negative quantity (a latency, a throughput, a size, queries, a speed-up) at
    or above 0, in every table of the page; every rank is a group ("3" or "2-5"); and no ranked
    row is flagged degenerate or collapsed in the column it is ranked by (the legend's "Rank:
    by" column)."""
    assert len(PUBLISHED) >= 6
    text = markdown.read_text()
    by_label = {}  # column label -> bounds, from the records the page is built from
    folders = [markdown.parent] if (markdown.parent / "records").is_dir() else [
        (markdown.parent / s).resolve() for s in tomllib.loads((markdown.parent / "studies.toml").read_text())["studies"]]
    for folder in folders:
        for sec in sections(checked_records(folder / "records")):
            by_label |= {c.label: BOUNDS.get(c.kind) for c in sec.columns}
    assert by_label
    for head, rows, primary in _tables(text):
        for row in rows:
            for label, value in zip(head, row, strict=True):
                bounds = by_label.get(label)
                if bounds is not None and (m := INTERVAL.search(value)):
                    lo, hi = float(m.group(1)), float(m.group(2))
                    assert 100 * bounds[0] <= lo <= hi <= 100 * bounds[1], (markdown.parent.name, row[1], label, value)
            if primary in head and row[0][:1].isdigit():
                assert re.fullmatch(r"\d+(-\d+)?( [▲▼])?( \(ref.*\))?", row[0]), row[0]
                assert "DEGENERATE" not in row[1] and "collapse" not in row[head.index(primary)], (row[1], primary)


def test_claims_registered_before_any_record_read_not_tested(tmp_path):
    """A study commits its claims before its first record: its table is written, every claim
    not tested, and a missing records folder is not an error."""
    (tmp_path / "claims.toml").write_text(
        '[defaults]\nchance = 0.5\nmargin = 0.01\nsmallest_effect = 0.01\n'
        '[[claim]]\nid = "1"\npaper = "Someone 2020, table 1"\nclaim = "new beats old"\npublished = "60 -> 70"\n'
        'metric = "id"\ncandidate = { label = "new (ce)" }\nreference = { label = "finetune (ce)" }\ndirection = "higher"\n')
    table = study_table(tmp_path)
    assert "**not tested: no" in table and "new (ce)" in table
