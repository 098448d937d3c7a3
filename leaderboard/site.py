"""``bench site OUT [OUT ...] --to DIR``: the leaderboard as a static site that works from
``file://`` with no network: an index, one page per study with one legend, and per task and
backbone the tables (in rank order, sortable and filterable, each row's runs with their record,
provenance and the command that makes each one), the plots, every table as CSV and JSON, a
compare view of two candidates and an example browser over the kept predictions (attacked texts
with the substituted words marked; OOD errors by group).

The cells are ``leaderboard.table``'s, the ones the Markdown draws. Nothing is fetched: the
script and style sheet are this package's (``site_assets``), copied beside the pages; a table's
examples are script files added when the browser is opened (``leaderboard.browse``).
"""

from __future__ import annotations

import html
import json
import math
import os
import shutil
import sys
from pathlib import Path

from bench.api import Command
from bench.errors import BenchError
from bench.registry import COMMANDS
from bench.store.atomic import swap_dir, write_atomic
from bench.store.records import STUDIES, Record, study_folders
from bench.store.references import load_references
from leaderboard.browse import examples, write_parts
from leaderboard.candidate import SCALE, Candidate, shown, slug
from leaderboard.evidence import check, merged
from leaderboard.legend import against, legend
from leaderboard.sections import Section, sections
from leaderboard.table import Cell, Col, Row, Table, details, kept, main, tests

ASSETS = Path(__file__).parent / "site_assets"
SITE = Path("docs") / "site"  # where ``bench publish`` writes the committed studies' site
LEGEND = (ASSETS / "legend.html").read_text()  # one legend a page: colours, marks, flags, sort


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def command(r: Record) -> str:
    """The command that makes this record again (its data directory aside)."""
    conf = r.provenance.get("config", {})
    parts = ["python -m bench run", f"--method {r.method}", f"--suite {r.suite}", f"--task {r.task}",
             f"--backbone {r.backbone}", f"--seed {r.seed}"]
    if r.sparsity.get("target") is not None:
        parts.append(f"--sparsity {r.sparsity['target']:g}")
    if conf.get("max_examples"):
        parts.append(f"--max-examples {conf['max_examples']}")
    for k in ("device", "precision"):
        if conf.get(k) not in (None, "cpu", "fp32"):
            parts.append(f"--{k} {conf[k]}")
    parts += [f"--param {k}={v}" for k, v in sorted(r.params.items())]
    parts += [f"--suite-param {k}={v}" for k, v in sorted((conf.get("suite_params") or {}).items())]
    return " ".join(parts)


def _rel(path: Path, page: Path) -> str:
    return Path(os.path.relpath(path.resolve(), page.resolve())).as_posix()


def _runs(cand: Candidate, page: Path | None) -> str:
    """Each run of a row: its record (a link to its JSON where the page can reach it), commit,
    time, device, wall time and the command that makes it again."""
    items = []
    for r in sorted(cand.records, key=lambda r: (r.seed, r.suite)):
        git = r.provenance.get("git") or {}
        dirty = " (uncommitted changes)" if git.get("dirty") else ""
        rid = f"<code>{_e(r.run_id)}</code>"
        if page is not None and r.where is not None and (r.where / f"{r.run_id}.json").is_file():
            rid = f"<a href='{_e(_rel(r.where / f'{r.run_id}.json', page))}'>{rid}</a>"
        items.append(f"<li><b>seed {_e(r.seed)}, {_e(r.suite)}</b>: {rid}; commit "
                     f"<code>{_e(str(git.get('commit', '?'))[:10])}</code>{dirty}; {_e(r.created)}; "
                     f"{_e((r.provenance.get('device') or {}).get('name', '?'))}; {_e(r.provenance.get('wall_seconds', '?'))} s"
                     f"<br><code class=cmd>{_e(command(r))}</code></li>")
    return f"<details class=runs><summary>runs and records ({len(cand.records)})</summary><ul>{''.join(items)}</ul></details>"


def _th(col: Col) -> str:
    arrow = {True: "↑", False: "↓", None: ""}[col.higher_is_better]
    why = {True: "higher is better", False: "lower is better", None: "no better direction"}[col.higher_is_better]
    return (f'<th title="{why}; click to sort">{_e(col.label)}'
            + (f'<span class=dir title="{why}">{arrow}</span>' if arrow else "") + "</th>")


def _td(table: Table, row: Row, col: Col, page: Path | None) -> str:
    c = row.cells.get(col.key, Cell(""))
    flags = "".join(f" <span class=flag>{_e(f)}</span>" for f in c.flags)
    extra = _runs(row.candidate, page) if col.key == "method" and row.candidate is not None and table.name == "main" else ""
    wide = " class=name" if col.key == "method" else ""
    return f'<td{wide} data-v="{"" if c.sort is None else f"{c.sort:.6g}"}">{_e(c.text)}{flags}{extra}</td>'


