import re
from pathlib import Path

import pytest

from bench.store.records import Column, Record
from leaderboard.build import build
from leaderboard.sections import sections
from leaderboard.stats import fmt, holm, interval, mcnemar

COLUMNS = [Column("id", "ID acc", rows=("test",)).to_dict(),
           Column("ood/hans_synth", "hans_synth", rows=("hans_synth",), primary=True).to_dict(),
           Column("f_bias/hans", "F_bias hans", "ratio", False).to_dict(),
           Column("ood/hans_synth/lexical_overlap/non-entailment", "lexical_overlap/non-entailment",
                  table="hans_synth cells").to_dict()]


def _rec(label, seed, target, idv, ood, fb, params=None, suite="ood"):
    """A record of ``label`` compared with (``baseline``) the finetune (ce) model of its seed."""
    return Record(
        run_id=f"{label}-{seed}-{target}", method=label.split()[0], label=label, params={}, task="nli_synth",
        variant=[f"{k}={v}" for k, v in sorted((params or {}).items())], baseline=f"finetune (ce)-{seed}-None",
        backbone="minilm", seed=seed, suite=suite,
        sparsity={"target": target, "sparsity": target or 0.0, "nonzero_params": 22_000_000, "prunable": 10,
                  "total_params": 22_000_000, "zeros": 0},
        metrics={"id": idv, "ood/hans_synth": ood, "pool/hans": ood, "f_bias/hans": fb,
                 "ood/hans_synth/lexical_overlap/non-entailment": 0.25},
        details={"id_metric": "accuracy", "sizes": {"test": 1000}}, method_info={}, predictions="", reference=None,
        artifact={"key": f"{label}-{seed}-{target}"}, provenance={"data": {"note": "synthetic generator v2, seed 0", "sources": []},
                                 "versions": {"torch": "2.13.0", "transformers": "4.57.6"}, "device": {"name": "cpu"},
                                 "config": {"max_examples": None, "precision": "fp32", "device": "cpu"}},
        columns=COLUMNS,
    )


def _with_predictions(out, label, seed, right, ood=None):
    """A record of ``label`` and ``seed`` whose kept predictions are ``right`` on 100 HANS-like
    examples, linked to the finetune (ce) reference of its seed."""
    from bench.store.records import write_predictions

    r = _rec(label, seed, None, 0.5, sum(right) / 100 if ood is None else ood, 1.0)
    rows = [{"set": "hans_synth", "uid": f"u{i}", "gold": 1, "pred": int(ok), "correct": ok} for i, ok in enumerate(right)]
    r.predictions, r.predictions_sha256 = write_predictions(out, r.run_id, rows)
    r.reference = f"finetune (ce)-{seed}-None"
    r.where = out / "records"
    return r


def test_mean_sample_std_and_a_labelled_interval_only_from_three_seeds():
    import numpy as np
    from scipy import stats

    assert fmt([0.5]) == "50.0"
    assert fmt([0.5, 0.7]) == "60.0 ± 14.1"  # two seeds: no interval
    assert fmt([]) == "–"
    assert fmt([0.6, 0.6, 0.6]) == "60.0 ± 0.0 [60.0, 60.0]"
    vals = [0.61, 0.70, 0.64, 0.58]
    lo, hi = interval(vals)
    half = stats.t.ppf(0.975, 3) * np.std(vals, ddof=1) / 2  # Student t, n - 1 = 3 degrees of freedom
    assert (lo, hi) == pytest.approx((np.mean(vals) - half, np.mean(vals) + half))
    assert hi - lo > max(vals) - min(vals)  # wider than the min..max a 4-seed percentile bootstrap gives
    many = list(np.linspace(0.5, 0.7, 12))
    b = interval(many)  # 10 or more seeds: BCa bootstrap, not the t-interval
    assert b[0] < np.mean(many) < b[1]
    t_half = stats.t.ppf(0.975, 11) * np.std(many, ddof=1) / np.sqrt(12)
    assert b != pytest.approx((np.mean(many) - t_half, np.mean(many) + t_half), abs=1e-6)


def test_exact_mcnemar_and_holm():
    assert mcnemar(9, 1) == pytest.approx(0.021484375)  # 2 * P(X <= 1), X ~ Bin(10, 1/2)
    assert mcnemar(0, 0) == 1.0
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_pairing_counts_only_the_examples_both_runs_hold():
    """The McNemar counts from the sorted-array merge equal those of pairing example by example,
    also when the two runs hold different, unordered examples, and within a gold-label filter."""
    import random

    from leaderboard.evidence import _arrays, pair

    def counts(uids, x, y):
        return len(uids), int((x & ~y).sum()), int((~x & y).sum())

    rng = random.Random(0)
    mine = {f"u{i}": (rng.random() < 0.6, i % 3, 0, False, "") for i in rng.sample(range(400), 300)}
    base = {f"u{i}": (rng.random() < 0.5, i % 3, 0, False, "") for i in rng.sample(range(400), 250)}
    for golds in ((), (1, 2)):
        keys = [k for k in mine if k in base and (not golds or mine[k][1] in golds)]
        expected = (len(keys), sum(mine[k][0] and not base[k][0] for k in keys),
                    sum(base[k][0] and not mine[k][0] for k in keys))
        a, b = _arrays(mine), _arrays(base)
        assert counts(*pair(*((a.only(golds), b.only(golds)) if golds else (a, b)))) == expected and expected[0] > 50
    assert counts(*pair(_arrays(mine), _arrays(dict(reversed(mine.items()))))) == (300, 0, 0)  # other order


def test_the_errors_by_group_count_each_group_and_gold_label():
    """What the site's OOD error browser shows: examples and wrong answers per group and gold
    label; examples without a group are left out."""
    from leaderboard.evidence import _arrays

    rows = {"a": (True, 0, 0, False, "lexical"), "b": (False, 1, 0, False, "lexical"), "c": (False, 1, 2, False, "lexical"),
            "d": (True, 1, 1, False, "subsequence"), "e": (False, 0, 1, False, "")}
    outcomes = _arrays(rows)
    assert outcomes.errors_by_group() == {("lexical", 0): (1, 0), ("lexical", 1): (2, 2), ("subsequence", 1): (1, 0)}
    assert outcomes.only((1,)).errors_by_group() == {("lexical", 1): (2, 2), ("subsequence", 1): (1, 0)}


