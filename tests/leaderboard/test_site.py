"""The static site (``bench site``; issue 71): generated from the records like the Markdown
tables, committed under docs/site/ and checked for drift, and driven in a real browser:
headless Chromium (the system's, ``.ci/run`` installs it) loads the committed site from
file:// with no console error and no request leaving it, a header click sorts the rows, a
filter hides rows and the example browser marks an attack's substitutions. A screenshot is kept
in test-artifacts/."""

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


def test_the_committed_site_is_what_the_records_give(tmp_path):
    write_site(STUDIES, tmp_path / "site")
    made = sorted(p.relative_to(tmp_path / "site") for p in (tmp_path / "site").rglob("*") if p.is_file())
    kept = sorted(p.relative_to(COMMITTED) for p in COMMITTED.rglob("*") if p.is_file())
    assert made == kept, "docs/site/ is out of date: python -m bench publish"
    stale = [str(p) for p in made if (tmp_path / "site" / p).read_bytes() != (COMMITTED / p).read_bytes()]
    assert stale == [], f"docs/site/ is out of date ({stale[:3]}): python -m bench publish"


@pytest.mark.parametrize("study", [s for s in STUDIES if (s / "LEADERBOARD.md").is_file()], ids=lambda s: s.name)
def test_the_site_shows_the_leaderboards_rank_groups(study):
    """The rank groups ("1", "2-4", "3 ▲ (ref)") of a study's Markdown tables are its site page's."""
    import html

    ranks = [cells[0] for line in (study / "LEADERBOARD.md").read_text().splitlines()
             if line.startswith("| ") and (cells := [c.strip() for c in line.strip("|").split("|")])[0][:1].isdigit()]
    page = (COMMITTED / study.name / "index.html").read_text()
    shown = re.findall(r'<tr data-method=[^>]*><td data-v="[^"]*">([^<]*)</td>', page)
    assert sorted(html.unescape(r) for r in shown if r[:1].isdigit()) == sorted(ranks)


def test_nothing_in_the_site_points_outside_it():
    """No script, style sheet, image or link names another host: the pages work offline."""
    for page in [*COMMITTED.rglob("*.html"), *COMMITTED.rglob("*.js"), *COMMITTED.rglob("*.css")]:
        text = page.read_text()
        for ref in re.findall(r"""(?:src|href)=['"]?([^'" >]+)""", text):
            assert not re.match(r"[a-z]+:", ref), f"{page.relative_to(ROOT)} refers to {ref}"
            assert (page.parent / ref).resolve().is_file(), f"{page.relative_to(ROOT)}: {ref} is not in the site"
        assert not re.search(r"""(?:fetch|XMLHttpRequest|import\()\s*\(?['"]?https?:""", text)


def test_a_folder_that_is_not_a_study_is_one_line(tmp_path, capsys):
    assert main(["site", str(tmp_path), "--to", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert "not a study folder" in err and len(err.strip().splitlines()) == 1


def test_the_site_command_writes_a_study(tmp_path, capsys):
    shutil.copytree(ROOT / "results" / "adversarial", tmp_path / "adversarial")
    assert main(["site", str(tmp_path / "adversarial"), "--to", str(tmp_path / "site")]) == 0
    data = (tmp_path / "site" / "adversarial" / "examples.js").read_text()
    examples = json.loads(data.removeprefix("window.BENCH_EXAMPLES = ").rstrip().rstrip(";"))
    attacks = examples["sst2_minilm"]["attacks"]
    assert len(attacks) == 300 and any(a[7] == "successful" and a[11] for a in attacks)  # with the attack's edits
    page = (tmp_path / "site" / "adversarial" / "index.html").read_text()
    assert "python -m bench run --method finetune --suite adversarial --task sst2" in page  # the command of each run


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no chromium on this machine (.ci/run installs Debian's): the browser tests need it")
    pytest.importorskip("playwright.sync_api", reason="playwright is one of the test extras")
    return path


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        yield b
        b.close()


def _open(browser, page_path: Path):
    """A page of the committed site, with every console error and every request that is not
    one of the site's own files recorded."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors, outside = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(f"file://{COMMITTED}") else None)
    page.goto(page_path.as_uri())
    return page, errors, outside


@pytest.mark.parametrize("study", [p.name for p in STUDIES])
def test_every_page_loads_offline_with_no_console_error(browser, study):
    page, errors, outside = _open(browser, COMMITTED / study / "index.html")
    assert page.locator("table.board").count() >= 1 or "posttraining" in study
    assert errors == [] and outside == []
    page.close()


def test_a_header_sorts_a_filter_hides_and_an_attack_is_marked(browser):
    page, errors, outside = _open(browser, COMMITTED / "index.html")
    page.click("text=Robust Tickets on SST-2")  # the index links every study
    page.wait_for_load_state("load")  # the click returns once the navigation commits, before site.js has run
    assert page.url.endswith("/tickets/index.html")
    table = page.locator("section.study table.board").first
    header = table.locator("th", has_text="TextFooler Aua%")
    col = header.evaluate("th => th.cellIndex")
    values = lambda: table.evaluate(  # noqa: E731
        f"t => Array.from(t.tBodies[0].rows).map(r => parseFloat(r.cells[{col}].dataset.v))")
    header.click()
    assert values() == sorted(values()) and values() != []
    header.click()
    assert values() == sorted(values(), reverse=True)
    shown = lambda: table.evaluate("t => Array.from(t.tBodies[0].rows).filter(r => !r.hidden).length")  # noqa: E731
    total = shown()
    page.fill("section.study .f-method", "robust ticket")
    assert 0 < shown() < total
    assert all("robust ticket" in m for m in table.evaluate(
        "t => Array.from(t.tBodies[0].rows).filter(r => !r.hidden).map(r => r.dataset.method)"))
    page.select_option("section.study .f-sparsity", "50%")
    assert shown() == 1
    page.select_option("section.study .x-result", "successful")
    example = page.locator(".example.successful").first
    new, old = example.locator("mark.new").first, example.locator("del.old").first
    assert new.is_visible() and old.is_visible() and new.inner_text().strip() and new.inner_text() != old.inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    example.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "site-tickets.png"), full_page=False)
    assert errors == [] and outside == []
    page.close()
