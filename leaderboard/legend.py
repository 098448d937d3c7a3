"""The words around a leaderboard table, shared by the Markdown and the site: what made its
records (data, sizes, versions, device, code), its legend (the rank rule, the marks and flags)
and how the reference is named."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from bench.store.records import Record
from leaderboard.candidate import Candidate, shown, suite_setting
from leaderboard.pairing import device
from leaderboard.sections import Section

UNDER_LOAD = "measured under load"


def md(text: str) -> str:
    """Text a user gave (a label, a setting, a file name) as Markdown that shows it as text: its
    punctuation that Markdown or HTML would read (``<img onerror=...>``, ``|``, ``[x](y)``, ``*``)
    backslash-escaped, which every CommonMark viewer shows as the character itself. What cannot
    start markup stays, so a row reads as it did: an ``_`` inside a word, a ``[`` or a ``]`` that
    no ``(`` or ``[`` follows (``[epochs=1.0]``)."""
    return re.sub(r"[\\`*<>|&]|\](?=[(\[])|(?<!\w)_|_(?!\w)", lambda m: "\\" + m.group(0), str(text))


def literal(text: str) -> str:
    """Text as a Markdown code span, whatever backticks it holds (a span shows HTML as text)."""
    fence = "`" * (max((len(m) for m in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def twins(sec: Section) -> list[Candidate]:
    """The reference's twins on other devices that some test was paired with."""
    return list({id(t.reference): t.reference for t in sec.tests if t.reference is not sec.reference}.values())


def against(sec: Section, esc: Callable[[str], str] = str) -> str:
    """The reference as the legend and the paired tests' heading name it, with its twins; its
    names through ``esc`` (``md`` for Markdown)."""
    return esc(sec.reference.name) + "".join(f"; rows on {esc(device(m))}: against {esc(m.name)}" for m in twins(sec))


def header(sec: Section) -> list[str]:
    rs = sec.records
    notes = {r.provenance["data"].get("note", "") for r in rs} - {""}
    kinds = {s["kind"] + ": " + s["detail"] for r in rs for s in r.provenance["data"]["sources"]}
    sizes = {}
    for r in rs:
        sizes.setdefault(r.suite, r.details.get("sizes", {}))
    versions = sorted({f"transformers {r.provenance['versions'].get('transformers')}, torch {r.provenance['versions'].get('torch')}"
                       + (f", textattack {r.details['textattack']}" if r.details.get("textattack") else "") for r in rs})
    settings = sorted({f"{r.suite}: {suite_setting(r)}" for r in rs if suite_setting(r)})
    devices = sorted({str(r.provenance['device'].get('name', '?')) for r in rs})
    lines = [f"- backbone: {literal(shown(sec.backbone))}; data: {md('; '.join(sorted(notes)) or '; '.join(sorted(kinds)))}",
             "- evaluated examples: " + "; ".join(f"suite {literal(s)}: " + md(", ".join(f"{k} {v}" for k, v in z.items()))
                                                   for s, z in sorted(sizes.items())),
             f"- {md('; '.join(versions))}; device: {md('; '.join(devices))}"]
    lines += [f"- suite settings: {md('; '.join(settings))}"] if settings else []
    lines += [f"- {md(n)}" for n in sorted({n for r in rs for n in r.details.get("notes", [])})]
    return lines + [code(rs)]


def code(rs: list[Record]) -> str:
    """Which code made a table's records (each record's ``provenance.git``). A reviewer checks a
    number out at its commit; a record made with uncommitted changes to tracked files has no
    commit that holds its code, so those are counted by the commit they started from."""
    gits = [g for r in rs if (g := r.provenance.get("git") or {}).get("commit") not in (None, "", "unknown")]
    commits = Counter(str(g["commit"])[:7] for g in gits)
    dirty = Counter(str(g["commit"])[:7] for g in gits if g.get("dirty") is True)
    where = f"git commit `{next(iter(commits))}`" if len(commits) == 1 else f"{len(commits)} git commits"
    records = f"{len(rs)} record{'s' * (len(rs) != 1)}"
    if len(gits) == len(rs):
        line = f"- code: {records} from {where}"
    elif gits:
        line = f"- code: {records}, {len(gits)} from {where} and {len(rs) - len(gits)} with no commit recorded"
    else:
        line = f"- code: {records}, none with a commit recorded"
    if dirty:
        line += (f"; {dirty.total()} of them with uncommitted changes to tracked files ("
                 + ", ".join(f"`{c}` {k}" for c, k in sorted(dirty.items())) + ")")
    elif len(gits) == len(rs) and all(g.get("dirty") is False for g in gits):
        line += (", each" if len(rs) > 1 else ",") + " with no uncommitted changes to tracked files"
    return line + " (`provenance.git`)"


def legend(sec: Section, esc: Callable[[str], str] = str) -> str:
    """The rank rule, the marks and the flags in words; the reference's name through ``esc``."""
    ref = against(sec, esc) if sec.reference else esc(sec.no_reference or "none in this table")
    if sec.primary is None:
        return "Not ranked (no primary column)." + load_legend(sec)
    return (f"Rank: by {sec.primary.label}, in groups. Two rows share ranks unless the paired test separates them: "
            "the per-seed differences paired by seed, their standard error adding the examples' sampling variance "
            "(cluster-robust where the set declares clusters), Student t with the Welch-Satterthwaite degrees of "
            "freedom, from at least 3 paired seeds, Holm-corrected over every pair of this table's ranked rows, "
            "p < 0.05. A row's rank runs from 1 + the rows significantly above it to n - the rows significantly "
            "below it: \"1\" is alone at the top, \"2-4\" is tied with the rows whose ranks overlap. ▲ / ▼: "
            f"significantly above / below the reference ({ref}) on it, by the same test, Holm-corrected across this "
            "table's tests against the reference. ⚠ partial collapse (s2 positive: 0.0 %): seed 2's model gives "
            "positive as 0.0 % of its answers on the column's set, one of: some class on more than 85 % of a balanced set, or "
            "a gold class that is at least 10 % of the set on under 2 % (its number there is not the task's "
            "skill); a row flagged on its ranking column, or "
            "degenerate, is not ranked. F_bias: below 1 less biased than the full standard-CE model of the same "
            "seed; below 0 the model scores higher out of distribution than in it (its bias degree is negative); "
            "⚠ ID at chance: that seed did not learn the task, and its F_bias means nothing." + load_legend(sec))


def load_legend(sec: Section) -> str:
    """The legend's words for ⚠ measured under load, in a table that has such a cell."""
    if not any(c.under_load(col.key) for c in sec.candidates for col in sec.columns):
        return ""
    return (f" ⚠ {UNDER_LOAD} (seed 0): that seed's speeds were timed while other work held the machine's cores "
            "(in each of its timed attempts, its process got a smaller share of the CPU time its threads could have had "
            "than its record's `timing.contended_below`); the number is the machine's load as much as the model's, and "
            "is never ranked.")
