"""``bench site OUT [OUT ...] --to DIR``: the leaderboard as a static site that works from
``file://`` with no network: an index, one page per study (per task and backbone: the tables,
sortable and filterable, each row's runs with their provenance and the command that makes
each one, the sparsity plots), every table as CSV and JSON, and an example browser over the
kept predictions (attacked texts with the substituted words marked; OOD errors by group).

Nothing is fetched: the script and style sheet are this package's (``site_assets``), copied
beside the pages, and each page's examples are a script file (a browser does not let a
``file://`` page read JSON). The numbers are the Markdown leaderboard's (``leaderboard.build``):
one formatter for both.
"""

from __future__ import annotations

import difflib
import html
import json
import math
import shutil
import sys
from pathlib import Path

from bench.api import Command
from bench.errors import BenchError
from bench.registry import COMMANDS
from bench.store.atomic import write_atomic
from bench.store.records import STUDIES, Record, parse_predictions, read_predictions, study_folders
from leaderboard.build import at_chance, cell, details_tables, ranks
from leaderboard.evidence import has_attack_rows, outcomes_of
from leaderboard.legend import legend
from leaderboard.sections import Candidate, Section, sections, slug

ASSETS = Path(__file__).parent / "site_assets"
SITE = Path("docs") / "site"  # where ``bench publish`` writes the committed studies' site


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _mean(cand: Candidate, key: str) -> str:
    vals = [v for v in cand.values(key) if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return f"{sum(vals) / len(vals):.6g}" if vals else ""


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


def _runs(cand: Candidate) -> str:
    items = []
    for r in sorted(cand.records, key=lambda r: (r.seed, r.suite)):
        git = r.provenance.get("git") or {}
        dirty = " (uncommitted changes)" if git.get("dirty") else ""
        items.append(f"<li><b>seed {_e(str(r.seed))}, {_e(r.suite)}</b>: <code>{_e(r.run_id)}</code>; commit "
                     f"<code>{_e(str(git.get('commit', '?'))[:10])}</code>{dirty}; {_e(r.created)}; "
                     f"{_e((r.provenance.get('device') or {}).get('name', '?'))}; {_e(str(r.provenance.get('wall_seconds', '?')))} s"
                     f"<br><code class=cmd>{_e(command(r))}</code></li>")
    return f"<details class=runs><summary>runs ({len(cand.records)})</summary><ul>{''.join(items)}</ul></details>"


def _th(label: str, higher: bool | None) -> str:
    arrow = {True: " ↑", False: " ↓", None: ""}[higher]
    why = {True: "higher is better", False: "lower is better", None: "no direction"}[higher]
    return f'<th title="{why}; click to sort">{_e(label)}<span class=dir>{arrow}</span></th>'


def main_table(sec: Section) -> str:
    cols = [c for c in sec.columns if c.table == "main"]
    rank = ranks(sec)
    head = "<tr>" + _th("rank", None) + _th("method", None) + _th("sparsity", None) + "".join(
        _th(c.label, c.higher_is_better) for c in cols) + _th("seeds", None) + "</tr>"
    body = []
    for cand in sec.candidates:
        suites = " ".join(sorted({r.suite for r in cand.records}))
        sp = f"{cand.target:.0%}" if cand.target is not None else "dense"
        flag = f' <span class=flag>⚠ degenerate (seed {", ".join(map(str, cand.degenerate))}): not ranked</span>' if cand.degenerate else ""
        r = rank.get(id(cand), "—")
        cells = "".join(f'<td data-v="{"" if at_chance(cand, c) or cand.under_load(c.key) else _mean(cand, c.key)}">'
                        f"{_e(cell(sec, cand, c))}</td>"
                        for c in cols)  # an F_bias of a model at chance, a speed timed under load, sort with the missing
        body.append(f'<tr data-method="{_e(cand.name)}" data-sparsity="{sp}" data-suites="{_e(suites)}">'
                    f'<td data-v="{r.split()[0].split("-")[0] if r[0].isdigit() else ""}">{_e(r)}</td>'
                    f"<td>{_e(cand.name)}{flag}{_runs(cand)}</td><td>{sp}</td>{cells}<td>{_e(','.join(map(str, cand.seeds)))}</td></tr>")
    return f"<table class=board><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def _df_table(df) -> str:
    head = "<tr>" + "".join(_th(c, None) for c in df.columns) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in row) + "</tr>" for row in df.itertuples(index=False))
    return f"<table class=board><thead>{head}</thead><tbody>{body}</tbody></table>"


