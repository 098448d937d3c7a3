"""Loading from the Hugging Face hub, failing fast with one message when offline.

Revisions are pinned per dataset in ``HubSpec``; the record stores id, config and revision.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.errors import BenchError


@dataclass(frozen=True)
class HubSpec:
    repo: str
    config: str | None
    revision: str
    local_hint: str  # which files under --data-dir replace the hub copy

    def describe(self) -> str:
        return f"hub:{self.repo}" + (f"/{self.config}" if self.config else "") + f"@{self.revision}"


def load_hub_split(spec: HubSpec, split: str) -> list[dict]:
    """Rows of one split, or a BenchError that says how to provide the data offline."""
    try:
        import datasets  # heavy import, only when the hub is really used

        ds = datasets.load_dataset(spec.repo, spec.config, split=split, revision=spec.revision)
    except Exception as e:  # offline, unknown id, missing revision: all one answer for the user
        raise BenchError(
            f"{spec.describe()} split '{split}' is not available ({type(e).__name__}); "
            f"provide it offline with --data-dir DIR containing {spec.local_hint}"
        ) from e
    return [dict(r) for r in ds]
