"""`bench data`: every file fetched from its official distribution (a zip, a tar.gz or a plain
file), converted to the layout and kept only if its bytes are the ones listed. Here a local HTTP
server on 127.0.0.1 serves archives in each official format, a corrupted one and a redirect to
another host; with the real data folder, it serves archives rebuilt in the official formats from
it, and the whole catalogue is fetched and verified."""

from __future__ import annotations

import array
import csv
import errno
import functools
import gzip
import hashlib
import http.server
import io
import json
import tarfile
import threading
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from bench.cli import main
from bench.data import fetch as fetching
from bench.data import sources
from bench.data.sources import DataFile, Origin
from tests.conftest import REAL_DATA

ROOT = Path(__file__).resolve().parents[2]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path.startswith("/elsewhere/"):  # a redirect to another host (localhost is not 127.0.0.1)
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{self.server.server_address[1]}/site.csv")
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture
def serve(tmp_path):
    """serve({name: bytes}) -> base address of a server on 127.0.0.1 serving those files."""
    servers = []

    def start(files: dict[str, bytes]) -> str:
        site = tmp_path / f"site{len(servers)}"
        for name, data in files.items():
            (site / name).parent.mkdir(parents=True, exist_ok=True)
            (site / name).write_bytes(data)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(site)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()