def test_published_rows_are_labelled_and_never_averaged():
    from bench.store.references import Reference

    ref = Reference(source="Du et al. 2023, table 4", task="nli_synth", suite="ood", backbone="minilm",
                    label="RMC", sparsity=0.4, metrics={"id": 0.842, "f_bias/hans": 1.049})
    md = build([_rec("finetune (ce)", 0, None, 0.9, 0.6, 1.0), _rec("finetune (ce)", 1, None, 0.8, 0.6, 1.0)],
               references=[ref])
    row = next(ln for ln in md.splitlines() if "| published: RMC (Du et al. 2023, table 4)" in ln)
    assert "84.2" in row and "1.05" in row and "40%" in row and "published" in row.rsplit("|", 2)[1]
    alone = build([], references=[ref])  # no run yet: the published numbers still show
    assert "published numbers only" in alone and "| published: RMC" in alone


def test_one_row_per_method_and_sparsity_with_seeds_aggregated():
    recs = [_rec("finetune (ce)", 0, None, 0.9, 0.6, 1.0), _rec("finetune (ce)", 1, None, 0.8, 0.6, 1.0),
            _rec("imp (ce)", 0, 0.5, 0.85, 0.65, 0.8)]
    md = build(recs)
    assert "## nli_synth — backbone `minilm`" in md and "synthetic generator v2" in md
    rows = [ln for ln in md.splitlines() if "| finetune" in ln or "| imp" in ln]
    assert len(rows) == 6  # two in the main table, the per-cell table and "other metrics"
    main = {ln.split("|")[2].strip(): ln for ln in rows[:2]}
    assert "85.0 ± 7.1 " in main["finetune (ce)"] and "0,1" in main["finetune (ce)"]
    assert "other metrics, nli_synth:" in md and "pool/hans" in md  # undeclared: shown under its own name
    assert "50%" in main["imp (ce)"] and "0.80" in main["imp (ce)"]
    assert "lexical_overlap/non-entailment" in md


def test_runs_with_other_recipes_are_never_averaged_as_seeds():
    recs = [_rec("finetune (ce)", 0, None, 0.9, 0.6, 1.0), _rec("finetune (ce)", 0, None, 0.5, 0.4, 1.0, {"epochs": 1.0})]
    md = build(recs)
    assert "| finetune (ce)  " in md and "| finetune (ce) [epochs=1.0]" in md
    assert not any("±" in ln for ln in md.splitlines() if "| finetune" in ln)


def test_sparsity_plot_is_written_beside_the_markdown_and_linked(tmp_path):
    recs = [_rec("finetune (ce)", 0, None, 0.9, 0.6, 1.0)]
    recs += [_rec("srnet (poe)", seed, s, 0.8 - s / 10 + seed / 100, 0.6, 0.9) for s in (0.2, 0.5, 0.9) for seed in (0, 1)]
    md = build(recs, where=tmp_path / "LEADERBOARD.md")
    png = tmp_path / "plots" / "nli_synth_minilm.png"
    assert png.is_file() and png.read_bytes()[:4] == b"\x89PNG"
    assert "](plots/nli_synth_minilm.png)" in md
    assert not (tmp_path / "plots" / "x.png").exists()


def test_no_two_lines_of_a_plot_look_alike_past_the_colour_cycle():
    from leaderboard.plot import MARKERS, dense_style, style

    colors = [f"C{i}" for i in range(10)]
    n = len(colors) * len(MARKERS)
    assert len({style(i, colors) for i in range(n)}) == n  # the by-task MNLI figure has 30 lines
    assert len({dense_style(j) for j in range(12)}) == 12  # and 5 dense references


def test_no_plot_without_sparse_rows(tmp_path):
    md = build([_rec("finetune (ce)", 0, None, 0.9, 0.6, 1.0)], where=tmp_path / "LEADERBOARD.md")
    assert "plots/" not in md and not (tmp_path / "plots").exists()


def test_sparsity_pattern_heatmap_only_when_matrices_differ(tmp_path):
    from leaderboard.plot import pattern

    names = [f"bert.encoder.layer.{i}.{m}" for i in range(2) for m in
             ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
              "intermediate.dense", "output.dense")]
    grid = pattern({n: k / 12 for k, n in enumerate(names)})
    assert grid.shape == (2, 6) and grid[1, 5] == 11 / 12 and grid[0, 0] == 0
    uniform = _rec("imp (ce)", 0, 0.5, 0.8, 0.6, 1.0)
    uniform.sparsity["per_matrix"] = {n: 0.5 for n in names}
    ticket = _rec("robust ticket (retrained, ce)", 0, 0.5, 0.8, 0.6, 1.0)
    ticket.sparsity["per_matrix"] = {n: k / 12 for k, n in enumerate(names)}
    build([uniform], where=tmp_path / "a" / "LEADERBOARD.md")
    assert not list((tmp_path / "a" / "plots").glob("*_pattern.png"))
    md = build([uniform, ticket], where=tmp_path / "b" / "LEADERBOARD.md")
    assert (tmp_path / "b" / "plots" / "nli_synth_minilm_pattern.png").is_file() and "_pattern.png)" in md


PUBLISHED = sorted((Path(__file__).parents[2] / "results").rglob("LEADERBOARD.md"))


@pytest.mark.parametrize("markdown", PUBLISHED, ids=lambda p: str(p.parent.name))
def test_each_published_leaderboard_is_what_its_committed_records_build(markdown, tmp_path):
    """A leaderboard in the repository is only as trustworthy as the records beside it: every
    committed table must rebuild, cell for cell, from ``<its folder>/records`` (only the
    "Generated ... on <date>" line may differ)."""
    from leaderboard.commands import write as write_leaderboard

    assert len(PUBLISHED) >= 4  # an empty glob would skip this test, not fail it
    assert any((markdown.parent / "records").glob("*.json")) or (markdown.parent / "studies.toml").is_file(), (
        f"{markdown} has no records beside it and no studies.toml naming the studies it is built from")
    path, left_out = write_leaderboard(markdown.parent, tmp_path / "LEADERBOARD.md")
    assert left_out == []  # every committed record is what its predictions give
    rebuilt = path.read_text().splitlines()
    published = markdown.read_text().splitlines()
    assert len(rebuilt) == len(published)
    assert [a for a, b in zip(rebuilt, published, strict=True) if a != b and not a.startswith("Generated from")] == []
    tables = sorted(p.name for p in (markdown.parent / "tables").iterdir())
    assert tables == sorted(p.name for p in (tmp_path / "tables").iterdir()) and tables
    for name in tables:  # the CSV and JSON tables too, byte for byte
        assert (tmp_path / "tables" / name).read_bytes() == (markdown.parent / "tables" / name).read_bytes(), name


