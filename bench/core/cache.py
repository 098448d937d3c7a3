"""The candidate cache: a built candidate is stored under ``<out>/artifacts/<method>-<key>``, the
key hashing its whole lineage (method and where its code comes from, typed params, task and data
checksums, backbone and its fingerprint, seed, sparsity, precision, device), so that a rerun or
another suite reuses it and a changed plug-in builds anew. Saved with safetensors and the
checksum of every file; read back only when every file matches (``atomic.intact``), without running any
code from the checkpoint. The harness's own code is not in the key (the record's commit names
it): after changing it, delete ``artifacts/`` to rebuild."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from bench.api import Candidate
from bench.data.examples import TaskData
from bench.errors import BenchError
from bench.model.backbone import Backbone, load_tokenizer, resolve
from bench.model.heads import load_pruned
from bench.model.masking import sparsity_report
from bench.model.quant import restore
from bench.registry import METHODS
from bench.spec.run import RunSpec, digest
from bench.store.atomic import atomic_dir, write_atomic


def lineage(spec: RunSpec, task: TaskData) -> dict:
    """Everything that decides a candidate; its hash names the artifact. It is the candidate's
    run configuration (``RunSpec.config``: every run field but where the data lies, so a field
    added to the run is in it without a word here), with the method's parameters in full, the
    data's and the backbone's checksums and where the method's code comes from."""
    extra = METHODS.get(spec.method).lineage_extra(task, spec.data_path, spec.params)
    out = {k: v for k, v in spec.candidate().config().items() if k not in ("suite", "suite_params", "data_dir")}
    out |= {"params": dataclasses.asdict(spec.params), "plugin": dataclasses.asdict(METHODS.origin(spec.method)),
            "data": task.id_checksums(), "backbone_fingerprint": resolve(spec.backbone).fingerprint()}
    out = out | ({"extra": extra} if extra else {})
    return out | {"key": f"{spec.method}-{digest(out)}"}


def save(art: Path, cand: Candidate) -> None:
    """Weights (masks baked in), tokenizer, binary masks and metadata, published atomically."""
    with atomic_dir(art) as tmp:
        cand.model.save_pretrained(tmp, safe_serialization=True)
        cand.tokenizer.save_pretrained(tmp)
        if cand.masks:
            save_file({k: v.to(torch.uint8).contiguous() for k, v in cand.masks.items()}, str(tmp / "masks.safetensors"))
        meta = {"lineage": cand.lineage, "info": cand.info, "sparsity": cand.sparsity.to_dict()}
        write_atomic(tmp / "candidate.json", json.dumps(meta, indent=1, default=str))


def load(art: Path, lineage: dict) -> Candidate:
    """A cached candidate found ``intact``, or a one-line error naming the directory to delete."""
    from transformers import AutoModelForSequenceClassification

    try:
        meta = json.loads((art / "candidate.json").read_text())
        if "bench_kept_heads" in json.loads((art / "config.json").read_text()):  # heads removed
            model = load_pruned(art, AutoModelForSequenceClassification)
        else:
            model = AutoModelForSequenceClassification.from_pretrained(art, local_files_only=True, use_safetensors=True)
        masks = {}
        if (art / "masks.safetensors").is_file():
            masks = {k: v.bool() for k, v in load_file(str(art / "masks.safetensors")).items()}
    except Exception as e:
        raise BenchError(f"cached checkpoint {art} is unreadable ({type(e).__name__}); delete that directory to rebuild it") from e
    tok = load_tokenizer(Backbone(str(art), str(art), True))
    report = sparsity_report(model)  # counted from the weights, as when it was saved
    return Candidate(model=restore(model, meta["info"]), tokenizer=tok, lineage=lineage, info=meta["info"], masks=masks,
                     sparsity=report)


OWN_FILES = ("masks.safetensors", "candidate.json", "SHA256SUMS")  # the harness's, not a checkpoint's


def export(source: Path, to: Path) -> Path:
    """A cached candidate as a standard Hugging Face checkpoint directory: config (its
    ``id2label`` the task's labels), tokenizer and safetensors weights, which
    ``AutoModelForSequenceClassification.from_pretrained`` loads as it is and the ``checkpoint``
    method judges to the same predictions. ``source`` is a record (its candidate) or an
    artifact directory; it is read only when its checksums hold."""
    from bench.store.atomic import damage
    from bench.store.records import load_record

    art = source
    if source.suffix == ".json":
        art = (source.parent / load_record(source).artifact["dir"]).resolve()
    if not (art / "candidate.json").is_file():
        raise BenchError(f"{source} is neither a run record nor a cached candidate's directory (no candidate.json)")
    if (why := damage(art)) is not None:
        raise BenchError(f"cached candidate {art} is damaged ({why}); rerun its run with --force to rebuild it")
    config = json.loads((art / "config.json").read_text())
    if json.loads((art / "candidate.json").read_text())["info"].get("quantize"):
        raise BenchError(f"{art} is dynamically quantized on load, which a standard checkpoint cannot say; not exported")
    if config.get("bench_kept_heads"):
        raise BenchError(f"{art} has attention heads removed, which a standard checkpoint cannot say; not exported")
    if to.exists():
        raise BenchError(f"{to} exists; export into a new directory")
    with atomic_dir(to) as tmp:
        for f in sorted(art.iterdir()):
            if f.name not in OWN_FILES:
                (tmp / f.name).write_bytes(f.read_bytes())
    return to
