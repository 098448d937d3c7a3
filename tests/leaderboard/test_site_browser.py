"""The site in a real browser: headless Chromium (the system's; ``.ci/run`` installs it) opens
the committed pages and a locally built site with its example browser from file://, with no
console error and no request leaving the site. A reader finds the rows in rank order, one legend
that tells a sort from a significance mark, label names in the examples, a failed attack said to
be one, a compare view whose paired difference is the claims rule's, and no horizontal scroll at
390 px; a record whose every text holds markup runs no script. Screenshots go to test-artifacts/."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from leaderboard.evidence import check
from leaderboard.pairing import metric_value, paired
from leaderboard.sections import sections
from leaderboard.site import SITE, write_site
from leaderboard.stats import crossed
from leaderboard.table import main
from tests.leaderboard.studies import one_record

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / SITE
ARTIFACTS = ROOT / "test-artifacts"
STUDIES = sorted({p.parent.name for p in (ROOT / "results").glob("*/findings.md")}
                 | {p.parent.name for p in (ROOT / "results").glob("*/studies.toml")})
MARKUP = '<img src=x onerror="alert(1)">'


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no chromium on this machine (.ci/run installs Debian's): the browser tests need it")
    pytest.importorskip("playwright.sync_api", reason="playwright is one of the test extras")
    return path


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    path = _chromium()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The tickets and quickstart studies as ``bench site`` builds them locally: with the browser."""
    to = tmp_path_factory.mktemp("site") / "site"
    write_site([ROOT / "results" / "tickets", ROOT / "results" / "quickstart"], to)
    return to


def _open(browser, page_path: Path, width: int = 1400):
    """A page, with every console error, every dialog and every request that is not a file of
    the repository or of the site recorded."""
    page = browser.new_page(viewport={"width": width, "height": 1000})
    seen = {"errors": [], "outside": [], "dialogs": []}
    page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    inside = (f"file://{ROOT}", f"file://{page_path.parents[1]}")
    page.on("request", lambda r: seen["outside"].append(r.url) if not r.url.startswith(inside) else None)
    page.goto(page_path.as_uri())
    return page, seen


@pytest.mark.parametrize("study", STUDIES)
def test_every_committed_page_loads_offline_in_rank_order_and_fits_390_px(browser, study):
    page, seen = _open(browser, COMMITTED / study / "index.html")
    for table in page.locator("section.study table.t-main").all():
        ranks = table.evaluate("t => Array.from(t.tBodies[0].rows).filter(r => r.dataset.row).map(r => r.cells[0].dataset.v)")
        firsts = [float(r) for r in ranks if r]
        assert firsts == sorted(firsts) and (not firsts or ranks[:len(firsts)] == [r for r in ranks if r])  # ranked first
    assert seen == {"errors": [], "outside": [], "dialogs": []}
    page.close()
    page, seen = _open(browser, COMMITTED / study / "index.html", width=390)
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    assert seen["errors"] == []
    page.close()


def test_one_legend_tells_direction_sort_and_significance_apart(browser, built):
    page, seen = _open(browser, built / "tickets" / "index.html")
    assert page.locator("#legend").count() == 1
    legend = page.locator("#legend").inner_text()
    for words in ("higher / lower is better", "▲ / ▼", "They never mean a sort", "⚠ DEGENERATE", "⚠ partial collapse",
                  "⚠ measured under load", "successful attack", "failed attack", "skipped"):
        assert words in legend, words
    table = page.locator("section.study table.t-main").first
    header = table.locator("th", has_text="TextFooler Aua%")
    assert header.locator(".dir").inner_text() == "↑"  # its direction
    header.click()
    after = header.evaluate("th => getComputedStyle(th, '::after').content")
    assert "sorted low → high" in after and "▲" not in after and "▼" not in after  # the sort, drawn apart
    assert seen["errors"] == []
    page.close()


def test_examples_load_when_opened_with_label_names_and_a_failed_attack_explained(browser, built):
    page, seen = _open(browser, built / "tickets" / "index.html")
    assert page.evaluate("(window.BENCH_PARTS || []).length") == 0  # nothing loaded with the page
    page.locator("section.study details.examples summary").first.click()
    page.wait_for_selector(".example")
    page.fill("section.study .f-method", "robust ticket")  # the table's filter
    assert 0 < page.locator("section.study table.t-main tbody tr:not([hidden])").count() < 9
    page.select_option("section.study .x-result", "successful")
    example = page.locator(".example.successful").first
    new, old = example.locator("mark.new").first, example.locator("del.old").first
    assert new.is_visible() and old.is_visible() and new.inner_text().strip() and new.inner_text() != old.inner_text()
    meta = example.locator(".meta").all_inner_texts()
    assert re.search(r"gold (negative|positive)", meta[0]) and re.search(r"went from (negative|positive) to (negative|positive)", meta[1])
    ARTIFACTS.mkdir(exist_ok=True)
    example.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "site-tickets.png"))
    page.select_option("section.study .x-result", "failed")
    shown = page.locator(".example.failed").evaluate_all(
        "xs => xs.map(x => [x.querySelectorAll('.meta')[1].textContent, Array.from(x.querySelectorAll('mark.new'))"
        ".map(m => m.textContent.split(' ').length).reduce((a, b) => a + b, 0)])")
    said = [(re.fullmatch(r"failed: the answer stayed (negative|positive) \(\d+ queries\); the perturbed text is the "
                          r"attack's last try, (\d+) words changed", text), marks) for text, marks in shown]
    assert shown and all(m for m, _ in said), shown[:2]  # a failed attack says so, with its label names
    assert all(int(m.group(2)) >= marks for m, marks in said) and any(int(m.group(2)) > 0 for m, _ in said)
    view = page.locator("section.study div.compare").first  # two candidates: where their attacks ended apart
    view.locator(".c-a").select_option("0")
    view.locator(".c-b").select_option("5")
    view.locator(".c-load").click()
    said = view.locator(".c-examples p").first.inner_text()
    assert re.match(r"[1-9]\d* attacked examples where the attack's result differs", said), said
    pair = view.locator(".c-examples .example").evaluate_all("xs => xs.slice(0, 2).map(x => x.className)")
    assert len(pair) == 2 and pair[0] != pair[1]  # A's outcome, then B's other one
    assert seen == {"errors": [], "outside": [], "dialogs": []}
    page.close()


