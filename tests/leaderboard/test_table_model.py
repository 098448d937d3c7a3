"""One table model (``leaderboard.table``): the Markdown and the site draw the same cells, in the
same order, for every committed table; a name a user gave (a label, an eval file, a backbone
path) shows as text in both, and a path as its name."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from leaderboard.build import build
from leaderboard.evidence import check
from leaderboard.site import SITE, write_site
from tests.leaderboard.studies import one_record

ROOT = Path(__file__).resolve().parents[2]
STUDIES = sorted(p.parent for p in (ROOT / "results").glob("*/LEADERBOARD.md"))
MARKUP = '<img src=x onerror="alert(1)"> | *bold* [a](javascript:alert(1))'


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every table of a Markdown page, as rows of cells with Markdown's backslash escapes undone."""
    tables, current = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [re.sub(r"\\(.)", r"\1", c).strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        if all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        if current is None:
            current = []
            tables.append(current)
        current.append([" ".join(c.split()) for c in cells])
    return tables


VOID = {"br", "img", "input", "meta", "link", "hr", "wbr"}


class _Tables(HTMLParser):
    """The tables of a site page's study sections, as the reader sees their text (a row's runs,
    which the Markdown lists elsewhere, and a header's direction arrow aside)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables, self.cell, self.skip = [], None, 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if self.skip:
            self.skip += tag not in VOID
        elif (tag == "details" and a.get("class") == "runs") or (tag == "span" and a.get("class") == "dir"):
            self.skip = 1
        elif tag == "table" and "board" in (a.get("class") or ""):
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self.tables:
            self.cell = []

    def handle_endtag(self, tag):
        if self.skip:
            self.skip -= 1
        elif tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None and not self.skip:
            self.cell.append(data)


def site_tables(html: str) -> list[list[list[str]]]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


@pytest.mark.parametrize("study", STUDIES, ids=lambda s: s.name)
def test_every_committed_tables_site_cells_are_its_markdowns(study):
    md = markdown_tables((study / "LEADERBOARD.md").read_text())
    site = site_tables((ROOT / SITE / study.name / "index.html").read_text())
    assert len(site) == len(md) and md
    for i, (m, s) in enumerate(zip(md, site, strict=True)):
        assert s == m, f"table {i} of {study.name} differs"


@pytest.mark.parametrize("study", STUDIES, ids=lambda s: s.name)
def test_the_csv_and_json_list_the_rows_in_the_tables_order(study):
    md = markdown_tables((study / "LEADERBOARD.md").read_text())
    mains = [t for t in md if t[0][:2] == ["rank", "method"]]
    data = [json.loads(p.read_text()) for p in sorted((study / "tables").glob("*.json"))]
    shown = sorted([row[1].split(" ⚠")[0] for row in t[1:] if not row[1].startswith("published:")] for t in mains)
    exported = sorted([row[d["aggregated"]["columns"].index("method")] for row in d["aggregated"]["data"]] for d in data)
    assert exported == shown


@pytest.fixture
def hostile(tmp_path):
    """A copy of one quickstart record whose label and eval file hold markup, on a backbone path."""
    out = tmp_path / "study"
    target, data = one_record("quickstart", out)
    data["label"] = MARKUP
    data["backbone"] = "/home/someone/checkpoints/my-model"
    data["provenance"]["config"].setdefault("suite_params", {})["eval_file"] = f"/home/someone/data/{MARKUP}.tsv"
    target.write_text(json.dumps(data))
    return out


def test_a_user_string_with_html_shows_as_text_in_the_markdown_and_a_path_as_its_name(hostile):
    from markdown_it import MarkdownIt

    text = build(check([hostile / "records"]).records)
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    assert "<img" not in rendered and "<em>" not in rendered and "javascript:" not in re.sub(r">[^<]*<", "><", rendered)
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; | *bold*" in rendered  # the label, as text
    assert "my-model" in text and "/home/someone" not in text


def test_a_user_string_with_html_shows_as_text_on_the_site(hostile, tmp_path):
    write_site([hostile], tmp_path / "site")
    page = (tmp_path / "site" / "study" / "index.html").read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    shown = re.sub(r"<code class=cmd>.*?</code>", "", page)  # the command that makes a run again names its path
    assert "/home/someone" not in shown and "my-model" in shown
    assert "'unsafe-inline'" not in page and "script-src 'self'" in page
