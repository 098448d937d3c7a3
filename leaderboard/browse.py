"""The site's example browser data for one table: attacked examples (each original text once,
the attack's edits as token spans) and OOD errors by set and group, over seeds, with the labels'
names. Written as script files of at most ``PART_BYTES`` each that the page loads only when a
reader opens the browser (a ``file://`` page cannot read JSON, but it can add a script): a study
of 34,500 attacked examples costs nothing until asked for.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from bench.errors import BenchError
from bench.store.atomic import write_atomic
from bench.store.records import parse_predictions, read_predictions
from leaderboard.evidence import has_shown_rows, outcomes_of
from leaderboard.sections import Section
from leaderboard.table import labels, order

PART_BYTES = 900_000  # under 1 MB a file, whatever a text's length


def examples(sec: Section, where: dict[str, Path]) -> dict:
    """The browser's data for one table, its candidates in the table's order. The errors come
    from the outcomes ``check`` parsed; of the rows, only the attack rows and the clean test rows
    (the confidence an attack started from) and the certified rows are decoded again (``_shown_or_test``)."""
    texts: dict[str, str] = {}
    cands, attacks, certified, ood = [], [], [], {}
    for ci, cand in enumerate(order(sec)):
        cands.append(f"{cand.name} {cand.target:.0%}" if cand.target is not None else cand.name)
        for r in cand.records:
            if r.run_id not in where or not r.predictions or not (where[r.run_id] / r.predictions).is_file():
                continue
            for name, o in outcomes_of(r).items():
                for (group, gold), (n, wrong) in ([] if name == "test" else o.errors_by_group().items()):
                    seen = ood.get((ci, name, group, gold), (0, 0))
                    ood[(ci, name, group, gold)] = (seen[0] + n, seen[1] + wrong)
            if not has_shown_rows(r):
                continue  # nothing more to decode (an OOD record's 30,000 HANS rows)
            rows = parse_predictions(*read_predictions(where[r.run_id], r), keep=_shown_or_test)
            for x in (x for x in rows if "votes" in x and "text" in x):  # a certified example, and its votes
                texts.setdefault(x["uid"], x["text"])
                certified.append([ci, r.seed, x["set"], x["uid"], x["gold"], x["pred"], x.get("select", []), x["votes"],
                                  x["samples"], x.get("p_lower"), bool(x.get("certified")), x.get("radius", x.get("delta"))])
            conf = {x["uid"]: x["probs"][x["pred"]] for x in rows if x["set"] == "test" and "probs" in x}
            for x in (x for x in rows if "result" in x):
                a = x["original"].split()
                texts.setdefault(x["uid"], x["original"])
                ops = [[i1, i2, " ".join(x["perturbed"].split()[j1:j2])] for tag, i1, i2, j1, j2 in
                       difflib.SequenceMatcher(None, a, x["perturbed"].split(), autojunk=False).get_opcodes() if tag != "equal"]
                attacks.append([ci, r.seed, x["set"], x["uid"], x["gold"], x["pred"], x["adv_pred"], x["result"],
                                x.get("words_changed", 0), x.get("queries", 0), conf.get(x["uid"]), ops])
    return {"candidates": cands, "labels": labels(sec), "texts": texts, "attacks": attacks, "certified": certified,
            "ood": [[*k, n, w] for k, (n, w) in sorted(ood.items(), key=lambda kv: tuple(map(str, kv[0])))]}


def _shown_or_test(line: str) -> bool:
    """Whether a row's JSON line can be an attack row, a certified row or a clean test row with
    probabilities: a line without these strings is none of them, and is not decoded."""
    return '"result"' in line or '"votes"' in line or ('"test"' in line and '"probs"' in line)


def _script(table: str, k: int, part: dict) -> str:
    return "(window.BENCH_PARTS = window.BENCH_PARTS || []).push(" + json.dumps(
        {"table": table, "part": k} | part, separators=(",", ":"), ensure_ascii=False) + ");\n"


def write_parts(data: dict, folder: Path, table: str) -> list[str]:
    """``data`` as script files ``<table>-<k>.js`` under ``folder``, each under ``PART_BYTES``:
    the first holds the candidates, labels and OOD errors, the rest the attacked examples with
    the texts they need. Returns the files' names, in order."""
    parts = [{"candidates": data["candidates"], "labels": data["labels"], "ood": data["ood"], "certified": data["certified"],
              "texts": {c[3]: data["texts"][c[3]] for c in data["certified"]}, "attacks": []}]
    size = len(_script(table, 0, parts[0]).encode())
    for a in data["attacks"]:
        text = 0 if a[3] in parts[-1]["texts"] else len(json.dumps([a[3], data["texts"][a[3]]], ensure_ascii=False).encode())
        extra = len(json.dumps(a, ensure_ascii=False).encode()) + text + 2
        if size + extra > PART_BYTES and parts[-1]["attacks"]:
            parts.append({"texts": {}, "attacks": []})
            size = 200
        parts[-1]["attacks"].append(a)
        parts[-1]["texts"].setdefault(a[3], data["texts"][a[3]])
        size += extra
    names = []
    for k, part in enumerate(parts):
        names.append(f"{table}-{k}.js")
        text = _script(table, k, part)
        if len(text.encode()) > 1_000_000:
            raise BenchError(f"an example of table {table} is over 1 MB on its own; it is left out of the browser")
        write_atomic(folder / names[-1], text)
    return names
