"""The README's headline table, generated from committed records: ``python -m leaderboard.headline``.

It is the main table of ``results/quickstart`` (README command 1's comparison on the embedded
default), without timing columns, whose values vary from machine to machine. A test fails when
the README's copy differs from what the records give.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from bench.core.atomic import write_atomic
from bench.core.records import load_records
from leaderboard.build import details_tables, main_table, sections

START, END = "<!-- headline:start -->", "<!-- headline:end -->"
STUDY = "quickstart"
TIMED = ("ex/s", "speed-up", "ms bs1")


def render(results: Path) -> str:
    records = load_records(results / STUDY / "records")
    sec = sections(records)[0]
    df = main_table(sec)
    df = df[[c for c in df.columns if not c.startswith(TIMED)]]
    ood = dict(details_tables(sec)).get("OOD")  # the HANS-like cells by gold label: where a shortcut shows
    task = records[0].task if records else "?"
    return (f"Task `{task}`, backbone `{records[0].backbone if records else '?'}`, {len(records)} records "
            f"([full table](results/{STUDY}/LEADERBOARD.md), [findings](results/{STUDY}/findings.md)):\n\n"
            + df.to_markdown(index=False, disable_numparse=True)
            + ("" if ood is None else "\n\n" + ood.to_markdown(index=False, disable_numparse=True)))


def splice(readme: str, text: str) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        raise SystemExit(f"README.md has no {START} ... {END} block")
    return pattern.sub(lambda m: f"{START}\n{text}\n{END}", readme)


ROOT = Path(__file__).resolve().parents[1]


def main(root: Path = ROOT) -> int:
    readme = root / "README.md"
    write_atomic(readme, splice(readme.read_text(), render(root / "results")))
    print(f"headline written to {readme}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
