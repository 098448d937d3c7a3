"""``bench data``: the real evaluation files listed with their state, fetched from their official
distributions, or a folder verified (docs/data.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.api import Command
from bench.registry import COMMANDS


@COMMANDS.register("data")
class Data(Command):
    help = "the real evaluation files: list them, fetch them, verify a folder (docs/data.md)"

    def arguments(self, p) -> None:
        p.add_argument("action", nargs="?", default="list", choices=["list", "fetch", "verify"])
        p.add_argument("names", nargs="*", help="files or folders (hans, fever_symmetric/v2_dev.jsonl, ...); default all")
        p.add_argument("--dir", help="the data folder (default $BENCH_DATA, else ~/.local/share/robust-compression-bench/data)")
        p.add_argument("--mirror", help="fetch from this address, which serves the data folder's layout, instead")
        p.add_argument("--plan", action="store_true", help="with fetch: list what would be downloaded, from where and how large")

    def run(self, a) -> int:
        """``bench data``: each file with its state in the data folder, its pinned checksum and
        where it comes from; ``fetch`` gets them from their official distributions (``--plan``: what
        it would download first); ``verify`` checks a folder and fails when a file is missing or
        not the one listed."""
        from bench.data.fetch import fetch, plan
        from bench.data.places import data_home
        from bench.data.sources import chosen, status

        folder = Path(a.dir).expanduser() if a.dir else data_home()
        files = chosen(a.names)
        if a.action == "fetch":
            if a.plan:
                print("\n".join(plan(files, folder)))
                return 0
            problems = fetch(files, folder, a.mirror or "", log=lambda line: print(line, file=sys.stderr))
            for line in problems:
                print(f"bench: error: {line}", file=sys.stderr)
            return 2 if problems else 0
        states = {f.path: status(f, folder) for f in files}
        print(f"data folder: {folder}")
        for f in files:
            if f.origin is None:
                how = f"by hand: {f.source}"
            else:
                how = f"fetch: {f.origin.url.split('/')[2]}" + (f" ({f.origin.member})" if f.origin.member else "")
            pin = f.sha256[:12] if f.sha256 else "(not pinned)"
            shown = f"{f.path} -> {f.official}" if states[f.path] == "official" else f.path
            print(f"  {states[f.path]:<8} {shown:<44} {pin:<12} {f.licence:<38} {how}")
        if a.action == "verify":
            differ = [p for p, s in states.items() if s == "differs"]
            missing = [p for p, s in states.items() if s == "missing"]
            print(f"{sum(s in ('ok', 'official') for s in states.values())} verified, {len(differ)} differ, {len(missing)} missing")
            for path in differ:
                print(f"bench: error: {folder / path} is not the file listed (its checksum differs)", file=sys.stderr)
            if missing:
                print(f"bench: error: {len(missing)} files missing from {folder}: bench data fetch {' '.join(missing)}",
                      file=sys.stderr)
            return 2 if differ or missing else 0
        return 0
