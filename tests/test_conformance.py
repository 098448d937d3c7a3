"""The paper specs and the method defaults that claim a paper follow it, parameter by parameter,
or say why not (sweeps/conformance.toml, rendered to docs/recipes.md)."""

from __future__ import annotations

import pytest

from bench.spec.conformance import PAGE, Check, check, load, markdown


def test_every_paper_value_is_followed_or_the_difference_has_a_reason():
    rows = check(load())
    assert len(rows) >= 60  # an empty table would pass anything
    bad = [f"{r.check.spec} {r.check.method} {r.check.task} {r.check.param}: {r.problem}" for r in rows if r.problem]
    assert not bad, "\n".join(bad)


def test_the_recipes_page_is_generated_from_the_table():
    assert PAGE.read_text() == markdown(check(load())), "docs/recipes.md is out of date: bench conformance"


@pytest.mark.parametrize("check_, problem", [
    (Check("defaults", "rmc", "lam", 0.5, "a made-up paper"), "no reason is declared"),
    (Check("defaults", "rmc", "lam", 0.9, "Du et al. 2023", deviation="stale"), "value is the paper's"),
    (Check("paper_srnet", "finetune", "lr", 5e-5, "Liu et al. 2022, table 3", task="qqp"), "no reason is declared"),
    (Check("paper_srnet", "finetune", "lr", 5e-5, "x", task="sst2"), "no run of the spec matches"),
])
def test_a_difference_without_a_reason_fails(check_, problem):
    (row,) = check([check_])
    assert problem in row.problem


def test_the_paper_specs_keep_no_cpu_sized_deviation_and_estimate_from_a_stated_throughput():
    rows = [r for r in check(load()) if r.check.spec.startswith("paper_")]
    assert {r.check.spec for r in rows} == {"paper_srnet", "paper_robust_tickets", "paper_rmc"}
    cpu = [f"{r.check.spec} {r.check.param}: {r.check.deviation}" for r in rows
           if "cpu" in r.check.deviation.lower() or "budget" in r.check.deviation.lower()]
    assert not cpu, cpu
    from pathlib import Path

    from bench.spec.sweep import load_spec

    for name in ("paper_srnet", "paper_robust_tickets", "paper_rmc"):
        spec = load_spec(Path(__file__).resolve().parents[1] / "sweeps" / f"{name}.toml")
        assert spec.throughput.source and "measured" in spec.throughput.source, name
        assert spec.throughput.train_per_s == 453.0  # docs/performance.md: bert-base on one H200, fp32 (TF32)
