"""``bench data fetch``: every listed file from its official distribution (``sources.Origin``),
converted to the layout the loaders read and kept only if its bytes are the ones listed.

What an address serves is streamed to a temporary file outside the data folder and checked
against its pinned checksum before anything is extracted; one archive is downloaded once for all
the files it holds. A converted file is written under a temporary name beside its target and
renamed only once its SHA-256 is the listed one, so a failed or corrupted download leaves
nothing behind, and the data folder is created only when the first file is kept. A redirect to
another host is refused: the pins name the hosts that serve the bytes.
"""

from __future__ import annotations

import array
import contextlib
import csv
import gzip
import hashlib
import io
import os
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.data.sources import DataFile, Origin, git_blob_id, status
from bench.errors import BenchError
from bench.store.atomic import _tag

SPLITS = Path(__file__).parent / "splits"


def _sst2_rows(data: bytes, part: str) -> bytes:
    """GLUE's SST-2 train.tsv cut into the studies' train (60,614 rows) and dev (6,735 rows), in
    their order: ``splits/sst2_train_dev.u32le.gz`` lists, for each row of train then dev, its
    line in GLUE's file (0 = the first after the header). The studies' split was drawn once; the
    list keeps it without shipping a word of the data."""
    header, *rows = data.split(b"\n")
    if rows and rows[-1] == b"":
        rows.pop()
    order = array.array("I")
    order.frombytes(gzip.decompress((SPLITS / "sst2_train_dev.u32le.gz").read_bytes()))
    if len(rows) != len(order):
        raise BenchError(f"GLUE's SST-2 train.tsv has {len(rows)} rows, the split lists {len(order)}")
    picked = order[:60_614] if part == "train" else order[60_614:]
    return b"\n".join([header, *(rows[i] for i in picked)]) + b"\n"


def _agnews_tsv(data: bytes) -> bytes:
    """Zhang et al.'s CSV (class index 1-4, title, description) as the layout's TSV: the
    description and the class name, written by Python's csv module with tabs (a description that
    holds a quote is quoted)."""
    names = ("World", "Sports", "Business", "Sci/Tech")
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    for row in csv.reader(io.StringIO(data.decode("utf-8"), newline="")):
        writer.writerow([row[2], names[int(row[0]) - 1]])
    return out.getvalue().encode("utf-8")


CONVERTERS: dict[str, Callable[[bytes], bytes]] = {
    "copy": lambda data: data,
    "drop_header": lambda data: data.split(b"\n", 1)[1],
    "sst2_train": lambda data: _sst2_rows(data, "train"),
    "sst2_dev": lambda data: _sst2_rows(data, "dev"),
    "agnews_tsv": _agnews_tsv,
}


