"""Distilled-model baselines (Du et al. 2023, section 3; docs/design.md section 4): students of about
half the backbone's depth, fine-tuned with the task recipe.

- ``student=truncated``: the backbone's first ``layers`` layers (half by default), the
  "truncated" control of Du et al.
- ``student=distilled``: a student of that depth distilled task-agnostically from the backbone
  on unlabelled text available offline (``bench.data.corpus``: SST-2, AG News and MNLI sentences of
  the data directory, else the task's training text). It starts from every other teacher layer
  (layers 2, 4, 6 of six, as DistilBERT takes every other layer) and the teacher's embeddings,
  and minimises sum_i MSE(h_student^i, h_teacher^(2i)) over the hidden states of its layers
  (the hidden-state loss of TinyBERT's general distillation; Jiao et al.
  2020), 1,500 steps of 48 sentences, built once per corpus and cached; the held-out cosine
  between student and teacher final states is recorded. With the embedded MiniLM-L6 these are
  3-layer students of MiniLM-L6, labelled as such, not DistilBERT or MiniLM (docs/design.md section 6).
- ``student=DIR``: any local checkpoint (for example DistilBERT or MiniLM distilled from a
  bert-base teacher), fine-tuned the same way. It must not be deeper than the backbone.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch

from bench.api import Candidate, Context, Method
from bench.data.corpus import corpus, held_out_texts
from bench.data.places import cache_dir
from bench.errors import BenchError
from bench.model.arch import keep_layers, layers, truncate
from bench.model.backbone import Backbone, _fingerprint, load_classifier, load_tokenizer
from bench.model.losses import ce
from bench.registry import METHODS
from bench.store.atomic import atomic_dir, exclusive, intact
from bench.train.loop import TrainParams, train

DISTILL_STEPS = 1500
DISTILL_BATCH = 48
HELD_OUT = 300


@dataclass
class DistilledParams(TrainParams):
    ALLOWED_LOSSES: ClassVar[tuple[str, ...]] = ("ce",)

    student: str = "truncated"  # truncated | distilled | a local model directory
    layers: int = 0  # 0: half of the backbone's layers (rounded up)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.layers < 0:
            raise BenchError(f"layers must be >= 0, got {self.layers}")


def _depth(model) -> int:
    return len(layers(model))


def _corpus(task, data_dir) -> tuple[list[str], str, str]:
    """(texts, description, sha256) of the distillation corpus for this task."""
    texts, described = corpus(data_dir, [t for e in task.train for t in (e.text_a, e.text_b) if t], held_out_texts(task))
    return texts, described, hashlib.sha256("\n".join(texts).encode()).hexdigest()


def distill_student(bb: Backbone, keep: int, texts: list[str], out: Path, progress: bool = False) -> dict:
    """Task-agnostic hidden-state distillation of a ``keep``-layer student from the backbone."""
    from tqdm import tqdm
    from transformers import AutoModel, AutoTokenizer

    if len(texts) < HELD_OUT + 100:
        raise BenchError(f"too little text ({len(texts)} sentences) to distil a student; pass --data-dir")
    tok = AutoTokenizer.from_pretrained(bb.path, local_files_only=bb.local_only)
    teacher = AutoModel.from_pretrained(bb.path, local_files_only=bb.local_only).eval()
    depth = len(layers(teacher))
    stride = depth // keep
    mapping = [stride * (i + 1) for i in range(keep)]  # student layer i <- teacher layer mapping[i] (1-based)
    torch.manual_seed(0)
    student = AutoModel.from_pretrained(bb.path, local_files_only=bb.local_only)
    keep_layers(student, [m - 1 for m in mapping])
    for q in student.embeddings.parameters():
        q.requires_grad_(False)
    params = [q for q in student.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-4, total_steps=DISTILL_STEPS, pct_start=0.1)
    held, train_texts = texts[:HELD_OUT], texts[HELD_OUT:]
    t0 = time.time()
    student.train()
    for step in tqdm(range(DISTILL_STEPS), desc="distil student", disable=not progress, leave=False):
        batch = [train_texts[(step * DISTILL_BATCH + i) % len(train_texts)] for i in range(DISTILL_BATCH)]
        enc = tok(batch, truncation=True, max_length=64, padding=True, return_tensors="pt")
        with torch.no_grad():
            t_hidden = teacher(**enc, output_hidden_states=True).hidden_states
        s_hidden = student(**enc, output_hidden_states=True).hidden_states
        real = enc["attention_mask"].unsqueeze(-1).float()
        loss = sum(((s_hidden[i + 1] - t_hidden[m]) ** 2 * real).sum() / real.sum() / s_hidden[0].shape[-1]
                   for i, m in enumerate(mapping))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    student.eval()
    with torch.no_grad():
        enc = tok(held, truncation=True, max_length=64, padding=True, return_tensors="pt")
        s = student(**enc).last_hidden_state
        t = teacher(**enc).last_hidden_state
        real = enc["attention_mask"].bool()
        cos = torch.nn.functional.cosine_similarity(s[real], t[real], dim=-1).mean().item()
    quality = {"held_out_cosine_final_layer": cos, "mapping": mapping, "steps": DISTILL_STEPS,
               "seconds": round(time.time() - t0, 1), "train_sentences": len(train_texts)}
    with atomic_dir(out) as tmp:
        student.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / "quality.json").write_text(json.dumps(quality, indent=1))
    return quality


@METHODS.register("distilled")
class Distilled(Method):
    name = "distilled"
    description = "half-depth students fine-tuned with the task recipe: truncated, distilled (task-agnostic, offline) or a given checkpoint"
    Params = DistilledParams

    def fixed_examples(self, p: DistilledParams) -> int:
        """The task-agnostic distillation (1,500 steps of 48 sentences; 34 minutes on 2 cores),
        built once per corpus: a sweep's first distilled job pays it."""
        return DISTILL_STEPS * DISTILL_BATCH if p.student == "distilled" else 0

    def label(self, p: DistilledParams) -> str:
        if p.student in ("truncated", "distilled"):
            return f"{p.student} student ({p.layers or 'half'} layers)"
        return f"student {Path(p.student).name}"

    def lineage_extra(self, task, data_dir, p: DistilledParams) -> dict:
        if p.student == "distilled":
            return {"corpus": _corpus(task, data_dir)[2]}
        if p.student != "truncated" and (Path(p.student).expanduser() / "config.json").is_file():
            return {"student": _fingerprint(str(Path(p.student).expanduser().resolve()))}
        return {}

    def build(self, ctx: Context, p: DistilledParams) -> Candidate:
        teacher_depth = _depth(load_classifier(ctx.backbone, len(ctx.task.labels), ctx.seed))
        keep = p.layers or math.ceil(teacher_depth / 2)
        if keep > teacher_depth:
            raise BenchError(f"a {keep}-layer student is deeper than the {teacher_depth}-layer backbone")
        info: dict = {}
        if p.student == "truncated":
            source, tok = ctx.backbone, load_tokenizer(ctx.backbone)
            model = load_classifier(source, len(ctx.task.labels), ctx.seed)
            truncate(model, keep)
            info["student"] = f"first {keep} of {teacher_depth} layers of {ctx.backbone.describe()}"
        elif p.student == "distilled":
            texts, described, digest = _corpus(ctx.task, ctx.data_dir)
            digest = hashlib.sha256((digest + ctx.backbone.fingerprint()).encode()).hexdigest()[:12]
            out = cache_dir() / "students" / f"{keep}layer-{digest}"
            with exclusive(out):  # two seeds' builds at once distil it once
                if not intact(out):
                    distill_student(ctx.backbone, keep, texts, out, ctx.progress)
            source = Backbone(str(out), str(out), True)
            tok = load_tokenizer(source)
            model = load_classifier(source, len(ctx.task.labels), ctx.seed)
            quality = json.loads((out / "quality.json").read_text())
            info.update(student=f"{keep}-layer student distilled from {ctx.backbone.describe()} on {described} "
                                f"({len(texts)} sentences)", distillation=quality,
                        student_cache=f"students/{out.name}")  # in bench.data.places.cache_dir(), no local path
        else:
            path = Path(p.student).expanduser()
            if not (path / "config.json").is_file():
                raise BenchError(f"student '{p.student}' is neither truncated, distilled nor a model directory")
            source = Backbone(str(path), str(path.resolve()), True)
            tok = load_tokenizer(source)
            model = load_classifier(source, len(ctx.task.labels), ctx.seed)
            if _depth(model) > teacher_depth:
                raise BenchError(f"student {path.name} has {_depth(model)} layers, more than the {teacher_depth}-layer backbone")
            info["student"] = f"{path.name} ({_depth(model)} layers), given by the user"
        result = train(model, tok, ctx, TrainParams(loss="ce", **p.recipe()), lambda logits, y, idx: ce(logits, y),
                       desc=f"{p.student} student")
        info.update(layers=_depth(model), teacher_layers=teacher_depth, best_step=result.best_step,
                    best_dev=result.best_dev, train_steps=result.steps, kept=[result.kept()], train_seconds=result.seconds,
                    history=result.history)
        return Candidate(model=model, tokenizer=tok, lineage={}, info=info)
