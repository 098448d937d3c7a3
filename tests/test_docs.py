"""Generated pages stay in step with the code: the registry reference and the README's headline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_reference_page_is_what_bench_ls_prints():
    # a fresh process: plug-ins other tests install in-process must not leak into the page
    out = subprocess.run([sys.executable, "-m", "bench", "ls", "--markdown"], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert (ROOT / "docs" / "reference.md").read_text() == out.stdout, (
        "docs/reference.md is out of date: python -m bench ls --markdown > docs/reference.md")


def test_the_readme_headline_and_studies_are_generated_from_the_committed_records():
    from leaderboard.headline import generate

    readme = (ROOT / "README.md").read_text()
    assert generate(readme, ROOT / "results") == readme, (
        "README.md's headline or studies table is out of date: bench headline")


def test_the_studies_table_groups_verdicts_without_their_detail():
    """The README's studies table counts verdicts by the rule's row: "not tested: <why>",
    "inconclusive (k seeds)" and "underpowered (MDE x pts)" each count as one kind."""
    from leaderboard.claims import RULE
    from leaderboard.headline import _group

    class Decided:  # a claims result as far as the grouping reads it
        def __init__(self, row: int):
            self.row = row

    assert [_group(Decided(row)) for row, _, _ in RULE] == [verdict for _, verdict, _ in RULE]
    assert _group(Decided(8)) == "underpowered" and _group(Decided(1)) == "not tested"


def test_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 10_000
    for page in ("docs/reference.md", "docs/usage.md", "docs/install.md", "docs/architecture.md"):
        assert f"]({page})" in readme and (ROOT / page).is_file()


def test_ci_runs_the_readme_s_second_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()[-1]
    assert ci.startswith("python3 -m venv .venv && ") and ci in readme


def test_the_usage_page_lists_every_spec_with_the_jobs_it_plans():
    import re

    from bench.spec.plan import plan
    from bench.spec.sweep import load_spec, runs

    rows = dict(re.findall(r"^\| `sweeps/(\w+)\.toml` \|.*\| (\d+) jobs", (ROOT / "docs" / "usage.md").read_text(), re.M))
    specs = {p.stem for p in (ROOT / "sweeps").glob("*.toml")} - {"conformance", "quickstart"}  # quickstart: the README's
    assert set(rows) == specs, "docs/usage.md's table of specs and sweeps/ differ"
    for name, n in rows.items():
        planned = len(plan(list(runs(load_spec(ROOT / "sweeps" / f"{name}.toml"), check_backbones=False))))
        assert planned == int(n), f"docs/usage.md says {n} jobs for {name}; --dry-run plans {planned}"