def _main_table(section: str) -> list[dict[str, str]]:
    """The rows of a section's main table (its first table, headed by 'rank'), cell by header."""
    lines = section.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("| rank"))
    rows = lines[first:first + next(i for i, ln in enumerate(lines[first:]) if not ln.startswith("|"))]
    header = [h.strip() for h in rows[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in ln.strip("|").split("|")), strict=True)) for ln in rows[2:]]


@pytest.mark.parametrize("markdown", PUBLISHED, ids=lambda p: str(p.parent.name))
def test_each_csv_table_holds_the_numbers_its_markdown_shows(markdown):
    """Every main-table cell of the committed Markdown is its CSV row's mean, sd and interval at
    the Markdown's digits, and the per-seed CSV holds the values they summarise: one set of
    numbers, two formats."""
    import csv
    import json
    import re

    import numpy as np

    from leaderboard.candidate import slug as sections_slug

    checked = 0
    for section in markdown.read_text().split("\n## ")[1:]:
        task, backbone = re.match(r"(\S+) — backbone `([^`]+)`", section).groups()
        folder, slug = markdown.parent / "tables", sections_slug(task, backbone)
        if "published numbers only" in section:
            continue
        meta = json.loads((folder / f"{slug}.json").read_text())
        cols = {c["label"]: c for c in meta["columns"] if c["table"] == "main"}
        rows = {(r["method"], f"{float(r['sparsity_target']):.0%}" if r["sparsity_target"] else ""): r
                for r in csv.DictReader((folder / f"{slug}.csv").open())}
        seeds = list(csv.DictReader((folder / f"{slug}_seeds.csv").open()))
        for cells in _main_table(section):
            if cells["method"].startswith("published:"):
                continue
            row = rows[(cells["method"].split(" ⚠ DEGENERATE")[0], cells["sparsity"] if "%" in cells["sparsity"] else "")]
            for label, col in cols.items():
                if cells.get(label, "–") == "–":
                    continue
                key, d = col["key"], col["digits"]
                shown = f"{float(row[key + ':mean']):.{d}f}"
                shown += f" ± {float(row[key + ':sd']):.{d}f}" if row[key + ":sd"] else ""
                shown += f" [{float(row[key + ':ci_low']):.{d}f}, {float(row[key + ':ci_high']):.{d}f}]" if row[key + ":ci_low"] else ""
                assert cells[label].startswith(shown), (row["method"], label, cells[label], shown)
                values = [float(s[key]) for s in seeds if (s["method"], s["sparsity_target"]) == (row["method"], row["sparsity_target"])
                          and s[key]]
                assert np.mean(values) == pytest.approx(float(row[key + ":mean"]), abs=1e-9)
                checked += 1
    assert checked >= 4


def test_non_zero_parameters_are_counted_alike_for_every_method():
    """SRNet masks the classifier too (its released code): its head zeros are head sparsity, not
    fewer parameters than IMP's at the same sparsity."""
    from leaderboard.candidate import nonzero

    imp, srnet = _rec("imp (ce)", 0, 0.5, 0.8, 0.6, 0.9), _rec("srnet (ce)", 0, 0.5, 0.8, 0.6, 0.9)
    for r in (imp, srnet):
        r.sparsity.update(total_params=1000, zeros=400)
    srnet.sparsity.update(nonzero_params=590, head_sparsity=0.5)  # what the raw count would say
    assert nonzero(imp) == nonzero(srnet) == 600


def test_a_degenerate_seed_marks_its_row_unranked():
    ok, bad = _rec("imp (ce)", 0, 0.5, 0.8, 0.6, 0.9), _rec("imp (ce)", 1, 0.5, 0.5, 0.5, 1.0)
    bad.degenerate = "predicts class 0 on 100.0% of 40 examples"
    md = build([ok, bad])
    row = next(line for line in md.splitlines() if "| imp (ce)" in line)
    assert "DEGENERATE (seed 1" in row and "not ranked" in row
    assert "DEGENERATE" not in build([ok])


def test_one_row_per_candidate_across_suites_with_every_suites_columns():
    ood = _rec("imp (ce)", 0, 0.5, 0.8, 0.6, 0.9)
    adv = _rec("imp (ce)", 0, 0.5, 0.8, 0.6, 0.9, suite="adversarial")
    adv.metrics = {"id": 0.8, "textfooler/aua": 0.3}
    adv.columns = [Column("id", "ID acc").to_dict(), Column("textfooler/aua", "TextFooler Aua%", rows=("textfooler",)).to_dict()]
    adv.provenance = {**adv.provenance, "config": {**adv.provenance["config"], "suite_params": {"n": 100}}}
    md = build([ood, adv])
    header = next(ln for ln in md.splitlines() if ln.startswith("| rank"))
    assert "TextFooler Aua%" in header and "hans_synth" in header
    (main,) = [ln for ln in md.splitlines() if "| imp (ce)" in ln and "| 30.0 " in ln]
    assert "| 60.0 " in main and "| 80.0 " in main  # one row holds both suites' numbers
    assert "suite settings: adversarial: n=100" in md


def test_rank_marks_only_what_a_paired_test_finds(tmp_path):
    """Two candidates better than the reference: one on many examples (▲), one on a handful of
    discordant pairs (no mark). The outcomes come from the records' predictions."""
    recs = []
    for label, rights in (("finetune (ce)", [True] * 50 + [False] * 50), ("big (ce)", [True] * 80 + [False] * 20),
                          ("small (ce)", [True] * 46 + [False] * 4 + [True] * 6 + [False] * 44)):
        for seed in (0, 1, 2):
            right, spread = (rights, 0.0) if label == "finetune (ce)" else (rights[seed:] + rights[:seed], seed / 1000)
            recs.append(_with_predictions(tmp_path, label, seed, right, sum(right) / 100 + spread))  # seeds differ a little
    md = build(recs)
    rank = {ln.split("|")[2].strip(): ln.split("|")[1].strip() for ln in md.splitlines()
            if "(ce)" in ln and ln.startswith("| ") and "±" in ln}
    # big is alone at the top; nothing separates small from the reference, so they share ranks 2-3
    assert rank["big (ce)"] == "1 ▲" and rank["small (ce)"] == "2-3" and rank["finetune (ce)"] == "2-3 (ref)"
    assert "Paired tests against finetune (ce)" in md and "+30.1 (p=" in md and "k=3 seeds, 100 examples) ✓" in md


