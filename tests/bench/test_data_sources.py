"""`bench data`: the real files' sources and checksums, fetched from a server and verified
(here a local HTTP server on 127.0.0.1 serving a fixture copy, one file of it corrupted)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading

import pytest

from bench.cli import main
from bench.data import sources
from bench.data.sources import DataFile, fetch


@pytest.fixture
def served(tmp_path):
    """A fixture copy of a data folder behind http://127.0.0.1:PORT/, and the list describing it:
    ``good.jsonl`` served as listed, ``bad.jsonl`` served with one byte changed."""
    site = tmp_path / "site"
    (site / "sets").mkdir(parents=True)
    good, bad = b'{"premise": "a", "hypothesis": "b", "label": 0}\n' * 50, b"the listed bytes\n" * 20
    (site / "sets" / "good.jsonl").write_bytes(good)
    (site / "sets" / "bad.jsonl").write_bytes(bad[:-2] + b"X\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    blob = hashlib.sha1(b"blob %d\0" % len(good) + good).hexdigest()
    files = [DataFile("sets/good.jsonl", "a set", "MIT", "https://example.org", hashlib.sha256(good).hexdigest(),
                      base + "/sets/good.jsonl"),
             DataFile("sets/bad.jsonl", "a set", "MIT", "https://example.org", hashlib.sha256(bad).hexdigest(),
                      base + "/sets/bad.jsonl"),
             DataFile("sets/by_git.jsonl", "a set", "MIT", "https://example.org", url=base + "/sets/good.jsonl",
                      git_blob=blob),
             DataFile("other/by_hand.tsv", "a set", "MIT", "https://example.org/page", "0" * 64)]
    yield base, files
    server.shutdown()


def test_fetch_verifies_each_file_and_leaves_nothing_of_a_corrupted_one(served, tmp_path):
    base, files = served
    dest = tmp_path / "data"
    problems = fetch(files, dest, log=lambda line: None)
    assert (dest / "sets" / "good.jsonl").is_file() and (dest / "sets" / "by_git.jsonl").is_file()
    assert not (dest / "sets" / "bad.jsonl").exists()
    assert sorted(p.name for p in (dest / "sets").iterdir()) == ["by_git.jsonl", "good.jsonl"]  # no temporary left
    assert any("bad.jsonl: what http://127.0.0.1" in p and "does not match its checksum; refused" in p for p in problems)
    said = []
    fetch(files[3:], dest, log=said.append)  # no URL: where to get it, and not a failure
    assert said == ["other/by_hand.tsv: get it by hand from https://example.org/page (its official distribution is another file)"]
    assert len(problems) == 1 and fetch(files[:1], dest, log=lambda line: None) == []  # already here: not downloaded again


def test_the_command_lists_fetches_from_a_mirror_and_verifies_a_folder(served, tmp_path, monkeypatch, capsys):
    base, files = served
    monkeypatch.setattr(sources, "FILES", files)
    dest = tmp_path / "data"
    assert main(["data", "fetch", "sets/good.jsonl", "--dir", str(dest), "--mirror", base]) == 0
    assert main(["data", "fetch", "sets", "--dir", str(dest)]) == 2  # the corrupted one is refused
    err = capsys.readouterr().err
    assert "bench: error: sets/bad.jsonl" in err and "Traceback" not in err
    assert main(["data", "verify", "--dir", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "ok       sets/good.jsonl" in out and "missing  sets/bad.jsonl" in out and "2 verified, 0 differ, 2 missing" in out
    (dest / "sets" / "good.jsonl").write_bytes(b"edited\n")
    assert main(["data", "verify", "--dir", str(dest)]) == 2
    assert "good.jsonl is not the file listed" in capsys.readouterr().err
    assert main(["data", "fetch", "nosuch", "--dir", str(dest)]) == 2
    assert "no data file or folder 'nosuch'" in capsys.readouterr().err


def test_offline_a_fetch_is_one_line_saying_what_to_do_on_a_connected_machine(tmp_path, capsys, monkeypatch):
    closed = [DataFile(f"sets/{name}.jsonl", "a set", "MIT", "https://example.org", "0" * 64,
                       f"http://127.0.0.1:9/sets/{name}.jsonl") for name in ("x", "y")]
    monkeypatch.setattr(sources, "FILES", closed)
    assert main(["data", "fetch", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach 127.0.0.1:9" in err[0] and "2 files not fetched" in err[0]
    assert "on a connected machine run 'bench data fetch sets/x.jsonl sets/y.jsonl --dir DIR'" in err[0]
    assert list(tmp_path.rglob("*.tmp")) == []


def test_every_listed_file_has_a_checksum_a_licence_and_a_source():
    assert all((f.sha256 or f.git_blob) and f.licence and f.source.startswith("http") for f in sources.FILES)
    assert all(f.url.startswith("https://raw.githubusercontent.com/") and "/" in f.url for f in sources.FILES if f.url)
    paths = [f.path for f in sources.FILES]
    assert len(paths) == len(set(paths))
