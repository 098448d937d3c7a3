"""Loading from the Hugging Face hub, failing fast with one message when offline.

Revisions are pinned per dataset in ``HubSpec``; the record stores id, config and revision.
"""

from __future__ import annotations

import functools
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlparse

from bench.data.examples import DataSource, Example
from bench.errors import BenchError, MissingData

Splits = tuple[list[Example], list[Example], DataSource]  # (train, test, where from)


def hub_reachable() -> bool:
    """One quick connection attempt, so that offline machines fail in seconds instead of
    sitting through the hub clients' retry loops; HF_HUB_OFFLINE=1 skips even that."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("0", "", "false"):
        return False
    return _connects()


@functools.cache
def _connects(timeout: float = 3.0) -> bool:
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def go_offline_unless_reachable() -> None:
    """Put the hub clients in offline mode (cache only) when the hub cannot be reached."""
    if not hub_reachable():
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["HF_DATASETS_OFFLINE"] = "1"
        # the clients read these once, at import: tell the ones already imported too
        for module, name in (("huggingface_hub.constants", "HF_HUB_OFFLINE"), ("datasets.config", "HF_HUB_OFFLINE"),
                             ("datasets.config", "HF_DATASETS_OFFLINE")):
            if module in sys.modules and hasattr(sys.modules[module], name):
                setattr(sys.modules[module], name, True)


@dataclass(frozen=True)
class HubSpec:
    repo: str
    config: str | None
    revision: str
    local_hint: str  # which files under --data-dir replace the hub copy

    def describe(self) -> str:
        return f"hub:{self.repo}" + (f"/{self.config}" if self.config else "") + f"@{self.revision}"


def load_hub_split(spec: HubSpec, split: str) -> tuple[list[dict], list[str] | None, str]:
    """(rows, label names if the label column is a ClassLabel, the split's fingerprint),
    or a BenchError that says how to provide the data offline."""
    go_offline_unless_reachable()
    try:
        import datasets  # heavy import, only when the hub is really used

        ds = datasets.load_dataset(spec.repo, spec.config, split=split, revision=spec.revision)
    except Exception as e:  # offline, unknown id, missing revision: all one answer for the user
        raise BenchError(
            f"{spec.describe()} split '{split}' is not available ({type(e).__name__}); "
            f"provide it offline with --data-dir DIR containing {spec.local_hint}"
        ) from e
    feature = ds.features.get("label")
    names = list(feature.names) if hasattr(feature, "names") else None
    return [dict(r) for r in ds], names, str(getattr(ds, "_fingerprint", ""))


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", " ")


def local_or_hub(
    local: Callable[[], Splits], spec: HubSpec, splits: tuple[str, str], columns: tuple[str, str, str],
    label_map: dict[str, int],
) -> Splits:
    """Local files when present, else the hub; when neither works, one error naming both.

    Only *missing* local files fall back to the hub: a local file that is present but wrong
    (bad checksum, unknown label) is an error. Hub labels are mapped by their ClassLabel
    names, never by position, since datasets order labels differently.
    """
    try:
        return local()
    except MissingData as local_err:
        try:
            loaded = [load_hub_split(spec, split) for split in splits]
        except BenchError as hub_err:
            raise BenchError(f"{local_err}; and {hub_err}") from hub_err
    a, b, y = columns
    by_name = {_norm(k): v for k, v in label_map.items()}
    out = []
    for split, (rows, names, _) in zip(splits, loaded, strict=True):
        if names is None or any(_norm(n) not in by_name for n in names):
            raise BenchError(f"{spec.describe()}: label names {names} do not match {list(label_map)}")
        remap = [by_name[_norm(n)] for n in names]
        out.append([Example(f"{spec.config or spec.repo}-{split}-{i}", r[a], r[b], remap[int(r[y])])
                    for i, r in enumerate(rows) if int(r[y]) >= 0])
    fingerprints = {f"{spec.describe()}/{split}": fp for split, (_, _, fp) in zip(splits, loaded, strict=True)}
    return out[0], out[1], DataSource("hub", spec.describe(), fingerprints)