def test_a_difference_from_one_seed_gets_no_mark(tmp_path):
    """A McNemar test on every seed's examples pooled overstates an effect that varies by seed:
    here the candidate is far better on seed 0 and slightly worse on seeds 1 and 2. Pooled, it
    is significantly better on the examples; over seeds (the unit of analysis) it is not: no ▲,
    no ✓."""
    base = [True] * 50 + [False] * 50
    seed_rights = {0: [True] * 95 + [False] * 5, 1: [True] * 48 + [False] * 52, 2: [True] * 47 + [False] * 53}
    recs = [_with_predictions(tmp_path, label, seed, base if label == "finetune (ce)" else seed_rights[seed])
            for label in ("finetune (ce)", "lucky (ce)") for seed in (0, 1, 2)]
    sec = sections(recs)[0]
    (t,) = sec.tests
    assert mcnemar(t.pairing.b, t.pairing.c) < 0.05 and t.p_holm > 0.05 and not t.significant
    md = build(recs)
    rank = {ln.split("|")[2].strip(): ln.split("|")[1].strip() for ln in md.splitlines()
            if "(ce)" in ln and ln.startswith("| ") and "±" in ln}
    (row,) = [ln for ln in md.split("Paired tests")[1].splitlines() if ln.startswith("| lucky (ce)")]
    assert rank["lucky (ce)"] == "1-2" and row.rstrip(" |").endswith("k=3 seeds, 100 examples)")


def test_the_sparsity_pattern_reads_distilbert_names_too():
    from leaderboard.plot import pattern

    names = [f"distilbert.transformer.layer.{i}.{m}" for i in range(3) for m in
             ("attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin", "ffn.lin1", "ffn.lin2")]
    grid = pattern({n: k / 18 for k, n in enumerate(names)})
    assert grid.shape == (3, 6) and grid[2, 5] == 17 / 18 and grid[1, 4] == 10 / 18


def test_studies_in_several_directories_share_one_table_with_their_paired_tests(tmp_path):
    """One cross-study table per task. The quickstart's records split over two
    study folders give the quickstart's own leaderboard, paired tests included."""
    import json
    import shutil

    from bench.cli import main

    study = Path(__file__).resolve().parents[2] / "results" / "quickstart"
    for rec in (study / "records").glob("*.json"):
        half = tmp_path / ("a" if json.loads(rec.read_text())["method"] == "finetune" else "b")
        (half / "records").mkdir(parents=True, exist_ok=True)
        (half / "predictions").mkdir(exist_ok=True)
        shutil.copy(rec, half / "records")
        pred = json.loads(rec.read_text())["predictions"]
        shutil.copy((study / "records" / pred).resolve(), half / "predictions")
    out = tmp_path / "both.md"
    assert main(["leaderboard", "--out", str(tmp_path / "a"), "--out", str(tmp_path / "b"), "--output", str(out)]) == 0
    committed = (study / "LEADERBOARD.md").read_text().split("\n## ", 1)[1]
    assert out.read_text().split("\n## ", 1)[1].split("![")[0] == committed.split("![")[0]
    assert "Paired tests" in committed
    assert main(["leaderboard", "--out", str(tmp_path / "a"), "--out", str(tmp_path / "b")]) == 2
    (tmp_path / "both").mkdir()  # a folder naming the studies stands for them: its own LEADERBOARD.md
    (tmp_path / "both" / "studies.toml").write_text('studies = ["../a", "../b"]\n')
    assert main(["leaderboard", "--out", str(tmp_path / "both")]) == 0
    assert (tmp_path / "both" / "LEADERBOARD.md").read_text().split("\n## ", 1)[1] == out.read_text().split("\n## ", 1)[1]
    twice = tmp_path / "twice.md"  # one folder named twice counts its records once
    assert main(["leaderboard", "--out", str(tmp_path / "a"), "--out", str(tmp_path / "a"), "--output", str(twice)]) == 0
    assert f"Generated from {len(list((tmp_path / 'a' / 'records').glob('*.json')))} run records" in twice.read_text()


def test_the_reference_is_the_candidate_the_records_name_as_their_baseline_whatever_its_label():
    """An attack study's records name no F_bias reference, but each names the candidate it is
    compared with (``baseline``): that candidate is the table's reference, whatever its label
    and though every run shares a cap. Records that name none give none, not a label's guess."""
    recs = []
    for label, params in (("teacher (ce)", {}), ("teacher (ce)", {"epochs": 15.0}), ("finetune (ce)", {}), ("imp (ce)", {})):
        r = _rec(label, 0, None if "ce)" in label and "imp" not in label else 0.5, 0.8, 0.5, 1.0, params=params)
        r.run_id += str(params)
        r.artifact, r.baseline = {"key": r.run_id}, "teacher (ce)-0-None{}"
        r.provenance["config"]["max_examples"] = 1000
        recs.append(r)
    ref = sections(recs)[0].reference
    assert ref is not None and ref.name == "teacher (ce) [max_examples=1000]"
    for r in recs:
        r.baseline = None
    assert sections(recs)[0].reference is None


def test_two_equally_plain_references_give_none_not_one_picked_by_sort_order():
    recs = []
    for params in ({"lr": 2e-5}, {"warmup_ratio": 0.0}):
        r = _rec("finetune (ce)", 0, None, 0.8, 0.5, 1.0, params=params)
        r.run_id += str(params)
        r.artifact, r.baseline = {"key": r.run_id}, r.run_id  # each names itself: one link each
        recs.append(r)
    sec = sections(recs)[0]
    assert sec.reference is None and sec.tests == []
    assert "tie as the reference, so no paired tests" in build(recs)


def test_a_seed_difference_without_spread_is_judged_by_its_examples():
    """Metrics over 100 examples move in whole points: +1 on every seed has no spread between
    seeds, and must not read as p = 0; the examples' sampling variance is still there."""
    import numpy as np

    from leaderboard.stats import crossed

    one_example = np.array([1.0] + [0.0] * 99)  # the same example flipped on every seed
    assert crossed([0.01, 0.01, 0.01], one_example).p > 0.3
    assert crossed([0.31 - 0.38, 0.25 - 0.32, 0.07 - 0.14], -one_example).se == pytest.approx(0.01, rel=0.01)
    assert crossed([0.0, 0.0, 0.0], np.zeros(100)).p == 1.0
    spread = np.array([1.0] * 50 + [0.0] * 950)  # 5 points on 1,000 examples
    assert crossed([0.05, 0.06, 0.04, 0.05, 0.07], spread).p < 0.05
    assert crossed([0.05], spread) is None  # one training run: nothing to judge an effect against


