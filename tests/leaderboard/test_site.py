"""The static site (``bench site``): generated from the records like the Markdown tables,
committed under docs/site/ (without the example browser, every file under 1 MB) and checked for
drift; rebuilt after no change it rewrites nothing, and a build that fails leaves the old site.
The real browser's tests are in test_site_browser.py."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bench.cli import main
from leaderboard.site import SITE, write_site

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / SITE
ARTIFACTS = ROOT / "test-artifacts"
STUDIES = sorted({p.parent for p in (ROOT / "results").glob("*/findings.md")}
                 | {p.parent for p in (ROOT / "results").glob("*/studies.toml")})


def _anchored(site: Path, name: Path) -> bytes:
    """A site file's bytes, its links to files outside the site (a record, the findings) made
    absolute: they are relative to where the site was written."""
    path = site / name
    if path.suffix != ".html":
        return path.read_bytes()

    def absolute(m: re.Match) -> str:
        target = (path.parent / m.group(1)).resolve()
        return m.group(0) if target.is_relative_to(site.resolve()) else f"href='{target}'"

    return re.sub(r"href='([^'#]+)'", absolute, path.read_text()).encode()


def test_the_committed_site_is_what_the_records_give(tmp_path):
    write_site(STUDIES, tmp_path / "site", browse=False)
    made = sorted(p.relative_to(tmp_path / "site") for p in (tmp_path / "site").rglob("*") if p.is_file())
    kept = sorted(p.relative_to(COMMITTED) for p in COMMITTED.rglob("*") if p.is_file())
    assert made == kept, "docs/site/ is out of date: python -m bench publish"
    stale = [str(p) for p in made if _anchored(tmp_path / "site", p) != _anchored(COMMITTED, p)]
    assert stale == [], f"docs/site/ is out of date ({stale[:3]}): python -m bench publish"


def test_no_file_of_the_committed_site_reaches_1_mb():
    """The clone stays light: pages, tables and plots; the example browser is built locally."""
    big = [f"{p.relative_to(ROOT)} {p.stat().st_size}" for p in COMMITTED.rglob("*") if p.is_file() and p.stat().st_size > 1_000_000]
    assert big == []
    assert not list(COMMITTED.rglob("examples*")), "the committed site has no example browser (bench site builds it)"


def test_nothing_in_the_site_points_outside_it():
    """No script, style sheet, image or link names another host: the pages work offline."""
    for page in [*COMMITTED.rglob("*.html"), *COMMITTED.rglob("*.js"), *COMMITTED.rglob("*.css")]:
        text = page.read_text()
        for ref in re.findall(r"""(?:src|href)=['"]?([^'" >]+)""", text):
            assert not re.match(r"[a-z]+:", ref), f"{page.relative_to(ROOT)} refers to {ref}"
            path = ref.split("#")[0]
            assert not path or (page.parent / path).resolve().is_file(), f"{page.relative_to(ROOT)}: {ref} is no file"
            inside = (page.parent / path).resolve().is_relative_to(ROOT)
            assert inside, f"{page.relative_to(ROOT)}: {ref} leaves the repository"
        assert not re.search(r"""(?:fetch|XMLHttpRequest|import\()\s*\(?['"]?https?:""", text)


def test_a_folder_that_is_not_a_study_is_one_line(tmp_path, capsys):
    assert main(["site", str(tmp_path), "--to", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert "not a study folder" in err and len(err.strip().splitlines()) == 1


def test_the_site_command_writes_a_study_with_its_example_browser_in_parts(tmp_path, capsys, monkeypatch):
    import leaderboard.browse as browse

    monkeypatch.setattr(browse, "PART_BYTES", 10_000)  # several parts from the 300 attacked examples
    shutil.copytree(ROOT / "results" / "adversarial", tmp_path / "adversarial")
    assert main(["site", str(tmp_path / "adversarial"), "--to", str(tmp_path / "site")]) == 0
    parts = sorted((tmp_path / "site" / "adversarial" / "examples").glob("sst2_minilm-*.js"))
    assert len(parts) > 1 and all(p.stat().st_size <= 10_000 for p in parts[1:])
    pushed = [json.loads(p.read_text().removeprefix("(window.BENCH_PARTS = window.BENCH_PARTS || []).push(").rstrip().rstrip(");"))
              for p in parts]
    attacks = [a for part in pushed for a in part["attacks"]]
    assert len(attacks) == 300 and any(a[7] == "successful" and a[11] for a in attacks)  # with the attack's edits
    assert all(a[3] in part["texts"] for part in pushed for a in part["attacks"])  # each part holds its texts
    assert pushed[0]["labels"][""] == ["negative", "positive"]  # the task's label names
    page = (tmp_path / "site" / "adversarial" / "index.html").read_text()
    assert "python -m bench run --method finetune --suite adversarial --task sst2" in page  # the command of each run
    assert all(f"examples/{p.name}" not in page for p in parts)  # loaded when opened, not with the page


def test_a_rebuild_after_no_change_rewrites_no_file_and_a_failed_one_leaves_the_old_site(tmp_path, monkeypatch):
    import leaderboard.site as site

    write_site([ROOT / "results" / "quickstart"], tmp_path / "site")
    before = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in (tmp_path / "site").rglob("*") if p.is_file()}
    write_site([ROOT / "results" / "quickstart"], tmp_path / "site")
    assert {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in (tmp_path / "site").rglob("*") if p.is_file()} == before

    def broken(*args, **kwargs):
        raise KeyboardInterrupt  # a kill half-way through the pages

    monkeypatch.setattr(site, "study_page", broken)
    with pytest.raises(KeyboardInterrupt):
        write_site([ROOT / "results" / "quickstart"], tmp_path / "site")
    assert {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in (tmp_path / "site").rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["site"]  # no half-built folder left beside it