def table_html(table: Table, page: Path | None = None) -> str:
    """One table of ``leaderboard.table`` as HTML: the cells the Markdown shows, a sort key each."""
    head = "<tr>" + "".join(_th(c) for c in table.columns) + "</tr>"
    body, i = [], 0
    for row in table.rows:
        cand = row.candidate
        attrs = "" if cand is None else (f' data-row={i} data-method="{_e(cand.name)}" data-sparsity="{_e(row.cells["sparsity"].text)}"'
                                         f' data-suites="{_e(" ".join(sorted({r.suite for r in cand.records})))}"')
        i += cand is not None
        body.append(f"<tr{attrs}>" + "".join(_td(table, row, c, page) for c in table.columns) + "</tr>")
    return (f"<div class=scroll><table class='board t-{_e(table.name)}'><thead>{head}</thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _filters(sec: Section, table: Table) -> str:
    sps = list(dict.fromkeys(sorted((r.cells["sparsity"].text for r in table.rows if r.candidate), key=lambda s: (s[0].isdigit(), s))))
    suites = sorted({r.suite for r in sec.records})
    opt = lambda xs: "".join(f"<option>{_e(x)}</option>" for x in xs)  # noqa: E731
    return ("<div class=filters><label>method <input type=search class=f-method placeholder='filter rows'></label> "
            f"<label>sparsity <select class=f-sparsity><option value=''>all</option>{opt(sps)}</select></label> "
            f"<label>suite <select class=f-suite><option value=''>all</option>{opt(suites)}</select></label> "
            "<span class=count></span></div>")


def pairs(sec: Section, table: Table) -> dict:
    """The compare view's data: the rows' names in the table's order and, for every two ranked
    rows, the paired difference on the ranking column (``Section.pairwise``: the test behind the
    rank groups and the claims, Holm-corrected over the table's pairs) with its 95 % interval."""
    rows = [r for r in table.rows if r.candidate is not None]  # as ``browse.examples`` numbers them
    at = {id(r.candidate): i for i, r in enumerate(rows)}
    col = sec.primary
    out = {}
    for t in sec.pairwise if col is not None else []:
        if t.result is None:
            continue
        scale = SCALE[col.kind][0]
        a, b = at[id(t.candidate)], at[id(t.reference)]
        out[f"{a}-{b}"] = [round(scale * t.delta, 4), round(scale * t.result.low, 4), round(scale * t.result.high, 4),
                           None if math.isnan(t.p_holm) else float(f"{t.p_holm:.3g}"), len(t.seed_deltas),
                           t.pairing.b, t.pairing.c, t.pairing.n]
    return {"rows": [f"{r.cells['method'].text} ({r.cells['sparsity'].text})" for r in rows],
            "column": col.label if col else "", "pairs": out,
            "unit": "points" if col is not None and SCALE[col.kind][0] == 100.0 else ""}


def _data(name: str, value: dict) -> str:
    """Data for site.js in the page, as JSON whose ``<``, ``>`` and ``&`` are escapes: no HTML
    parser can read a tag or the block's end in it."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return f"<script type=application/json class=data data-for='{_e(name)}'>{text}</script>"


def study_page(title: str, secs: list[Section], out: Path, where: dict[str, Path], src: Path, browse: bool) -> None:
    links = ["<a href='../index.html'>all studies</a>", "<a href='#legend'>legend</a>"]
    if (src / "findings.md").is_file():
        links.append(f"<a href='{_e(_rel(src / 'findings.md', out))}'>findings and claims table</a>")
    parts = [f"<h1>{_e(title)}</h1><nav>{' · '.join(links)}</nav>", LEGEND]
    for sec in secs:
        if not sec.records:
            continue
        name = slug(sec.task, sec.backbone)
        main_t = main(sec)
        parts += [f"<section class=study id='{_e(name)}' data-table='{_e(name)}'><h2>{_e(sec.task)} — backbone "
                  f"<code>{_e(shown(sec.backbone))}</code></h2>", _filters(sec, main_t), table_html(main_t, out),
                  f"<details class=rule><summary>how this table is ranked and flagged</summary><p>{_e(legend(sec))}</p></details>"]
        plots = [p for p in (f"{name}.png", f"{name}_pattern.png", f"{name}_radius.png") if (src / "plots" / p).is_file()]
        downloads = [f for f in (f"{name}.csv", f"{name}_seeds.csv", f"{name}.json") if (src / "tables" / f).is_file()]
        for sub, files in (("plots", plots), ("tables", downloads)):
            for f in files:
                (out / sub).mkdir(parents=True, exist_ok=True)
                write_atomic(out / sub / f, (src / sub / f).read_bytes())
        what = {p: "sparsity per layer and matrix" if "pattern" in p else "certified accuracy by radius" if "radius" in p
                else "sparsity against each main column" for p in plots}
        parts.append("<p>" + " · ".join([f"<a href='#{_e(name)}-plot-{i}'>plot: {what[p]}</a>" for i, p in enumerate(plots)]
                                         + [f"download <a href='tables/{f}'>{f}</a>" for f in downloads]) + "</p>")
        for table in [*details(sec), kept(sec), tests(sec, against(sec) if sec.reference else "")]:
            if table is not None:
                summary = table.title.rstrip(":")
                parts.append(f"<details class=more><summary>{_e(summary)}</summary>{table_html(table)}</details>")
        parts += [f"<figure id='{_e(name)}-plot-{i}'><img class=plot src='plots/{p}' alt='{_e(sec.task)}: {what[p]}'></figure>"
                  for i, p in enumerate(plots)]
        parts += ["<h3>Compare two candidates</h3>", _data(f"compare:{name}", pairs(sec, main_t)),
                  f"<div class=compare data-table='{_e(name)}'></div>"]
        if browse:
            got = examples(sec, where)
            files = write_parts(got, out / "examples", name)
            parts.append(f"<details class=examples data-table='{_e(name)}' data-parts='{_e(' '.join(files))}' "
                         f"data-attacks={int(bool(got['attacks']))}>"
                         "<summary>Examples (loaded when opened)</summary><div class=browser></div></details>")
        else:
            parts.append("<p class=note>The example browser is not in the published site, to keep the clone light; "
                         "<code>python -m bench site results/* --to site</code> builds it from the kept predictions.</p>")
        parts.append("</section>")
    write_atomic(out / "index.html", _page(title, "".join(parts), "../assets"))


def _page(title: str, body: str, assets: str) -> str:
    """A page whose policy runs only the site's own script file: no inline script or handler, so
    markup that a record smuggled past the escaping would still not run."""
    return ("<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content='width=device-width, initial-scale=1'>"
            "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; script-src 'self'; style-src 'self'; "
            "img-src 'self'; base-uri 'none'; form-action 'none'\">"
            f"<title>{_e(title)}</title><link rel=stylesheet href='{assets}/site.css'></head><body>{body}"
            f"<script src='{assets}/site.js'></script></body></html>\n")


def _title(folder: Path) -> str:
    findings = folder / "findings.md"
    if findings.is_file():
        first = next((line for line in findings.read_text().splitlines() if line.startswith("# ")), "")
        if first:
            return first[2:].strip()
    return folder.name


def write_site(outs: list[Path], to: Path, browse: bool = True) -> tuple[list[Path], list[str]]:
    """The site of the studies ``outs`` under ``to``: returns the pages written, and one line
    for each record left out (one that fails ``leaderboard.evidence.check``). Built in a
    folder beside ``to`` and swapped in whole (``swap_dir``): an interrupted build leaves the
    old site as it was. ``browse``: with the example browser (``bench publish`` leaves it out)."""
    pages, index, checked, rejected = [], [], {}, []
    with swap_dir(to) as tmp:
        (tmp / "assets").mkdir()
        for f in ("site.js", "site.css"):
            shutil.copyfile(ASSETS / f, tmp / "assets" / f)
        for out in outs:
            folders = study_folders(out)
            for f in folders:  # each study's records checked once, though a studies.toml folder shows them again
                if f.resolve() not in checked:
                    found = check([f / "records"])
                    checked[f.resolve()], rejected = found.records, rejected + found.rejected
            records = merged([r for f in folders for r in checked[f.resolve()]])
            own = folders == [out]  # a folder of other studies' records (studies.toml): their pages browse the examples
            secs = sections(records, load_references(out))  # the published rows the Markdown shows too
            page = tmp / out.resolve().name
            study_page(_title(out), secs, page, {r.run_id: r.where for r in records}, out, browse and own)
            pages.append(to / page.name / "index.html")
            index.append(f"<tr><td><a href='{_e(page.name)}/index.html'>{_e(_title(out))}</a></td><td>{len(records)}</td>"
                         f"<td>{_e(', '.join(sorted({s.task for s in secs if s.records})))}</td></tr>")
        body = ("<h1>robust-compression bench: studies</h1><p>Each study's tables (sortable, filterable, with every run's "
                "provenance, record and command), plots, a compare view, CSV / JSON downloads and, where built "
                "locally, an example browser. Generated by <code>python -m bench site</code> from the run records; "
                "works offline.</p><div class=scroll><table class=board><thead><tr><th>study</th><th>records</th>"
                f"<th>tasks</th></tr></thead><tbody>{''.join(index)}</tbody></table></div>")
        write_atomic(tmp / "index.html", _page("robust-compression bench", body, "assets"))
    return [to / "index.html", *pages], rejected


@COMMANDS.register("site")
class Site(Command):
    help = "write the leaderboard as a static site (index, a page per study, examples, CSV / JSON) that works offline"

    def arguments(self, p) -> None:
        p.add_argument("out", nargs="+", help="study folders (a studies.toml folder: its studies' records together)")
        p.add_argument("--to", required=True, help="the folder to write the site into (open its index.html)")

    def run(self, a) -> int:
        outs = [Path(o) for o in a.out]
        for o in outs:
            if not (o / "records").is_dir() and not (o / STUDIES).is_file():
                raise BenchError(f"{o}: no records/ (nor studies.toml): not a study folder")
        pages, left_out = write_site(outs, Path(a.to))
        for line in left_out:
            print(f"bench: error: left out of the site: {line}", file=sys.stderr)
        print(f"{len(pages)} pages written; open {Path(a.to) / 'index.html'}", file=sys.stderr)
        if left_out:
            raise BenchError(f"{len(left_out)} records left out of the site (listed above)")
        return 0