def test_the_crossed_interval_counts_both_seeds_and_examples():
    """The standard error is the seeds' spread over sqrt(seeds) and the examples' over
    sqrt(examples), added in quadrature; t with the Welch-Satterthwaite degrees of freedom of the
    two (Satterthwaite 1946, eq. 1): (v_s + v_e)^2 / (v_s^2 / (k - 1) + v_e^2 / (n - 1)), at least
    the smaller and at most their sum; clipped to ±1."""
    import numpy as np
    from scipy import stats

    from leaderboard.stats import crossed

    d = [0.02, 0.05, 0.03, 0.04]
    e = np.array([1.0, 0.0, 0.5, 0.0] * 25)
    t = crossed(d, e, level=0.99)
    v_s, v_e = np.var(d, ddof=1) / 4, np.var(e, ddof=1) / 100
    se, df = np.sqrt(v_s + v_e), (v_s + v_e) ** 2 / (v_s ** 2 / 3 + v_e ** 2 / 99)
    assert t.se == pytest.approx(se) and t.df == pytest.approx(df) and 3 < t.df <= 3 + 99
    assert (t.seed_var, t.example_var, t.seeds, t.clusters) == pytest.approx((v_s, v_e, 4, 100))
    assert (t.low, t.high) == pytest.approx((np.mean(d) - stats.t.ppf(0.995, df) * se, np.mean(d) + stats.t.ppf(0.995, df) * se))
    seeds_only = crossed(d, np.zeros(100))  # no example variance: the seeds' n - 1
    assert seeds_only.df == pytest.approx(3)
    wild = crossed([0.9, -0.9, 0.95], np.zeros(10))
    assert -1.0 <= wild.low and wild.high <= 1.0


def test_a_percentage_interval_stays_inside_its_bounds_and_a_wide_spread_shows_each_seed():
    """The t-interval of 97, 99 and 100 % reaches past 100; intersected with [0, 100] it does not,
    and it still holds the mean printed beside it, however close to a bound the seeds lie. A
    difference of two percentages (``points``) is bounded by ±100, not by 0."""
    from bench.store.records import Column
    from leaderboard.candidate import BOUNDS
    from leaderboard.stats import WIDE_SD

    vals = [0.97, 0.99, 1.0]
    assert interval(vals)[1] > 1.0
    lo, hi = interval(vals, (0.0, 1.0))
    assert 0.0 <= lo < min(vals) and hi == 1.0 and interval(vals)[0] == lo
    assert interval([0.0, 0.0, 0.9], (0.0, 1.0))[0] == 0.0
    near = [1.0, 0.9995, 1.0]
    lo, hi = interval(near, (0.0, 1.0))
    assert lo <= sum(near) / 3 <= hi <= 1.0
    assert interval([-0.05, 0.02, 0.04], BOUNDS["points"])[0] < 0  # a gap may be negative
    legacy = Column.from_dict({"key": "id/gap", "label": "ID easy - hard", "kind": "percent", "table": "ID"})
    assert legacy.kind == "points"  # declared a percentage by records made before ``points``
    assert fmt([0.31, 0.23, 0.31, 0.56, 0.28], bounds=(0.0, 1.0)).endswith("(seeds 31.0 / 23.0 / 31.0 / 56.0 / 28.0)")
    assert "seeds" not in fmt([0.50, 0.52, 0.51], bounds=(0.0, 1.0)) and WIDE_SD == 0.10


def test_an_interval_of_a_non_negative_quantity_stays_at_or_above_zero():
    """Latencies of 2, 3 and 40 ms have a t-interval reaching below 0; a time, a size, a count or
    a speed-up is never negative, so its interval is intersected with [0, inf), as a percentage's
    with [0, 100]; F_bias (``signed``) may be negative and is not bounded. Records made before
    ``signed`` declared F_bias a ratio: they are read as signed."""
    from bench.store.records import Column
    from leaderboard.candidate import BOUNDS

    latencies = [2.0, 3.0, 40.0]
    assert interval(latencies)[0] < 0
    for kind in ("number", "ratio"):
        lo, hi = interval(latencies, BOUNDS[kind])
        assert lo == 0.0 and hi == interval(latencies)[1]
    assert "signed" not in BOUNDS and fmt(latencies, 1.0, 1, BOUNDS["number"]).endswith("[0.0, 68.8]")
    legacy = Column.from_dict({"key": "f_bias/hans", "label": "F_bias hans", "kind": "ratio", "higher_is_better": False})
    assert legacy.kind == "signed"


def test_a_cell_answering_one_class_is_flagged_and_never_ranked(tmp_path):
    """A candidate answering one class on a balanced set is at chance there, whatever its
    accuracy: the cell says so (a partial collapse, its extreme) and the row is not ranked on
    that column."""
    from bench.store.records import write_predictions

    recs = []
    for label, right in (("finetune (ce)", lambda i: i < 70), ("stuck (ce)", lambda i: i % 2 == 0)):
        for seed in (0, 1, 2):
            r = _rec(label, seed, None, 0.8, 0.7 if label == "finetune (ce)" else 0.5, 1.0)
            # gold alternates 0/1; "stuck" is right exactly on gold 0: it answers 0 everywhere
            rows = [{"set": "hans_synth", "uid": f"u{i}", "gold": i % 2, "pred": i % 2 if right(i) else 1 - i % 2,
                     "correct": right(i)} for i in range(100)]
            r.predictions, r.predictions_sha256 = write_predictions(tmp_path, r.run_id, rows)
            r.where = tmp_path / "records"
            recs.append(r)
    md = build(recs)
    row = next(ln for ln in md.splitlines() if ln.startswith("| ") and "stuck (ce)" in ln)  # the main table
    assert "⚠ partial collapse (s0 class 1: 0.0 %; s1 class 1: 0.0 %; s2 class 1: 0.0 %)" in row
    assert row.split("|")[1].strip() == "—"
    ref = next(ln for ln in md.splitlines() if ln.startswith("| ") and "| finetune (ce)" in ln)
    assert "collapse" not in ref and ref.split("|")[1].strip() == "1 (ref)"