def _filters(sec: Section) -> str:
    sps = sorted({f"{c.target:.0%}" if c.target is not None else "dense" for c in sec.candidates}, key=lambda s: (s != "dense", s))
    suites = sorted({r.suite for r in sec.records})
    opt = lambda xs: "".join(f"<option>{_e(x)}</option>" for x in xs)  # noqa: E731
    return ("<div class=filters>method <input type=search class=f-method placeholder='filter rows'> sparsity "
            f"<select class=f-sparsity><option value=''>all</option>{opt(sps)}</select> suite "
            f"<select class=f-suite><option value=''>all</option>{opt(suites)}</select> <span class=count></span></div>")


def examples(sec: Section, where: dict[str, Path]) -> dict:
    """The browser's data for one table: attacked examples (each original text once, the attack's
    edits as token spans) and OOD errors by set and group, over seeds. The errors come from the
    outcomes ``check`` parsed; of the rows, only the attack rows and the clean test rows (the
    confidence an attack started from) are decoded again (``_attack_or_test``)."""
    texts: dict[str, str] = {}
    cands, attacks, ood = [], [], {}
    for ci, cand in enumerate(sec.candidates):
        cands.append(f"{cand.name} {cand.target:.0%}" if cand.target is not None else cand.name)
        for r in cand.records:
            if r.run_id not in where or not r.predictions or not (where[r.run_id] / r.predictions).is_file():
                continue
            outcomes = outcomes_of(r)
            for name, o in outcomes.items():
                for (group, gold), (n, wrong) in ([] if name == "test" else o.errors_by_group().items()):
                    seen = ood.get((ci, name, group, gold), (0, 0))
                    ood[(ci, name, group, gold)] = (seen[0] + n, seen[1] + wrong)
            if not has_attack_rows(r):
                continue  # nothing more to decode (an OOD record's 30,000 HANS rows)
            rows = parse_predictions(*read_predictions(where[r.run_id], r), keep=_attack_or_test)
            conf = {x["uid"]: x["probs"][x["pred"]] for x in rows if x["set"] == "test" and "probs" in x}
            for x in (x for x in rows if "result" in x):
                a = x["original"].split()
                texts.setdefault(x["uid"], x["original"])
                ops = [[i1, i2, " ".join(x["perturbed"].split()[j1:j2])] for tag, i1, i2, j1, j2 in
                       difflib.SequenceMatcher(None, a, x["perturbed"].split(), autojunk=False).get_opcodes() if tag != "equal"]
                attacks.append([ci, r.seed, x["set"], x["uid"], x["gold"], x["pred"], x["adv_pred"], x["result"],
                                x.get("words_changed", 0), x.get("queries", 0), conf.get(x["uid"]), ops])
    return {"candidates": cands, "texts": texts, "attacks": attacks,
            "ood": [[*k, n, w] for k, (n, w) in sorted(ood.items())]}


def _attack_or_test(line: str) -> bool:
    """Whether a row's JSON line can be an attack row or a clean test row with probabilities: a
    line without these strings is neither, and is not decoded."""
    return '"result"' in line or ('"test"' in line and '"probs"' in line)