class _SameHost(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: PLR0913 (urllib's signature)
        old, new = urllib.parse.urlsplit(req.full_url).netloc, urllib.parse.urlsplit(newurl).netloc
        if new != old:
            raise urllib.error.HTTPError(newurl, code, f"redirected from {old} to another host, {new}: refused",
                                         headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_SameHost)


class Unreachable(Exception):
    """The host could not be reached (offline, DNS, refused): the other files it serves are skipped."""


@dataclass
class Download:
    """What one address served, checked against its pin, in a temporary folder."""

    path: Path

    def member(self, origin: Origin) -> bytes:
        if not origin.member:
            return self.path.read_bytes()
        try:
            if zipfile.is_zipfile(self.path):
                with zipfile.ZipFile(self.path) as z:
                    return z.read(origin.member)
            with tarfile.open(self.path) as t:
                names = {m.name.removeprefix("./"): m for m in t.getmembers() if m.isfile()}
                handle = t.extractfile(names[origin.member])
                return handle.read()
        except KeyError:
            raise BenchError(f"{origin.url} has no {origin.member}") from None
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as e:
            raise BenchError(f"{origin.url} is not a readable archive ({e})") from None


def download(origin: Origin, tmp: Path) -> Download:
    """Stream what ``origin.url`` serves into ``tmp`` and check its pin."""
    target = tmp / hashlib.sha256(origin.url.encode()).hexdigest()[:16]
    digest = hashlib.sha256()
    try:
        with _OPENER.open(origin.url, timeout=60) as response, open(target, "wb") as out:
            while block := response.read(1 << 20):
                digest.update(block)
                out.write(block)
    except urllib.error.HTTPError as e:
        raise BenchError(f"{origin.url} answered {e.code} {e.reason}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
        raise Unreachable(getattr(e, "reason", None) or e) from None
    except OSError as e:  # the temporary copy could not be written (a full disk): not the network
        raise BenchError(f"cannot write {e.filename or target}: {e.strerror or e}") from None
    if origin.sha256 and digest.hexdigest() != origin.sha256:
        raise BenchError(f"what {origin.url} served does not match its pinned checksum (corrupted or changed); refused")
    if origin.git_blob and git_blob_id(target.read_bytes()) != origin.git_blob:
        raise BenchError(f"what {origin.url} served is not the pinned git blob {origin.git_blob[:12]}; refused")
    return Download(target)


def _keep(data: bytes, target: Path) -> None:
    """Write ``data`` to ``target`` atomically (a temporary name beside it, then a rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f"{_tag(target.name)}download.tmp"
    try:
        tmp.write_bytes(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _mirrored(f: DataFile, mirror: str) -> Origin:
    if not f.sha256:
        raise BenchError(f"{f.path} has no listed checksum, so a mirror's copy cannot be checked: fetch it from "
                         f"{f.origin.url if f.origin else f.source}")
    return Origin(mirror.rstrip("/") + "/" + f.path)


def fetch(files: list[DataFile], folder: Path, mirror: str = "", log=print) -> list[str]:
    """Fetch each file that is not already here; returns one line per problem. Each file is
    converted from its origin and kept if its bytes are the listed ones; where the origin's
    conversion is not exact (or no conversion reproduces the studies' copy), the official file
    is kept under its official name instead, which the loaders read. A file with no pinned
    download is named with where to get it. Offline, one line says what to fetch, and nothing is
    created."""
    problems: list[str] = []
    unreachable: dict[str, tuple[str, list[str]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fetch-") as tmp:
        downloads: dict[str, Download | BenchError | Unreachable] = {}
        for f in files:
            state = status(f, folder)
            if state == "ok":
                log(f"{f.path}: already here and verified")
                continue
            if state == "official":
                log(f"{f.path}: the official {f.official} is here instead")
                continue
            origin = _mirrored(f, mirror) if mirror else f.origin
            if origin is None:
                log(f"{f.path}: no pinned download is listed for it; get it by hand from {f.source} (docs/data.md)")
                continue
            host = urllib.parse.urlsplit(origin.url).netloc
            if host in unreachable:
                unreachable[host][1].append(f.path)
                continue
            if origin.url not in downloads:
                try:
                    downloads[origin.url] = download(origin, Path(tmp))
                except (BenchError, Unreachable) as e:
                    downloads[origin.url] = e
            got = downloads[origin.url]
            if isinstance(got, Unreachable):
                unreachable.setdefault(host, (str(got), []))[1].append(f.path)
                continue
            if isinstance(got, BenchError):
                problems.append(f"{f.path}: {got}")
                continue
            try:
                data = got.member(origin)
                converted = CONVERTERS[origin.convert](data) if origin.convert else None
            except BenchError as e:
                problems.append(f"{f.path}: {e}")
                continue
            except (ValueError, IndexError, UnicodeDecodeError) as e:
                converted, why = None, f"the conversion failed ({e})"
            else:
                why = "no conversion reproduces the studies' copy"
            try:
                if converted is not None and (not f.sha256 or hashlib.sha256(converted).hexdigest() == f.sha256):
                    _keep(converted, folder / f.path)
                    log(f"{f.path}: fetched from {origin.url}" + (" and verified" if f.sha256 else " (its archive verified)"))
                elif f.official and not mirror:
                    if converted is not None:
                        why = "the converted bytes are not the studies' copy"
                    _keep(data, folder / f.official)
                    log(f"{f.path}: {why}; kept the official {f.official} (the loaders read it; records carry its checksum)")
                else:
                    problems.append(f"{f.path}: what {origin.url} served does not match its checksum; refused")
            except OSError as e:
                raise BenchError(f"cannot write {e.filename or folder}: {e.strerror or e}") from None
    if unreachable:
        hosts = ", ".join(f"{host} ({reason})" for host, (reason, _) in unreachable.items())
        paths = [p for _, ps in unreachable.values() for p in ps]
        problems.append(f"cannot reach {hosts}: {len(paths)} files not fetched; on a connected machine run "
                        f"'bench data fetch {' '.join(paths)} --dir DIR' and copy DIR here")
    return problems


def plan(files: list[DataFile], folder: Path) -> list[str]:
    """What ``fetch`` would download, from where and how large, before it downloads anything."""
    lines, seen, total = [], set(), 0
    for f in files:
        state = status(f, folder)
        if state in ("ok", "official"):
            lines.append(f"  here     {f.path}")
            continue
        if f.origin is None:
            lines.append(f"  by hand  {f.path:<40} from {f.source}")
            continue
        o = f.origin
        new = o.url not in seen
        seen.add(o.url)
        total += o.size if new else 0
        size = (f"{o.size / 1e6:,.1f} MB" if o.size else "size not listed") if new else "same download"
        how = f"{o.member} of it, " if o.member else ""
        if not o.convert:
            how += f"kept as {f.official} (no conversion reproduces the studies' copy)"
        else:
            how += f"converted ({o.convert})" if o.convert != "copy" else "as served"
        lines.append(f"  fetch    {f.path:<40} {o.url} ({size}): {how}")
    lines.append(f"{total / 1e6:,.1f} MB to download (listed sizes), into {folder}")
    return lines