def test_tests_that_cannot_mark_a_row_stay_out_of_the_holm_family(tmp_path):
    """A one-seed candidate never gets a mark, so it must not make the 3-seed candidate's
    correction harsher: the 3-seed test is adjusted over itself alone."""
    rights = {"finetune (ce)": [True] * 50 + [False] * 50, "big (ce)": [True] * 80 + [False] * 20,
              "once (ce)": [True] * 90 + [False] * 10}
    recs = [_with_predictions(tmp_path, label, seed, right) for label, right in rights.items()
            for seed in ((0,) if label == "once (ce)" else (0, 1, 2))]
    tests = {t.candidate.label: t for t in sections(recs)[0].tests if t.column.key == "ood/hans_synth"}
    assert tests["big (ce)"].p_holm == tests["big (ce)"].result.p  # a family of one
    assert tests["once (ce)"].p_holm != tests["once (ce)"].p_holm  # NaN: outside the family
    md = build(recs)
    assert "two fixed models: McNemar p=" in md and ", 100 pairs)" in md


def test_a_predictions_file_edited_after_a_first_table_is_still_refused(tmp_path, capsys):
    """Tables share the parse of a run's predictions (one run is in its study's table, the
    by-task one and a claims table), keyed by the record's checksum; the file itself is checked
    against that checksum on every build, so an edit between two builds is not hidden."""
    import gzip
    import json
    import shutil

    from bench.cli import main
    from leaderboard.evidence import PARSED

    study = Path(__file__).resolve().parents[2] / "results" / "quickstart"
    shutil.copytree(study / "records", tmp_path / "records")
    shutil.copytree(study / "predictions", tmp_path / "predictions")
    args = ["leaderboard", "--out", str(tmp_path), "--output", str(tmp_path / "t.md")]
    assert main(args) == 0
    rec = json.loads(sorted((tmp_path / "records").glob("*.json"))[0].read_text())
    assert rec["predictions_sha256"] in PARSED
    pred = (tmp_path / "records" / rec["predictions"]).resolve()
    rows = gzip.decompress(pred.read_bytes()).decode().splitlines()
    first = json.loads(rows[0])
    rows[0] = json.dumps({**first, "pred": (first["pred"] + 1) % 3, "correct": not first["correct"]}, sort_keys=True)
    pred.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode(), mtime=0))
    assert main(args) == 2
    assert "checksum differs" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["edited", "missing"])