def study_page(title: str, secs: list[Section], out: Path, where: dict[str, Path], src: Path) -> None:
    parts = [f"<h1>{_e(title)}</h1><p><a href='../index.html'>all studies</a></p>"]
    data = {}
    for sec in secs:
        if not sec.records:
            continue
        name = slug(sec.task, sec.backbone)
        parts += [f"<section class=study data-table='{name}'><h2>{_e(sec.task)} — backbone <code>{_e(sec.backbone)}</code></h2>",
                  _filters(sec), main_table(sec), f"<p class=legend>{_e(legend(sec))}</p>"]
        for png in (f"{name}.png", f"{name}_pattern.png"):
            if (src / "plots" / png).is_file():
                (out / "plots").mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src / "plots" / png, out / "plots" / png)
                parts.append(f"<img class=plot src='plots/{png}' alt='sparsity against the table\\'s metrics, {_e(sec.task)}'>")
        downloads = [f for f in (f"{name}.csv", f"{name}_seeds.csv", f"{name}.json") if (src / "tables" / f).is_file()]
        if downloads:
            (out / "tables").mkdir(parents=True, exist_ok=True)
            for f in downloads:
                shutil.copyfile(src / "tables" / f, out / "tables" / f)
            parts.append("<p>Download: " + ", ".join(f"<a href='tables/{f}'>{f}</a>" for f in downloads) + "</p>")
        for tname, df in details_tables(sec):
            parts.append(f"<details><summary>{_e(tname)}</summary>{_df_table(df)}</details>")
        data[name] = examples(sec, where)
        parts.append(f"<h3>Examples</h3><div class=examples data-table='{name}'></div></section>")
    write_atomic(out / "examples.js", "window.BENCH_EXAMPLES = " + json.dumps(data, separators=(",", ":")) + ";\n")
    write_atomic(out / "index.html", _page(title, "".join(parts), "../assets", ["examples.js"]))


def _page(title: str, body: str, assets: str, scripts: list[str] = ()) -> str:
    tags = "".join(f"<script src='{s}'></script>" for s in [*scripts, f"{assets}/site.js"])
    return ("<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content='width=device-width'>"
            f"<meta http-equiv=Content-Security-Policy content=\"default-src 'self' 'unsafe-inline'; img-src 'self'\">"
            f"<title>{_e(title)}</title><link rel=stylesheet href='{assets}/site.css'></head><body>{body}{tags}</body></html>\n")


def _title(folder: Path) -> str:
    findings = folder / "findings.md"
    if findings.is_file():
        first = next((line for line in findings.read_text().splitlines() if line.startswith("# ")), "")
        if first:
            return first[2:].strip()
    return folder.name


def write_site(outs: list[Path], to: Path) -> tuple[list[Path], list[str]]:
    """The site of the studies ``outs`` under ``to``: returns the pages written, and one line
    for each record left out (one that fails ``leaderboard.evidence.check``)."""
    from leaderboard.commands import merged
    from leaderboard.evidence import check

    to.mkdir(parents=True, exist_ok=True)
    (to / "assets").mkdir(exist_ok=True)
    for f in ("site.js", "site.css"):
        shutil.copyfile(ASSETS / f, to / "assets" / f)
    pages, index, checked, rejected = [], [], {}, []
    for out in outs:
        folders = study_folders(out)
        for f in folders:  # each study's records checked once, though a studies.toml folder shows them again
            if f.resolve() not in checked:
                found = check([f / "records"])
                checked[f.resolve()], rejected = found.records, rejected + found.rejected
        records = merged([r for f in folders for r in checked[f.resolve()]])
        own = folders == [out]  # a folder of other studies' records (studies.toml): their pages browse the examples
        secs = sections(records)
        page = to / out.resolve().name
        study_page(_title(out), secs, page, {r.run_id: r.where for r in records} if own else {}, out)
        pages.append(page / "index.html")
        index.append(f"<tr><td><a href='{_e(page.name)}/index.html'>{_e(_title(out))}</a></td><td>{len(records)}</td>"
                     f"<td>{_e(', '.join(sorted({s.task for s in secs if s.records})))}</td></tr>")
    body = ("<h1>robust-compression bench: studies</h1><p>Each study's tables (sortable, filterable, with every run's "
            "provenance and command), plots, CSV / JSON downloads and an example browser. Generated by <code>python -m bench "
            "site</code> from the run records; works offline.</p><table class=board><thead><tr><th>study</th><th>records</th>"
            f"<th>tasks</th></tr></thead><tbody>{''.join(index)}</tbody></table>")
    write_atomic(to / "index.html", _page("robust-compression bench", body, "assets"))
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