def zipped(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def tarred(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


PAWS_ROWS = b"1\tA b .\tB a .\t0\r\n2\tC d .\tC d .\t1\r\n"
AG_CSV = b'"3","A title","Shares fell, said ""analysts"" on Monday."\n"2","Other","Team wins\\again."\n'
AG_TSV = b'"Shares fell, said ""analysts"" on Monday."\tBusiness\nTeam wins\\again.\tSports\n'


@pytest.fixture
def catalogue(serve):
    archive = zipped({"GLUE/dev.tsv": b"id\tsentence1\tsentence2\tlabel\r\n" + PAWS_ROWS, "GLUE/other.tsv": b"x\n"})
    tgz = tarred({"final/dev.tsv": b"id\tsentence1\tsentence2\tlabel\r\n" + PAWS_ROWS, "final/train.tsv": b"t\n"})
    base = serve({"glue.zip": archive, "paws.tar.gz": tgz, "ag.csv": AG_CSV, "bad.zip": archive[:-40] + b"x" * 40,
                  "site.csv": AG_CSV, "plain.jsonl": b'{"a": 1}\n'})
    files = [
        DataFile("zip/dev.tsv", "from a zip", "MIT", "https://example.org", sha(PAWS_ROWS),
                 Origin(base + "/glue.zip", sha(archive), member="GLUE/dev.tsv", convert="drop_header")),
        DataFile("tgz/dev.tsv", "from a tar.gz", "MIT", "https://example.org", sha(PAWS_ROWS),
                 Origin(base + "/paws.tar.gz", sha(tgz), member="final/dev.tsv", convert="drop_header")),
        DataFile("tgz/train.tsv", "unpinned member", "MIT", "https://example.org",
                 origin=Origin(base + "/paws.tar.gz", sha(tgz), member="final/train.tsv")),
        DataFile("csv/test.tsv", "a CSV converted", "MIT", "https://example.org", sha(AG_TSV),
                 Origin(base + "/ag.csv", sha(AG_CSV), convert="agnews_tsv")),
        DataFile("plain/x.jsonl", "as served, pinned by its own checksum", "MIT", "https://example.org",
                 sha(b'{"a": 1}\n'), Origin(base + "/plain.jsonl")),
        DataFile("derived/copy.jsonl", "a derived copy", "MIT", "https://example.org", "0" * 64,
                 Origin(base + "/plain.jsonl", convert=""), official="official/x.jsonl"),
        DataFile("bad/dev.tsv", "corrupted archive", "MIT", "https://example.org", sha(PAWS_ROWS),
                 Origin(base + "/bad.zip", sha(archive), member="GLUE/dev.tsv", convert="drop_header")),
        DataFile("moved/test.tsv", "redirected elsewhere", "MIT", "https://example.org", sha(AG_TSV),
                 Origin(base + "/elsewhere/ag.csv", convert="agnews_tsv")),
        DataFile("hand/made.tsv", "no archive holds it", "MIT", "https://example.org/page", "0" * 64),
    ]
    return base, files


def test_fetch_converts_each_official_format_and_refuses_corruption_and_a_foreign_redirect(catalogue, tmp_path):
    _, files = catalogue
    dest, said = tmp_path / "data", []
    problems = fetch_all(files, dest, said)
    assert (dest / "zip/dev.tsv").read_bytes() == PAWS_ROWS and (dest / "tgz/dev.tsv").read_bytes() == PAWS_ROWS
    assert (dest / "csv/test.tsv").read_bytes() == AG_TSV and (dest / "tgz/train.tsv").read_bytes() == b"t\n"
    assert (dest / "official/x.jsonl").is_file() and not (dest / "derived").exists()
    assert any("derived/copy.jsonl: no conversion reproduces the studies' copy; kept the official official/x.jsonl" in s
               for s in said)
    assert not (dest / "bad").exists() and not (dest / "moved").exists()  # nothing left of either
    assert sorted(p.name for p in dest.rglob("*") if p.is_file()) == ["dev.tsv", "dev.tsv", "test.tsv", "train.tsv",
                                                                      "x.jsonl", "x.jsonl"]  # no temporary left
    assert len(problems) == 2
    assert "bad/dev.tsv: what http://127.0.0.1" in problems[0] and "does not match its pinned checksum" in problems[0]
    assert "moved/test.tsv:" in problems[1] and "to another host, localhost" in problems[1]
    assert "hand/made.tsv: no pinned download is listed for it; get it by hand from https://example.org/page (docs/data.md)" in said
    again: list[str] = []
    assert fetch_all(files[:6], dest, again) == [] and all("already here" in s or "official" in s for s in again)


def fetch_all(files, dest, said):
    return fetching.fetch(files, dest, log=said.append)


def test_a_conversion_that_does_not_give_the_listed_bytes_keeps_the_official_file_or_nothing(catalogue, tmp_path):
    _, files = catalogue
    wrong = replace(files[0], sha256="1" * 64)  # the studies' copy cannot be reproduced from this archive
    dest = tmp_path / "data"
    assert fetch_all([wrong], dest, []) == [f"zip/dev.tsv: what {wrong.origin.url} served does not match its checksum; refused"]
    assert not dest.exists()
    said: list[str] = []
    assert fetch_all([replace(wrong, official="GLUE/dev.tsv")], dest, said) == []
    assert (dest / "GLUE/dev.tsv").read_bytes().startswith(b"id\tsentence1") and "the converted bytes are not" in said[0]


def test_the_command_plans_fetches_and_verifies_a_folder(catalogue, tmp_path, monkeypatch, capsys):
    _, files = catalogue
    monkeypatch.setattr(sources, "FILES", files[:6])
    dest = tmp_path / "data"
    assert main(["data", "fetch", "--plan", "--dir", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "zip/dev.tsv" in out and "GLUE/dev.tsv of it, converted (drop_header)" in out and not dest.exists()
    assert main(["data", "verify", "--dir", str(dest)]) == 2  # nothing here yet: a missing file fails
    assert "6 files missing" in capsys.readouterr().err
    assert main(["data", "fetch", "--dir", str(dest)]) == 0
    capsys.readouterr()
    assert main(["data", "verify", "--dir", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "6 verified, 0 differ, 0 missing" in out and "official derived/copy.jsonl -> official/x.jsonl" in out
    (dest / "zip/dev.tsv").write_bytes(b"edited\n")
    assert main(["data", "verify", "--dir", str(dest)]) == 2
    assert "dev.tsv is not the file listed" in capsys.readouterr().err
    assert main(["data", "fetch", "nosuch", "--dir", str(dest)]) == 2
    assert "no data file or folder 'nosuch'" in capsys.readouterr().err


def test_offline_fetch_creates_nothing_and_says_in_one_line_what_to_fetch(tmp_path, capsys, monkeypatch):
    closed = [DataFile(f"sets/{name}.jsonl", "a set", "MIT", "https://example.org", "0" * 64,
                       Origin(f"http://127.0.0.1:9/{name}.zip", member="x")) for name in ("x", "y")]
    monkeypatch.setattr(sources, "FILES", closed)
    dest = tmp_path / "data"
    assert main(["data", "fetch", "--dir", str(dest)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach 127.0.0.1:9" in err[0] and "2 files not fetched" in err[0]
    assert "on a connected machine run 'bench data fetch sets/x.jsonl sets/y.jsonl --dir DIR'" in err[0]
    assert not dest.exists()


def test_a_full_disk_is_one_line_naming_the_file_not_the_network(catalogue, tmp_path, monkeypatch, capsys):
    _, files = catalogue

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_bytes", full)
    monkeypatch.setattr(sources, "FILES", files[:1])
    assert main(["data", "fetch", "--dir", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write" in err[0] and "No space left on device" in err[0]
    assert "reach" not in err[0] and "Traceback" not in err[0]


def test_every_file_a_committed_study_read_comes_from_a_pinned_official_distribution():
    read = set()
    for path in ROOT.glob("results/*/records/*.json"):
        for source in json.loads(path.read_text()).get("provenance", {}).get("data", {}).get("sources", []):
            read |= set(source.get("sha256", {}))
    read = {p for p in read if "/" in p and not p.startswith(("nli_synth", "sent_synth"))}
    assert len(read) >= 7, read  # MNLI, its hardness flags, HANS, SST-2's three files, AG News
    listed = {f.path: f for f in sources.FILES}
    assert read <= set(listed)
    for p in read:
        o = listed[p].origin
        assert o is not None, f"{p} is read by a study but no official distribution is listed"
        assert o.sha256 or o.git_blob or (o.convert and listed[p].sha256), f"{p}: what {o.url} serves is not pinned"
        assert o.url.startswith("https://"), o.url
    for f in sources.FILES:
        if f.origin and "raw.githubusercontent.com" in f.origin.url:
            assert len(f.origin.url.split("/")[5]) == 40, f"{f.path}: pin the repository's commit"


def test_the_sst2_split_lists_every_row_of_glue_train_once():
    order = array.array("I")
    order.frombytes(gzip.decompress((fetching.SPLITS / "sst2_train_dev.u32le.gz").read_bytes()))
    assert sorted(order) == list(range(67_349))  # GLUE's SST-2 train: 67,349 rows, 60,614 + 6,735 here


# --- the whole catalogue against archives rebuilt in the official formats from the real data ------------


def glue_dev_matched(ours: bytes) -> bytes:
    """GLUE's MNLI/dev_matched.tsv columns around our rows (the columns no loader reads are blank)."""
    cols = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
            "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label"]
    lines = ["\t".join(cols)]
    for line in ours.decode().splitlines()[1:]:
        i, premise, hypothesis, gold, _ = line.split("\t")
        lines.append("\t".join([i, "", "", "", "", "", "", "", premise, hypothesis, gold, gold]))
    return ("\n".join(lines) + "\n").encode()


def hans_txt(jsonl: bytes) -> bytes:
    cols = ["gold_label", "sentence1_binary_parse", "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
            "sentence1", "sentence2", "pairID", "heuristic", "subcase", "template"]
    lines = ["\t".join(cols)]
    for i, line in enumerate(jsonl.decode().splitlines()):
        r = json.loads(line)
        sub = r.get("subcase_predicted") or r.get("subcase_inferred_from_position") or "s"
        lines.append("\t".join([r["gold_label"], "", "", "", "", r["sentence1"], r["sentence2"], f"ex{i}",
                                r["heuristic"], sub, "temp1"]))
    return ("\n".join(lines) + "\n").encode()


def glue_sst2_train(train: bytes, dev: bytes) -> bytes:
    """GLUE's train.tsv order, recovered from the studies' split and the listed row order."""
    order = array.array("I")
    order.frombytes(gzip.decompress((fetching.SPLITS / "sst2_train_dev.u32le.gz").read_bytes()))
    header, *rows = train.split(b"\n")[:-1]
    rows += dev.split(b"\n")[1:-1]
    glue = [b""] * len(rows)
    for row, i in zip(rows, order, strict=True):
        glue[i] = row
    return b"\n".join([header, *glue]) + b"\n"


def agnews_csv(tsv: bytes) -> bytes:
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    names = ["World", "Sports", "Business", "Sci/Tech"]
    for desc, name in csv.reader(io.StringIO(tsv.decode(), newline=""), delimiter="\t"):
        w.writerow([names.index(name) + 1, "a title", desc])
    return out.getvalue().encode()


@pytest.mark.skipif(not (REAL_DATA / "sst2").is_dir(), reason="needs the real data folder")
def test_the_whole_catalogue_fetched_from_official_formats_verifies_and_loads_the_same_examples(
        serve, tmp_path, monkeypatch, capsys):
    real = Path(REAL_DATA)
    b = {f.path: (real / f.path).read_bytes() for f in sources.FILES if (real / f.path).is_file()}
    served = {
        "glue/MNLI.zip": zipped({"MNLI/dev_matched.tsv": glue_dev_matched(b["mnli/dev_matched.tsv"]),
                                 "MNLI/train.tsv": glue_dev_matched(b["mnli/dev_matched.tsv"])}),
        "glue/SST-2.zip": zipped({"SST-2/train.tsv": glue_sst2_train(b["sst2/train.tsv"], b["sst2/dev.tsv"]),
                                  "SST-2/dev.tsv": b["sst2/test.tsv"]}),
        "paws.tar.gz": tarred({f"final/{s}.tsv": b"id\tsentence1\tsentence2\tlabel\r\n" + b[f"paws/wiki_{s}.tsv"]
                               for s in ("dev", "test")} | {"final/train.tsv": b"id\tsentence1\tsentence2\tlabel\r\n"}),
        "ag.csv": agnews_csv(b["agnews/test.tsv"]),
        "hans_eval.txt": hans_txt(b["hans/hans_eval.jsonl"]),
        "hans_train.txt": hans_txt(b["hans/hans_train.jsonl"]),
    }
    plain = {f.path: b[f.path] for f in sources.FILES if f.origin and f.origin.convert == "copy" and not f.origin.member}
    base = serve(served | plain)
    where = {"MNLI.zip": "glue/MNLI.zip", "SST-2.zip": "glue/SST-2.zip", "paws_wiki_labeled_final.tar.gz": "paws.tar.gz",
             "test.csv": "ag.csv", "heuristics_evaluation_set.txt": "hans_eval.txt",
             "heuristics_train_set.txt": "hans_train.txt"}
    local = []
    for f in sources.FILES:
        if f.origin is None:
            local.append(f)
            continue
        name = where.get(f.origin.url.rsplit("/", 1)[1], f.path)
        data = served.get(name) or plain[f.path]
        local.append(replace(f, origin=replace(f.origin, url=f"{base}/{name}", sha256=sha(data), git_blob="")))
    monkeypatch.setattr(sources, "FILES", local)
    dest = tmp_path / "data"
    assert main(["data", "fetch", "--dir", str(dest)]) == 0
    capsys.readouterr()
    main(["data", "verify", "--dir", str(dest)])
    out = capsys.readouterr().out
    by_hand = {f.path for f in local if f.origin is None}
    for f in local:
        line = next(x for x in out.splitlines() if f" {f.path}" in x)
        assert line.split()[0] == ("missing" if f.path in by_hand else "official" if f.origin.convert == "" else "ok"), line
    for p in ("sst2/train.tsv", "sst2/dev.tsv", "sst2/test.tsv", "agnews/test.tsv", "mnli/dev_matched_hardness.csv",
              "paws/wiki_dev.tsv", "paws/wiki_test.tsv"):
        assert (dest / p).read_bytes() == b[p], p  # the studies' bytes, rebuilt from the official formats

    from bench.data.tasks.glue import MNLIDevSplit, load_hans, read_hans

    ours, theirs = MNLIDevSplit().load(real), MNLIDevSplit().load(dest)  # GLUE's file, read as the studies' copy
    for split in ("train", "dev", "test"):
        assert [(e.text_a, e.text_b, e.label, e.group) for e in getattr(ours, split)] == \
               [(e.text_a, e.text_b, e.label, e.group) for e in getattr(theirs, split)]
    hans_ours = read_hans(real / "hans/hans_eval.jsonl", {"entailment": 0, "non-entailment": 1})
    hans_official = load_hans(dest).loader()[0]  # the official txt, matched by text
    assert sorted((e.text_a, e.text_b, e.label, e.group) for e in hans_ours) == \
           sorted((e.text_a, e.text_b, e.label, e.group) for e in hans_official)