def test_the_compare_view_shows_the_claims_rules_paired_difference(browser, built):
    records = check([ROOT / "results" / "quickstart" / "records"]).records
    sec = sections(records)[0]
    rows = [r.candidate for r in main(sec).rows if r.candidate is not None]
    a, b = rows[0], rows[1]  # the two best-ranked rows: both ranked, so the site tests them
    col = sec.primary
    seeds = [s for s in sorted(set(a.seeds) & set(b.seeds))
             if metric_value(a, s, col.key) is not None and metric_value(b, s, col.key) is not None]
    pairing = paired(a, b, col.key, col.rows, seeds)  # as ``leaderboard.claims`` measures a claim
    deltas = [metric_value(a, s, col.key) - metric_value(b, s, col.key) for s in pairing.seeds]
    want = crossed(deltas, pairing.example_deltas, 0.95, clusters=pairing.clusters, strata=pairing.strata)

    page, seen = _open(browser, built / "quickstart" / "index.html")
    view = page.locator("div.compare").first
    view.locator(".c-a").select_option("0")
    view.locator(".c-b").select_option("1")
    said = view.locator(".diff").inner_text()
    got = re.search(r"A − B on .*?: (-?[\d.]+) points, 95 % interval \[(-?[\d.]+), (-?[\d.]+)\]", said)
    assert got, said
    assert [float(x) for x in got.groups()] == pytest.approx([100 * want.mean, 100 * want.low, 100 * want.high], abs=0.006)
    side = view.locator("table.side").inner_text()
    assert a.name in side and b.name in side  # their cells side by side
    view.locator(".c-b").select_option("0")
    view.locator(".c-a").select_option("1")  # B - A: the same test, the other sign
    assert f"{-100 * want.mean:.2f} points" in view.locator(".diff").inner_text()
    assert seen["errors"] == []
    page.close()


def test_a_record_whose_every_text_holds_markup_runs_no_script(browser, tmp_path):
    """Every string of a record (but the ids that name its files and the declared kinds the schema
    enumerates) holds markup; its number fields cannot (the schema refuses them, test_trust.py)."""
    out = tmp_path / "hostile"
    target, data = one_record("adversarial", out)
    keep = {"predictions", "predictions_sha256", "run_id", "kind"}

    def marked(x, key=""):
        if isinstance(x, dict):
            return {k: v if k in keep else marked(v, k) for k, v in x.items()}
        if isinstance(x, list):
            return [marked(v, key) for v in x]
        return x + MARKUP if isinstance(x, str) else x

    target.write_text(json.dumps(marked(data)))
    write_site([out], tmp_path / "site")
    page, seen = _open(browser, tmp_path / "site" / "hostile" / "index.html")
    for d in page.locator("details").all():
        d.evaluate("d => { d.open = true; d.dispatchEvent(new Event('toggle')); }")
    page.wait_for_selector(".example")
    assert page.locator("img:not(.plot)").count() == 0 and MARKUP in page.locator("body").inner_text()
    assert seen["dialogs"] == [] and seen["errors"] == []
    page.close()


def test_the_browser_shows_certified_examples_with_their_votes(browser, run_spec, runner, tmp_path):
    spec = run_spec("finetune", "certified", suite_params={"smoothing": "ranmask", "n": 6, "samples": 20, "select": 5})
    runner.run(spec)
    write_site([runner.out], tmp_path / "site")
    page, seen = _open(browser, tmp_path / "site" / runner.out.name / "index.html")
    page.locator("section.study details.examples summary").first.click()
    page.wait_for_selector(".c-list .example")
    shown = page.locator(".c-list .example .meta").first.inner_text()
    assert re.search(r"gold (entailment|neutral|contradiction); smoothed answer (entailment|neutral|contradiction): "
                     r"selection votes entailment \d+, neutral \d+, contradiction \d+; \d+ of 20 fresh samples", shown), shown
    assert page.locator(".c-list .example").count() == 6
    page.select_option(".c-verdict", "not certified")
    assert all("certified against" not in t for t in page.locator(".c-list .example .meta").all_inner_texts())
    assert seen["errors"] == [] and seen["dialogs"] == []
    page.close()