def test_a_table_without_paired_tests_still_refuses_a_run_whose_predictions_are_bad(tmp_path, capsys, damage):
    """One run alone is its own reference: no paired test reads its predictions, yet its row is
    a number whose per-example evidence must exist and be the run's."""
    import json
    import shutil

    from bench.cli import main

    study = Path(__file__).resolve().parents[2] / "results" / "quickstart"
    rec = next(p for p in sorted((study / "records").glob("*.json")) if json.loads(p.read_text())["method"] == "finetune")
    (tmp_path / "records").mkdir()
    (tmp_path / "predictions").mkdir()
    shutil.copy(rec, tmp_path / "records")
    pred = tmp_path / "records" / json.loads(rec.read_text())["predictions"]
    shutil.copy((study / "records" / json.loads(rec.read_text())["predictions"]).resolve(), pred.resolve())
    args = ["leaderboard", "--out", str(tmp_path), "--output", str(tmp_path / "t.md")]
    assert main(args) == 0 and "Paired tests" not in (tmp_path / "t.md").read_text()
    if damage == "edited":
        pred.resolve().write_bytes(pred.resolve().read_bytes()[:-8] + bytes(8))
    else:
        pred.resolve().unlink()
    assert main(args) == 2
    (tmp_path / "claims.toml").write_text("")
    assert main(["claims", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert ("checksum differs" if damage == "edited" else "not readable") in err and "Traceback" not in err


def test_one_run_in_two_folders_with_different_results_is_refused(tmp_path):
    import json
    import shutil

    from bench.cli import main

    study = Path(__file__).resolve().parents[2] / "results" / "quickstart"
    rec = sorted((study / "records").glob("*.json"))[0]
    for half in ("a", "b"):
        (tmp_path / half / "records").mkdir(parents=True)
        (tmp_path / half / "predictions").mkdir()
        shutil.copy(rec, tmp_path / half / "records")
        shutil.copy((study / "records" / json.loads(rec.read_text())["predictions"]).resolve(), tmp_path / half / "predictions")
    args = ["leaderboard", "--out", str(tmp_path / "a"), "--out", str(tmp_path / "b"), "--output", str(tmp_path / "t.md")]
    assert main(args) == 0  # the same run twice: counted once
    changed = json.loads((tmp_path / "b" / "records" / rec.name).read_text())
    changed["metrics"]["id"] = 0.0
    (tmp_path / "b" / "records" / rec.name).write_text(json.dumps(changed))
    assert main(args) == 2


def test_the_checkpoint_each_seed_kept_is_shown_beside_its_numbers():
    """Each stage a method names in ``method_info["kept"]`` is a column, in the order first named."""
    early = [_rec("robust_tickets (ce)", s, 0.5, 0.7, 0.6, 1.0) for s in (0, 1)]
    early[0].method_info = {"kept": [["training", 304, 320], ["ticket search", 16, 96]]}
    early[1].method_info = {"kept": [["training", 32, 320], ["ticket search", 96, 96]]}
    dense = _rec("finetune (ce)", 0, None, 0.8, 0.6, 1.0)
    dense.method_info = {"kept": [["training", 64, 480]], "best_step": 1}  # the method's own numbers are not read
    plain = _rec("magnitude (ce)", 0, 0.5, 0.8, 0.6, 1.0)  # records no checkpoint: no row
    md = build(early + [dense, plain])
    table = re.sub(r" +", " ", md.split("Checkpoints kept")[1])  # the Markdown pads its cells
    assert "| robust_tickets (ce) | 50% | s0 304/320, s1 32/320 | s0 16/96, s1 96/96 |" in table
    assert "| finetune (ce) | dense | s0 64/480 | – |" in table
    assert "magnitude" not in table.split("\n\n")[1]
    assert "Checkpoints kept" not in build([plain])
    alone = re.sub(r" +", " ", build([dense, plain]).split("Checkpoints kept")[1])
    assert "| finetune (ce) | dense | s0 64/480 |\n" in alone and "ticket search" not in alone  # no empty column


def test_the_header_names_the_code_behind_the_records_and_counts_dirty_trees():
    """A record made with uncommitted changes has no commit holding its code: each table says
    how many of its records are such, by the commit they started from, and claims no clean tree
    for records that do not say."""
    def line(recs):
        return next(x for x in build(recs).splitlines() if x.startswith("- code:"))

    recs = [_rec("finetune (ce)", s, None, 0.8, 0.6, 1.0) for s in range(3)]
    for r, (commit, dirty) in zip(recs, [("a" * 40, False), ("b" * 40, True), ("b" * 40, True)], strict=True):
        r.provenance["git"] = {"commit": commit, "dirty": dirty}
    assert line(recs) == ("- code: 3 records from 2 git commits; 2 of them with uncommitted changes to tracked files "
                          "(`bbbbbbb` 2) (`provenance.git`)")
    recs[1].provenance["git"]["dirty"] = recs[2].provenance["git"]["dirty"] = False
    assert line(recs[1:]) == ("- code: 2 records from git commit `bbbbbbb`, each with no uncommitted changes to tracked files "
                              "(`provenance.git`)")
    del recs[0].provenance["git"]
    assert line(recs) == "- code: 3 records, 2 from git commit `bbbbbbb` and 1 with no commit recorded (`provenance.git`)"
    recs[0].provenance["git"] = {"commit": "unknown", "dirty": False}  # git_state outside a checkout
    assert line(recs) == "- code: 3 records, 2 from git commit `bbbbbbb` and 1 with no commit recorded (`provenance.git`)"
    assert line(recs[:1]) == "- code: 1 record, none with a commit recorded (`provenance.git`)"
    del recs[2].provenance["git"]["dirty"]  # not said: not claimed clean
    assert line(recs[1:]) == "- code: 2 records from git commit `bbbbbbb` (`provenance.git`)"


@pytest.mark.parametrize("text, says", [("studies = \"../a\"\n", "needs studies = ["), ("studies = [\n", "needs studies = ["),
                                        ("studies = [\"../nowhere\"]\n", "no records/ folder in ../nowhere")])
def test_a_bad_studies_file_is_one_line_and_exit_2(tmp_path, capsys, text, says):
    from bench.cli import main

    (tmp_path / "cross").mkdir()
    (tmp_path / "cross" / "studies.toml").write_text(text)
    assert main(["leaderboard", "--out", str(tmp_path / "cross")]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err and "Traceback" not in err


def _copy_of_one_run(out, *, probs, latency, dirty, flip=False):
    """One run's record in study folder ``out``: ten rows with class probabilities ``probs``,
    a latency, a per-row wall time and adversarial text, a clean or dirty tree, and optionally
    one prediction flipped."""
    from bench.store.records import record_path, write_atomic, write_predictions

    r = _rec("finetune (ce)", 0, None, 0.5, 0.5, 1.0)
    r.metrics["eff/latency_bs1_ms"] = latency
    r.provenance["git"] = {"commit": "abc", "dirty": dirty}
    rows = [{"set": "hans_synth", "uid": f"u{i}", "gold": 1, "pred": int(not (flip and i == 0)), "probs": [1 - probs, probs],
             "seconds": latency / 10, "perturbed": f"took {latency} ms"} for i in range(10)]
    r.predictions, r.predictions_sha256 = write_predictions(out, r.run_id, rows)
    write_atomic(record_path(out, r.run_id), r.to_json())


def test_one_run_in_two_studies_is_one_row_if_only_timings_and_float_noise_differ(tmp_path, monkeypatch, capsys):
    """A run id hashes the whole configuration: a study may hold a run another study made, on
    other cores or thread counts (the RMC study's CPU teacher is the compact study's).
    Timings, an attack's text and the 4th decimal of a probability may differ; a prediction may
    not."""
    import leaderboard.build
    from bench.cli import main

    _copy_of_one_run(tmp_path / "a", probs=0.8160, latency=9.7, dirty=True)
    _copy_of_one_run(tmp_path / "b", probs=0.8159, latency=87.1, dirty=False)
    kept = []
    real = leaderboard.build.build
    monkeypatch.setattr(leaderboard.build, "build", lambda records, **kw: kept.extend(records) or real(records, **kw))
    assert main(["leaderboard", "--out", str(tmp_path / "a"), "--out", str(tmp_path / "b"), "--output",
                 str(tmp_path / "both.md")]) == 0
    assert [r.provenance["git"]["dirty"] for r in kept] == [False]  # once, the copy from a clean tree
    assert "Generated from 1 run records" in (tmp_path / "both.md").read_text()

    _copy_of_one_run(tmp_path / "c", probs=0.8160, latency=9.7, dirty=False, flip=True)
    assert main(["leaderboard", "--out", str(tmp_path / "a"), "--out", str(tmp_path / "c"), "--output",
                 str(tmp_path / "x.md")]) == 2
    assert "with different results: keep one" in capsys.readouterr().err
    _copy_of_one_run(tmp_path / "d", probs=0.8180, latency=9.7, dirty=False)  # 2e-3 apart: not float noise
    assert main(["leaderboard", "--out", str(tmp_path / "a"), "--out", str(tmp_path / "d"), "--output",
                 str(tmp_path / "y.md")]) == 2


def test_a_row_on_another_device_is_paired_with_the_references_run_there(tmp_path):
    """A CUDA seed is not the CPU run of that seed (TF32, other batch order): a CUDA row is
    tested against the reference's CUDA twin, and without one it has no test, rather than a
    difference that mixes the method with the device."""
    half = [True] * 50 + [False] * 50
    most = [True] * 80 + [False] * 20

    def on(dev, label, seed, right):
        r = _with_predictions(tmp_path / dev, label, seed, right)
        r.provenance["config"]["device"] = dev
        r.run_id += f"-{dev}"
        return r

    cpu = [on("cpu", label, s, half) for label in ("finetune (ce)", "imp (ce)") for s in (0, 1, 2)]
    gpu = [on("cuda", label, s, most) for label in ("finetune (ce)", "imp (ce)") for s in (0, 1, 2)]
    sec = sections(cpu + gpu)
    (sec,) = sec
    assert sec.reference.name == "finetune (ce)"
    against = {(t.candidate.name, t.reference.name) for t in sec.tests}
    assert against == {("imp (ce)", "finetune (ce)"), ("imp (ce) [cuda]", "finetune (ce) [cuda]")}
    assert all(t.delta == 0 for t in sec.tests)  # against the CPU reference the CUDA row would be +30
    md = build(cpu + gpu)
    assert "Paired tests against finetune (ce); rows on cuda: against finetune (ce) [cuda], nli_synth" in md
    assert "(ref, cuda)" in md
    lone = sections(cpu + [r for r in gpu if r.label == "imp (ce)"])[0]
    assert [t.candidate.name for t in lone.tests] == ["imp (ce)"]  # no CUDA twin: no test for the CUDA row


def _quickstart_copy(tmp_path: Path) -> Path:
    import shutil

    study = Path(__file__).resolve().parents[2] / "results" / "quickstart"
    shutil.copytree(study / "records", tmp_path / "records")
    shutil.copytree(study / "predictions", tmp_path / "predictions")
    return tmp_path


@pytest.mark.parametrize("key", ["ood/hans_synth", "f_bias/hans", "one_class"])
def test_a_hand_edited_number_is_left_out_listed_and_the_rest_is_written(tmp_path, capsys, key):
    """A metric edited by hand is caught by `bench leaderboard`, not only by `rescore`: each
    record's metrics, F_bias and flags are recomputed from its kept rows first."""
    import json

    from bench.cli import main

    out = _quickstart_copy(tmp_path)
    path = next(p for p in sorted((out / "records").glob("*.json")) if json.loads(p.read_text())["method"] == "imp")
    data = json.loads(path.read_text())
    if key == "one_class":
        data["one_class"] = {"hans_synth": "answers one class on 99 % of it"}
    else:
        data["metrics"][key] += 0.05
    path.write_text(json.dumps(data))
    assert main(["leaderboard", "--out", str(out), "--output", str(out / "t.md")]) == 2
    err = capsys.readouterr().err
    assert f"left out of the leaderboard: record {data['run_id']} is not what its predictions give: {key}" in err
    assert "1 records left out" in err and "Traceback" not in err
    table = (out / "t.md").read_text()
    assert "| imp" in table and "Generated from 19 run records" in table  # the others are all there


def test_an_unreadable_record_is_listed_and_the_others_are_still_tabled_and_rescored(tmp_path, capsys):
    """One unreadable record stopped both `leaderboard` and `rescore`."""
    from bench.cli import main

    out = _quickstart_copy(tmp_path)
    (out / "records" / "broken.json").write_text('{"run_id": "half a rec')
    assert main(["leaderboard", "--out", str(out), "--output", str(out / "t.md")]) == 2
    err = capsys.readouterr().err
    assert "left out of the leaderboard:" in err and "broken.json: not a readable run record" in err
    assert "Generated from 20 run records" in (out / "t.md").read_text()
    assert main(["rescore", str(out)]) == 2
    captured = capsys.readouterr()
    assert "broken.json" in captured.out and "unreadable" in captured.out
    assert "20 re-scored exactly" in captured.out and "1 unreadable" in captured.out


def test_a_speed_measured_under_load_is_flagged_and_never_ranked():
    """A record whose speeds were timed on a contended machine (``timing.under_load``): its timed
    cells say so, the row is not ranked on such a column though its speed-up is the table's
    best, the CSV names the seed and the site sorts the cell with the missing. Its untimed
    numbers (parameters, accuracy) are shown and ranked as ever."""
    import re

    from bench.model.efficiency import TIMED  # the keys a record names as timed
    from leaderboard.export import aggregated
    from leaderboard.site import table_html
    from leaderboard.table import main

    speed = Column("eff/speedup_bs1", "speed-up bs1", "ratio", primary=True).to_dict()
    params = Column("eff/params_m", "params (M)", "number", None).to_dict()
    recs = []
    for label, up in (("fast (ce)", 1.4), ("slow (ce)", 0.9), ("loaded (ce)", 3.0)):
        for seed in (0, 1, 2):
            r = _rec(label, seed, None, 0.8, 0.6, 1.0)
            r.metrics |= {"eff/speedup_bs1": up + seed / 100, "eff/params_m": 22.7}
            r.columns = [speed, params]
            r.timing = {"metrics": list(TIMED), "repeats": 5, "attempts": 1, "under_load": None}
            if label == "loaded (ce)" and seed == 1:
                r.timing |= {"attempts": 3, "under_load": "CPU share 0.61 < 0.8 in each of 3 timed attempts"}
            recs.append(r)
    (sec,) = sections(recs)
    assert [c.label for c in sec.ranked] == ["fast (ce)", "slow (ce)"]
    md = build(recs)
    rows = {ln.split("|")[2].strip(): ln for ln in md.splitlines() if ln.startswith("| ") and "(ce)" in ln}
    loaded = [c.strip() for c in rows["loaded (ce)"].split("|")]
    assert loaded[1] == "—" and "⚠ measured under load (seed 1)" in loaded[4]
    assert "under load" not in loaded[5]  # a parameter count is not timed
    assert all("under load" not in rows[k] and rows[k].split("|")[1].strip() != "—" for k in ("fast (ce)", "slow (ce)"))
    assert "⚠ measured under load (seed 0): that seed's speeds were timed while" in md
    assert "measured under load" not in build([r for r in recs if r.label != "loaded (ce)"])  # no such cell, no legend
    flags = {row["method"]: row["eff/speedup_bs1:under_load_seeds"] for _, row in aggregated(sec).iterrows()}
    assert flags == {"fast (ce)": "", "slow (ce)": "", "loaded (ce)": "1"} and "eff/params_m:under_load_seeds" not in aggregated(sec)
    html = table_html(main(sec))
    assert re.search(r'<td data-v="">3\.01 ± [^<]*<span class=flag>⚠ measured under load', html)
    assert re.search(r'<td data-v="1\.4[0-9]*">1\.41', html)

    for r in recs:  # ranked on accuracy instead: the loaded row's accuracy is ranked, its speed still flagged
        r.columns = [*COLUMNS, {**speed, "primary": False}]
    (sec,) = sections(recs)
    assert "loaded (ce)" in [c.label for c in sec.ranked]
    row = next(ln for ln in build(recs).splitlines() if ln.startswith("| ") and "loaded (ce)" in ln)
    assert row.split("|")[1].strip() != "—" and "⚠ measured under load (seed 1)" in row


def test_a_leaderboard_rebuilt_after_no_change_rewrites_no_file(tmp_path):
    """Markdown, plots and tables are written only where their bytes change: the clone's history
    gains nothing from a rebuild, and ``bench publish`` after no change leaves every file as it was."""
    import shutil

    from bench.cli import main

    study = tmp_path / "quickstart"
    shutil.copytree(Path(__file__).resolve().parents[2] / "results" / "quickstart", study)
    assert main(["leaderboard", "--out", str(study)]) == 0
    stamp = lambda: {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in study.rglob("*") if p.is_file()}  # noqa: E731
    before = stamp()
    assert main(["leaderboard", "--out", str(study)]) == 0
    assert stamp() == before
